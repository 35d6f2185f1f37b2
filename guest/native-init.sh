#!/bin/bash
# schedlab native init (PID 1) for kernels booted without Xen (S2 native side), installed as
# /sbin/schedlab-native-init in the native image and started with init=/sbin/schedlab-native-init.
# No systemd/udev (slow under TCG): mount, network (QEMU user networking), sshd, then busybox
# init, which reaps orphans (e.g. the PostgreSQL server pg_ctl leaves behind). Everything the
# kernel needs is built in, so nothing is loaded. Messages go to the console (ttyS0).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log() { echo "schedlab-native-init: $*" >/dev/console 2>/dev/null || echo "schedlab-native-init: $*"; }
mnt() { mountpoint -q "$3" 2>/dev/null || mount -t "$1" "$2" "$3"; }

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
mkdir -p /run/sshd /run/lock /run/postgresql
chown postgres:postgres /run/postgresql 2>/dev/null
chmod 2775 /run/postgresql
hostname schedlab-native
log "mounted at $(cut -d' ' -f1 /proc/uptime)s"

# Network: QEMU user networking (static, QEMU's defaults).
ip link set lo up
nic=eth0
[ -e /sys/class/net/$nic ] || nic=$(ls /sys/class/net | grep -v -E '^lo$' | head -n1)
ip addr add 10.0.2.15/24 dev "$nic" && ip link set "$nic" up && ip route add default via 10.0.2.2 \
    || log "WARNING: network setup of '$nic' failed"

/usr/sbin/sshd -E /var/log/sshd.log && log "sshd started"
log "SCHEDLAB-NATIVE-READY $(cut -d' ' -f1 /proc/uptime)s $(uname -r)"

exec -a init /bin/busybox init
log "ERROR: busybox init failed; idling"
while :; do wait; sleep 60; done
