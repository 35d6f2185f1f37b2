#!/bin/busybox sh
# schedlab PV guest init (/init of the guest's busybox initramfs).
# Kernel command line (xl "extra="): schedlab.role=io|cpu schedlab.ip=A.B.C.D
# role=io : iperf3 server (TCP throughput, port 5201) + sockperf server (TCP RR latency, port 11111)
# role=cpu: one busy loop per vCPU (the CPU-bound VM of S1)
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
role=none; addr=
for a in $(cat /proc/cmdline); do
    case "$a" in
        schedlab.role=*) role=${a#schedlab.role=} ;;
        schedlab.ip=*) addr=${a#schedlab.ip=} ;;
    esac
done
for m in /lib/modules/*.ko; do [ -e "$m" ] && insmod "$m"; done
ip link set lo up
if [ -n "$addr" ]; then
    for i in 1 2 3 4 5 6 7 8 9 10; do [ -e /sys/class/net/eth0 ] && break; sleep 0.5; done
    ip addr add "$addr/24" dev eth0 && ip link set eth0 up
fi
case "$role" in
    io)
        iperf3 -s -D -p 5201
        sockperf server --tcp -p 11111 >/tmp/sockperf.log 2>&1 &
        ;;
    cpu)
        n=$(grep -c ^processor /proc/cpuinfo)
        i=0; while [ $i -lt $n ]; do (while :; do :; done) & i=$((i+1)); done
        ;;
esac
echo "SCHEDLAB-GUEST-READY role=$role ip=$addr uptime=$(cut -d' ' -f1 /proc/uptime)"
while :; do sleep 3600; done
