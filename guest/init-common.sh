# Shared by the PID-1 init scripts of the booted images (dom0-init.sh, native-init.sh), which
# source it from /usr/lib/schedlab/init-common.sh after setting INIT_NAME. No systemd/udev:
# under TCG they take minutes; this brings a kernel from "started" to "sshd up" in seconds.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log() { echo "$INIT_NAME: $*" >/dev/console 2>/dev/null || echo "$INIT_NAME: $*"; }
mnt() { mountpoint -q "$3" 2>/dev/null || mount -t "$1" "$2" "$3"; }

# proc, sys, dev, tmpfs for /run, /tmp and /dev/shm; / read-write
mount_base() {
    mnt proc proc /proc
    mnt sysfs sysfs /sys
    mnt devtmpfs devtmpfs /dev
    mkdir -p /dev/pts /dev/shm
    mnt devpts devpts /dev/pts
    mnt tmpfs tmpfs /dev/shm
    mnt tmpfs tmpfs /run
    mnt tmpfs tmpfs /tmp
    chmod 1777 /tmp /dev/shm
    mount -o remount,rw / || log "WARNING: could not remount / rw"
    mkdir -p /run/sshd /run/lock
}

# QEMU user networking, static with QEMU's defaults, on the first ethernet device
# (net.ifnames=0 keeps it eth0; don't rely on the name). $1: more devices to skip (regex).
user_network() {
    ip link set lo up
    nic=eth0
    [ -e /sys/class/net/$nic ] || nic=$(ls /sys/class/net | grep -v -E "^(lo${1:+|$1})\$" | head -n1)
    ip addr add 10.0.2.15/24 dev "$nic" && ip link set "$nic" up && ip route add default via 10.0.2.2 \
        || log "WARNING: network setup of '$nic' failed"
}

start_sshd() { /usr/sbin/sshd -E /var/log/sshd.log && log "sshd started"; }

# Become busybox init: it reaps orphans and idles (the inittab has no gettys).
become_init() {
    exec -a init /bin/busybox init
    log "ERROR: busybox init failed; idling"
    while :; do wait; sleep 60; done
}
