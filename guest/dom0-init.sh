#!/bin/bash
# schedlab dom0 init (PID 1), installed as /sbin/schedlab-init in the qemu testbed's dom0
# image and started with init=/sbin/schedlab-init. Messages go to hvc0 (the serial log).
INIT_NAME=schedlab-init
. /usr/lib/schedlab/init-common.sh

mount_base
mkdir -p /run/xen /var/run/xen /var/log/xen
hostname schedlab-dom0
log "mounted at $(cut -d' ' -f1 /proc/uptime)s; loading modules"

for m in virtio_net xenfs xen-evtchn xen-gntdev xen-gntalloc xen-privcmd xen-netback bridge; do
    modprobe -q "$m" || log "modprobe $m failed"
done
log "modules loaded at $(cut -d' ' -f1 /proc/uptime)s"
mnt xenfs xenfs /proc/xen

# Network: QEMU user networking + an internal bridge for the guests.
user_network 'xenbr.*|vif.*'
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

start_sshd
log "SCHEDLAB-DOM0-READY $(cut -d' ' -f1 /proc/uptime)s"
become_init
