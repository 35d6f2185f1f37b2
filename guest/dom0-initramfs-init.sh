#!/bin/busybox sh
# schedlab dom0 initramfs /init: load the few modules needed to mount the root disk, mount
# it and switch to it. Replaces Debian's initramfs-tools (whose udev coldplug alone takes
# ~40 s under TCG). Kernel command line: root=/dev/vda init=/sbin/schedlab-init
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
root=/dev/vda; init=/sbin/init; rootfstype=ext4
for a in $(cat /proc/cmdline); do
    case "$a" in
        root=*) root=${a#root=} ;;
        init=*) init=${a#init=} ;;
        rootfstype=*) rootfstype=${a#rootfstype=} ;;
    esac
done
while read -r m; do insmod "/lib/modules/$m" || echo "initramfs: insmod $m failed"; done < /lib/modules/order
i=0
while [ ! -b "$root" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
mkdir -p /newroot
if ! mount -t "$rootfstype" -o rw "$root" /newroot; then
    echo "initramfs: cannot mount $root; dropping to a shell"; exec sh
fi
echo "initramfs: mounted $root at $(cut -d' ' -f1 /proc/uptime)s, starting $init"
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot "$init"
