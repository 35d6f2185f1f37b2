#!/bin/busybox sh
# schedlab PV guest init (/init of the guest's busybox initramfs).
# Kernel command line (xl "extra="): schedlab.role=io|cpu|lock schedlab.ip=A.B.C.D schedlab.name=N
#   and, for role=lock, the lock module's parameters as lockmod.<param>=<value>.
# role=io  : iperf3 server (TCP throughput, port 5201) + sockperf server (TCP RR latency, port 11111)
# role=cpu : one busy loop per vCPU (the CPU-bound VM of S1)
# role=lock: the lock benchmark (S0, S2; guest/lockmod/lockmod.c). The guest idles, reading
#   its console (hvc0). dom0 writes "run <token>" into the console pty (xenconsoled's, see
#   schedlab/workloads/xl.py: console_send); the guest prints
#     SCHEDLAB-LOCK-START token=<token> vm=<name>
#   loads /lib/lockmod/lockmod.ko with the lockmod.* parameters (loading runs the benchmark
#   and returns when it is over), prints
#     SCHEDLAB-LOCK-RESULT token=<token> vm=<name> lockmod v=1 ... (the module's line)
#   (or "... error=<what>"), unloads the module and waits for the next line. The result line
#   also carries guest_ticks=user,nice,system,idle,iowait,irq,softirq,steal: the guest's
#   /proc/stat deltas over the run (USER_HZ ticks). "stat <token>" prints the guest's
#   /proc/stat cpu line (SCHEDLAB-GUEST-STAT) without running anything.
#   "bench <token> <program> <args...>" runs a benchmark program of the initramfs (S4:
#   sysbench, forkexec) and prints SCHEDLAB-BENCH-START, then one line
#     SCHEDLAB-BENCH-RESULT token=<token> vm=<name> rc=<exit status> guest_ticks=... out=<base64>
#   with the program's output (stdout and stderr, at most 6000 bytes) as base64, so that
#   dom0 parses it with the benchmark pack's own parser (schedlab/packs/).
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /tmp
role=none; addr=; name=$(hostname); modargs=
for a in $(cat /proc/cmdline); do
    case "$a" in
        schedlab.role=*) role=${a#schedlab.role=} ;;
        schedlab.ip=*) addr=${a#schedlab.ip=} ;;
        schedlab.name=*) name=${a#schedlab.name=} ;;
        lockmod.*) modargs="$modargs ${a#lockmod.}" ;;
    esac
done
for m in /lib/modules/*.ko; do [ -e "$m" ] && insmod "$m"; done
ip link set lo up
if [ -n "$addr" ]; then
    for i in 1 2 3 4 5 6 7 8 9 10; do [ -e /sys/class/net/eth0 ] && break; sleep 0.5; done
    ip addr add "$addr/24" dev eth0 && ip link set eth0 up
fi
extra=
case "$role" in
    io)
        iperf3 -s -D -p 5201
        sockperf server --tcp -p 11111 >/tmp/sockperf.log 2>&1 &
        ;;
    cpu)
        n=$(grep -c ^processor /proc/cpuinfo)
        i=0; while [ $i -lt $n ]; do (while :; do :; done) & i=$((i+1)); done
        ;;
    lock)
        # What the kernel chose for its own spinlocks ("xen: PV spinlocks enabled/disabled").
        pv=$(dmesg | grep -o 'PV spinlocks [a-z]*' | tail -n 1 | cut -d' ' -f3)
        extra=" vcpus=$(grep -c ^processor /proc/cpuinfo) pvspinlocks=${pv:-unknown} name=$name"
        ;;
esac
echo "SCHEDLAB-GUEST-READY role=$role ip=$addr uptime=$(cut -d' ' -f1 /proc/uptime)$extra"

# The guest's own CPU accounting (/proc/stat "cpu" line, USER_HZ ticks: user nice system
# idle iowait irq softirq steal); steal = runnable but not running (Xen's runstate).
cpu_ticks() { read -r _ u n sy id io irq si st _ < /proc/stat; echo "$u $n $sy $id $io $irq $si $st"; }
ticks_delta() {
    # shellcheck disable=SC2086
    set -- $1 $2
    echo "$(($9-$1)),$((${10}-$2)),$((${11}-$3)),$((${12}-$4)),$((${13}-$5)),$((${14}-$6)),$((${15}-$7)),$((${16}-$8))"
}

run_lock() {
    tok=$1
    echo "SCHEDLAB-LOCK-START token=$tok vm=$name uptime=$(cut -d' ' -f1 /proc/uptime)"
    t0=$(cpu_ticks)
    # shellcheck disable=SC2086  # modargs: one word per parameter
    if err=$(insmod /lib/lockmod/lockmod.ko tag="$tok" $modargs 2>&1); then
        t1=$(cpu_ticks)
        line=$(cat /proc/lockmod 2>&1)
        rmmod lockmod
        case "$line" in
            "lockmod v="*) echo "SCHEDLAB-LOCK-RESULT token=$tok vm=$name guest_ticks=$(ticks_delta "$t0" "$t1") $line" ;;
            *) echo "SCHEDLAB-LOCK-RESULT token=$tok vm=$name error=no-result $(echo "$line" | tr -s ' \n' '__')" ;;
        esac
    else
        echo "SCHEDLAB-LOCK-RESULT token=$tok vm=$name error=insmod $(echo "$err" | tr -s ' \n' '__')"
    fi
}

run_bench() {
    tok=$1; shift
    echo "SCHEDLAB-BENCH-START token=$tok vm=$name prog=$1 uptime=$(cut -d' ' -f1 /proc/uptime)"
    case "$1" in
        sysbench|forkexec) ;;
        *) echo "SCHEDLAB-BENCH-RESULT token=$tok vm=$name rc=127 error=unknown-program-$1"; return ;;
    esac
    t0=$(cpu_ticks)
    "$@" >/tmp/bench.out 2>&1 </dev/null
    rc=$?
    t1=$(cpu_ticks)
    echo "SCHEDLAB-BENCH-RESULT token=$tok vm=$name rc=$rc guest_ticks=$(ticks_delta "$t0" "$t1")" \
         "out=$(head -c 6000 /tmp/bench.out | base64 -w 0)"
}

if [ "$role" = lock ]; then
    # Canonical input, no echo: read blocks until dom0 sends a whole line.
    stty -F /dev/hvc0 -echo icanon 2>/dev/null
    eofs=0; last=
    while :; do
        while read -r cmd tok rest; do
            case "$cmd" in
                # A command may come twice (dom0 re-sends one a guest did not answer): run once.
                run) if [ -n "$tok" ] && [ "$tok" != "$last" ]; then last=$tok; run_lock "$tok"; fi ;;
                # rest: the program and its arguments, one word each (unquoted on purpose)
                bench) if [ -n "$tok" ] && [ "$tok" != "$last" ]; then last=$tok; run_bench "$tok" $rest; fi ;;
                stat) echo "SCHEDLAB-GUEST-STAT token=$tok vm=$name cpu_ticks=$(cpu_ticks | tr ' ' ,)" \
                           "uptime=$(cut -d' ' -f1 /proc/uptime) intr=$(sed -n 's/^intr \([0-9]*\).*/\1/p' /proc/stat)" ;;
            esac
        done </dev/hvc0
        # End of input (should not happen: xenconsoled keeps the pty open). Say so, rarely.
        eofs=$((eofs+1))
        case "$eofs" in 1|10|100|1000) echo "SCHEDLAB-CONSOLE-EOF count=$eofs" ;; esac
        sleep 1
    done
fi
while :; do sleep 3600; done
