#!/bin/bash
# schedlab dom0 init (PID 1), installed as /sbin/schedlab-init in the qemu testbed's dom0
# image and started with init=/sbin/schedlab-init. No systemd/udev: under TCG this brings
# dom0 from "kernel started" to "sshd up" in seconds. Messages go to hvc0 (the serial log).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
log() { echo "schedlab-init: $*" >/dev/console 2>/dev/null || echo "schedlab-init: $*"; }
mnt() { mountpoint -q "$3" 2>/dev/null || mount -t "$1" "$2" "$3"; }

mnt proc proc /proc
mnt sysfs sysfs /sys
mnt devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mnt devpts devpts /dev/pts
mnt tmpfs tmpfs /dev/shm
mnt tmpfs tmpfs /run
mnt tmpfs tmpfs /tmp
mount -o remount,rw / || log "WARNING: could not remount / rw"
mkdir -p /run/sshd /run/xen /run/lock /var/run/xen /var/log/xen
hostname schedlab-dom0
log "mounted at $(cut -d' ' -f1 /proc/uptime)s; loading modules"

for m in virtio_net xenfs xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xen-netback bridge; do
    modprobe -q "$m" || log "modprobe $m failed"
done
log "modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
mnt xenfs xenfs /proc/xen

# Network: QEMU user networking (static, QEMU's defaults) + an internal bridge for the guests.
ip link set lo up
# The first ethernet device (net.ifnames=0 keeps it eth0; don't rely on the name anyway).
nic=eth0
[ -e /sys/class/net/$nic ] || nic=$(ls /sys/class/net | grep -v -E '^(lo|xenbr.*|vif.*)$' | head -n1)
ip addr add 10.0.2.15/24 dev "$nic" && ip link set "$nic" up && ip route add default via 10.0.2.2 \
    || log "WARNING: network setup of '$nic' failed"
ip link add xenbr0 type bridge && ip addr add 10.10.0.1/24 dev xenbr0 && ip link set xenbr0 up \
    || log "WARNING: xenbr0 setup failed"

# Xen toolstack daemons (what Debian's /etc/init.d/xen does, without LSB/systemd).
XENBIN=$(ls -d /usr/lib/xen-*/bin 2>/dev/null | head -n1)
mkdir -p /run/xenstored
export XENSTORED_ROOTDIR=/run/xenstored
if [ -x "$XENBIN/oxenstored" ]; then
    "$XENBIN/oxenstored" --pid-file /run/xenstore.pid && log "oxenstored started"
elif [ -x "$XENBIN/xenstored" ]; then
    "$XENBIN/xenstored" --pid-file /run/xenstore.pid && log "xenstored started"
else
    log "ERROR: no xenstored in $XENBIN"
fi
for i in $(seq 100); do xenstore-read -s / >/dev/null 2>&1 && break; sleep 0.2; done
"$XENBIN/xen-init-dom0" >/dev/null 2>&1 || log "WARNING: xen-init-dom0 failed"
mkdir -p /var/log/xen/console
"$XENBIN/xenconsoled" --pid-file=/run/xen/xenconsoled.pid --log=guest --log-dir=/var/log/xen/console && log "xenconsoled started"

/usr/sbin/sshd -E /var/log/sshd.log && log "sshd started"
log "SCHEDLAB-DOM0-READY $(cut -d' ' -f1 /proc/uptime)s"

# Become busybox init: it reaps orphans and idles (the inittab has no gettys).
exec -a init /bin/busybox init
log "ERROR: busybox init failed; idling"
while :; do wait; sleep 60; done
