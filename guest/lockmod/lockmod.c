// SPDX-License-Identifier: GPL-2.0
/*
 * lockmod - a lock-contention micro-benchmark for the schedlab PV guests (S0, S2).
 *
 * Loading the module runs one measurement and returns when it is over; the result is
 * one line in /proc/lockmod (and in the kernel log at KERN_INFO). guest/guest-init.sh
 * loads it, prints the line on the console and unloads it again.
 *
 * One kernel thread per guest vCPU (parameter `threads`, default: every online CPU),
 * each bound to its vCPU, loops over
 *
 *     compute (busy work of compute_ns) ; lock ; hold (busy work of hold_ns) ; unlock
 *
 * on one lock of the module's own. The time from "lock called" to "lock acquired" is the
 * lock wait; it goes into a log-linear histogram (8 sub-buckets per power of two, so a
 * reported percentile is the upper edge of its bucket: at most 12.5 % above the true
 * value, never below it; the maximum is exact).
 *
 * Lock flavours (`flavour`):
 *   ticket      a plain ticket spinlock written here: fetch-and-add a ticket, spin with
 *               cpu_relax() until the owner field reaches it (strict FIFO hand-over).
 *   spin-yield  the same ticket lock, but after `spin_threshold` spin iterations the waiter
 *               calls HYPERVISOR_sched_op(SCHEDOP_yield) and spins again (S0's guest patch:
 *               "spin a fixed number of cycles, then yield").
 *   kernel      a spinlock_t, i.e. the kernel's qspinlock. In a Xen PV guest that is the PV
 *               qspinlock (spin, then block in SCHEDOP_poll on an event channel until the
 *               unlocker kicks it), unless the guest booted with `xen_nopvspin`, which
 *               gives the native queued lock (S2's two variants).
 *   none        no lock: an operation is the compute work alone (S3, S4: CPU bursts).
 * While holding or waiting for a ticket lock, preemption is disabled (as spin_lock() does).
 *
 * Amount of work:
 *   ops > 0       fixed work: `ops` acquisitions in total, shared by the threads; the
 *                 completion time is what counts (S0's "build" of fixed size).
 *   ops = 0       fixed duration: run for duration_ms, report operations per second (S2).
 *
 * Short waits (S3, S4: "CPU bursts and short waits"): after an operation a thread sleeps,
 * with probability sleep_permille/1000, for a time uniform in [sleep_us/2, 3*sleep_us/2]
 * (usleep_range, an hrtimer: the vCPU blocks in Xen and is woken by its timer, which is
 * when the hypervisor decides where it runs next). The draws come from a xorshift
 * generator per thread, seeded from `seed` and the thread's index.
 *
 * Busy work is a counted loop. compute_ns/hold_ns are converted to loop counts with a
 * calibration done at load time (median of 15 timed trials; `loops_per_ms` overrides it),
 * so a descheduled vCPU does not get its work done for free while it is not running.
 * compute_loops/hold_loops, when non-zero, set the counts directly.
 *
 * The result line (key=value, space separated, one line; see tests/test_workloads.py):
 *   lockmod v=1 flavour= mode= threads= cpus= ops= elapsed_ns= ops_per_s= wait_mean_ns=
 *   wait_p50_ns= wait_p90_ns= wait_p99_ns= wait_max_ns= wait_total_ns= yields= ...
 *   thread_ops=a,b,... hist=index:count,...
 *
 * Build: make -C /lib/modules/<kver>/build M=$PWD (see Makefile and
 * schedlab/testbeds/qemu_images.py, which builds it against Debian's headers of the guest
 * kernel).
 */
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/proc_fs.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/wait.h>
#ifdef CONFIG_XEN
#include <xen/xen.h>
#include <xen/interface/sched.h>
#include <asm/xen/hypercall.h>
#endif
#ifdef CONFIG_PARAVIRT_SPINLOCKS
#include <asm/paravirt.h>
#include <asm/qspinlock.h>
#endif

#define LOCKMOD_FORMAT 1

static char *flavour = "kernel";
module_param(flavour, charp, 0444);
MODULE_PARM_DESC(flavour, "lock: ticket | spin-yield | kernel | none");
static ulong ops;
module_param(ops, ulong, 0444);
MODULE_PARM_DESC(ops, "fixed work: total lock acquisitions (0: run for duration_ms)");
static uint duration_ms = 10000;
module_param(duration_ms, uint, 0444);
MODULE_PARM_DESC(duration_ms, "fixed duration in ms (when ops is 0)");
static ulong compute_ns = 2000;
module_param(compute_ns, ulong, 0444);
MODULE_PARM_DESC(compute_ns, "busy work between acquisitions, ns at the calibrated speed");
static ulong hold_ns = 1000;
module_param(hold_ns, ulong, 0444);
MODULE_PARM_DESC(hold_ns, "busy work while holding the lock, ns at the calibrated speed");
static ulong compute_loops;
module_param(compute_loops, ulong, 0444);
MODULE_PARM_DESC(compute_loops, "if non-zero: loop count of the compute work (overrides compute_ns)");
static ulong hold_loops;
module_param(hold_loops, ulong, 0444);
MODULE_PARM_DESC(hold_loops, "if non-zero: loop count of the hold work (overrides hold_ns)");
static ulong loops_per_ms;
module_param(loops_per_ms, ulong, 0444);
MODULE_PARM_DESC(loops_per_ms, "busy-loop iterations per ms (0: calibrate at load)");
static uint spin_threshold = 4096;
module_param(spin_threshold, uint, 0444);
MODULE_PARM_DESC(spin_threshold, "spin-yield: spin iterations before each SCHEDOP_yield");
static uint threads;
module_param(threads, uint, 0444);
MODULE_PARM_DESC(threads, "worker threads, thread i bound to online CPU i mod n (0: one per online CPU)");
static uint sleep_us;
module_param(sleep_us, uint, 0444);
MODULE_PARM_DESC(sleep_us, "mean sleep after an operation, us (uniform in [sleep_us/2, 3*sleep_us/2]; 0: none)");
static uint sleep_permille;
module_param(sleep_permille, uint, 0444);
MODULE_PARM_DESC(sleep_permille, "probability (per mille) of that sleep after each operation");
static uint seed = 1;
module_param(seed, uint, 0444);
MODULE_PARM_DESC(seed, "seed of the threads' random draws (sleeps)");
static char *tag = "";
module_param(tag, charp, 0444);
MODULE_PARM_DESC(tag, "free text (no spaces) echoed in the result line");

enum lock_kind { LK_TICKET, LK_SPIN_YIELD, LK_KERNEL, LK_NONE };

/* Log-linear histogram: values < 8 exact, then 8 sub-buckets per power of two. */
#define SUB_BITS 3
#define SUB (1 << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

static inline unsigned int bucket_of(u64 v)
{
	unsigned int e;

	if (v < SUB)
		return v;
	e = fls64(v) - 1;			/* >= SUB_BITS */
	return (e - SUB_BITS + 1) * SUB + ((v >> (e - SUB_BITS)) & (SUB - 1));
}

/* The largest value that falls into bucket i. */
static inline u64 bucket_upper(unsigned int i)
{
	unsigned int e, sub;

	if (i < SUB)
		return i;
	e = i / SUB + SUB_BITS - 1;
	sub = i % SUB;
	return ((u64)(SUB + sub) << (e - SUB_BITS)) + (1ULL << (e - SUB_BITS)) - 1;
}

struct ticket_lock {
	atomic_t next;
	atomic_t owner;
} ____cacheline_aligned_in_smp;

struct worker {
	unsigned int cpu;
	struct task_struct *task;
	u64 ops;
	u64 wait_total;
	u64 wait_max;
	u64 yields;
	u64 sleeps;
	u64 slept_ns;
	u64 rng;
	u64 t_end;
	u64 hist[NBUCKETS];
} ____cacheline_aligned_in_smp;

static struct ticket_lock tlock;
static DEFINE_SPINLOCK(klock);
static enum lock_kind kind;
static struct worker *workers;
static unsigned int nworkers;
static u64 c_loops, h_loops, lpms;
static atomic64_t remaining;
static u64 t_start, deadline;
static int go;
static DECLARE_WAIT_QUEUE_HEAD(startq);
static atomic_t running;
static DECLARE_COMPLETION(done);
static char *result;
#define RESULT_SIZE 8192

static noinline void busy(u64 n)
{
	while (n--)
		asm volatile("" ::: "memory");
}

static inline void sched_yield_hypercall(struct worker *w)
{
#ifdef CONFIG_XEN
	if (xen_domain()) {
		HYPERVISOR_sched_op(SCHEDOP_yield, NULL);
		w->yields++;
	}
#endif
}

static inline void ticket_lock(struct worker *w, bool yield)
{
	int me = atomic_fetch_inc(&tlock.next);
	unsigned int n = 0;

	while (atomic_read_acquire(&tlock.owner) != me) {
		cpu_relax();
		if (yield && ++n >= spin_threshold) {
			sched_yield_hypercall(w);
			n = 0;
		}
	}
}

/* xorshift64 (Marsaglia 2003): cheap, per thread, reproducible from `seed`. */
static inline u32 rnd(struct worker *w)
{
	u64 x = w->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	w->rng = x;
	return (u32)(x >> 32);
}

static inline void maybe_sleep(struct worker *w)
{
	unsigned long us;
	u64 t0;

	if (!sleep_us || !sleep_permille || rnd(w) % 1000 >= sleep_permille)
		return;
	us = max(1U, sleep_us / 2 + rnd(w) % (sleep_us + 1));
	t0 = ktime_get_ns();
	usleep_range(us, us + us / 8 + 1);
	w->slept_ns += ktime_get_ns() - t0;
	w->sleeps++;
}

static inline void ticket_unlock(void)
{
	atomic_set_release(&tlock.owner, atomic_read(&tlock.owner) + 1);
}

static int worker_fn(void *arg)
{
	struct worker *w = arg;
	bool fixed = ops > 0;
	u64 t0, t1, wt;

	wait_event(startq, READ_ONCE(go));
	for (;;) {
		if (fixed) {
			if (atomic64_dec_return(&remaining) < 0)
				break;
		} else if (ktime_get_ns() >= deadline) {
			break;
		}
		busy(c_loops);
		if (kind == LK_NONE) {
			w->ops++;
			maybe_sleep(w);
			cond_resched();
			continue;
		}
		if (kind == LK_KERNEL) {
			t0 = local_clock();
			spin_lock(&klock);
			t1 = local_clock();
			busy(h_loops);
			spin_unlock(&klock);
		} else {
			preempt_disable();
			t0 = local_clock();
			ticket_lock(w, kind == LK_SPIN_YIELD);
			t1 = local_clock();
			busy(h_loops);
			ticket_unlock();
			preempt_enable();
		}
		wt = t1 > t0 ? t1 - t0 : 0;
		w->wait_total += wt;
		if (wt > w->wait_max)
			w->wait_max = wt;
		w->hist[bucket_of(wt)]++;
		w->ops++;
		maybe_sleep(w);
		cond_resched();
	}
	w->t_end = ktime_get_ns();
	if (atomic_dec_and_test(&running))
		complete(&done);
	/* Stay around until kthread_stop() (module init reaps every worker). */
	set_current_state(TASK_INTERRUPTIBLE);
	while (!kthread_should_stop()) {
		schedule();
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/*
 * Busy-loop iterations per ms: the median of 15 timed trials of ~1 ms each (at ~1 loop/ns),
 * spread over ~20 ms. The median, not the minimum: a trial stretched by a descheduled vCPU
 * and one shortened by a clock step between pCPUs (local_clock() is per-CPU; under TCG the
 * TSC is unstable) are both outliers. Timed with ktime_get_ns(), the global clocksource.
 */
#define CAL_TRIALS 15
static u64 calibrate(void)
{
	const u64 n = 1000000;
	u64 dt[CAL_TRIALS], t0, tmp;
	int i, j;

	for (i = 0; i < CAL_TRIALS; i++) {
		preempt_disable();
		t0 = ktime_get_ns();
		busy(n);
		dt[i] = ktime_get_ns() - t0;
		preempt_enable();
		usleep_range(500, 1000);
	}
	for (i = 1; i < CAL_TRIALS; i++)		/* insertion sort */
		for (j = i; j > 0 && dt[j - 1] > dt[j]; j--) {
			tmp = dt[j];
			dt[j] = dt[j - 1];
			dt[j - 1] = tmp;
		}
	return div64_u64(n * NSEC_PER_MSEC, max_t(u64, 1, dt[CAL_TRIALS / 2]));
}

static int pvspin_state(void)
{
#ifdef CONFIG_PARAVIRT_SPINLOCKS
	return pv_ops.lock.queued_spin_lock_slowpath == __pv_queued_spin_lock_slowpath;
#else
	return -1;
#endif
}

static u64 percentile(const u64 *hist, u64 n, unsigned int permille, u64 maxv)
{
	u64 rank = div64_u64(n * permille + 999, 1000), c = 0;
	unsigned int i;

	if (!n)
		return 0;
	if (!rank)
		rank = 1;
	for (i = 0; i < NBUCKETS; i++) {
		c += hist[i];
		if (c >= rank)
			return min(bucket_upper(i), maxv);
	}
	return maxv;
}

static void format_result(void)
{
	u64 *hist = kcalloc(NBUCKETS, sizeof(u64), GFP_KERNEL);
	u64 total = 0, wsum = 0, wmax = 0, yields = 0, sleeps = 0, slept = 0, t_end = t_start, elapsed, rate_milli;
	unsigned int i, j;
	size_t len = 0;

	if (!hist) {
		snprintf(result, RESULT_SIZE, "lockmod v=%d error=enomem\n", LOCKMOD_FORMAT);
		return;
	}
	for (i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];

		total += w->ops;
		wsum += w->wait_total;
		wmax = max(wmax, w->wait_max);
		yields += w->yields;
		sleeps += w->sleeps;
		slept += w->slept_ns;
		t_end = max(t_end, w->t_end);
		for (j = 0; j < NBUCKETS; j++)
			hist[j] += w->hist[j];
	}
	elapsed = max_t(u64, 1, t_end - t_start);
	rate_milli = mul_u64_u64_div_u64(total, 1000ULL * NSEC_PER_SEC, elapsed);
	len += scnprintf(result + len, RESULT_SIZE - len,
		"lockmod v=%d flavour=%s mode=%s threads=%u cpus=%u ops=%llu elapsed_ns=%llu "
		"ops_per_s=%llu.%03llu wait_mean_ns=%llu wait_p50_ns=%llu wait_p90_ns=%llu "
		"wait_p99_ns=%llu wait_max_ns=%llu wait_total_ns=%llu yields=%llu compute_ns=%lu "
		"hold_ns=%lu compute_loops=%llu hold_loops=%llu loops_per_ms=%llu spin_threshold=%u "
		"pvspin=%d xen=%d sleep_us=%u sleep_permille=%u sleeps=%llu slept_ns=%llu tag=%s thread_ops=",
		LOCKMOD_FORMAT, flavour, ops ? "ops" : "duration", nworkers, num_online_cpus(),
		total, elapsed, rate_milli / 1000, rate_milli % 1000,
		total ? div64_u64(wsum, total) : 0,
		percentile(hist, total, 500, wmax), percentile(hist, total, 900, wmax),
		percentile(hist, total, 990, wmax), wmax, wsum, yields, compute_ns, hold_ns,
		c_loops, h_loops, lpms, spin_threshold, pvspin_state(),
#ifdef CONFIG_XEN
		xen_domain() ? (xen_pv_domain() ? 2 : 1) : 0,
#else
		0,
#endif
		sleep_us, sleep_permille, sleeps, slept,
		tag[0] ? tag : "-");
	for (i = 0; i < nworkers; i++)
		len += scnprintf(result + len, RESULT_SIZE - len, "%s%llu", i ? "," : "", workers[i].ops);
	len += scnprintf(result + len, RESULT_SIZE - len, " hist=");
	for (i = 0, j = 0; i < NBUCKETS; i++)
		if (hist[i])
			len += scnprintf(result + len, RESULT_SIZE - len, "%s%u:%llu", j++ ? "," : "", i, hist[i]);
	scnprintf(result + len, RESULT_SIZE - len, "\n");
	kfree(hist);
}

static int proc_show(struct seq_file *m, void *v)
{
	seq_puts(m, result);
	return 0;
}

static int proc_open(struct inode *inode, struct file *file)
{
	return single_open(file, proc_show, NULL);
}

static const struct proc_ops lockmod_proc_ops = {
	.proc_open = proc_open,
	.proc_read = seq_read,
	.proc_lseek = seq_lseek,
	.proc_release = single_release,
};

static int __init lockmod_init(void)
{
	unsigned int i, ncpu = num_online_cpus();
	int cpu, err = 0;

	if (!strcmp(flavour, "ticket"))
		kind = LK_TICKET;
	else if (!strcmp(flavour, "spin-yield"))
		kind = LK_SPIN_YIELD;
	else if (!strcmp(flavour, "kernel"))
		kind = LK_KERNEL;
	else if (!strcmp(flavour, "none"))
		kind = LK_NONE;
	else {
		pr_err("lockmod: unknown flavour '%s' (ticket, spin-yield, kernel, none)\n", flavour);
		return -EINVAL;
	}
	if (!ops && !duration_ms) {
		pr_err("lockmod: set ops or duration_ms\n");
		return -EINVAL;
	}
	if (kind == LK_SPIN_YIELD && !spin_threshold)
		spin_threshold = 1;
	nworkers = threads ? threads : ncpu;
	result = kzalloc(RESULT_SIZE, GFP_KERNEL);
	workers = kcalloc(nworkers, sizeof(*workers), GFP_KERNEL);
	if (!result || !workers) {
		err = -ENOMEM;
		goto out;
	}
	lpms = loops_per_ms ? loops_per_ms : calibrate();
	/* 1e3..1e9 loops/ms (1 us..1 ps a loop): anything else is a broken clock or parameter,
	 * and would turn 300 us of work into minutes (or nothing). */
	if (lpms < 1000 || lpms > 1000000000ULL) {
		pr_err("lockmod: implausible loops_per_ms=%llu\n", lpms);
		err = -ERANGE;
		goto out;
	}
	c_loops = compute_loops ? compute_loops : div64_u64(compute_ns * lpms, NSEC_PER_MSEC);
	h_loops = hold_loops ? hold_loops : div64_u64(hold_ns * lpms, NSEC_PER_MSEC);
	atomic_set(&tlock.next, 0);
	atomic_set(&tlock.owner, 0);
	atomic64_set(&remaining, ops);
	atomic_set(&running, nworkers);
	WRITE_ONCE(go, 0);

	/* Thread i on the i-th online CPU (mod the number of online CPUs). */
	cpu = -1;
	for (i = 0; i < nworkers; i++) {
		cpu = cpumask_next(cpu, cpu_online_mask);
		if (cpu >= nr_cpu_ids)
			cpu = cpumask_first(cpu_online_mask);
		workers[i].cpu = cpu;
		/* Any non-zero state; splitmix-style spread of (seed, thread). */
		workers[i].rng = ((u64)seed << 32 | (i + 1)) * 0x9E3779B97F4A7C15ULL | 1;
		workers[i].task = kthread_create(worker_fn, &workers[i], "lockmod/%u", i);
		if (IS_ERR(workers[i].task)) {
			err = PTR_ERR(workers[i].task);
			workers[i].task = NULL;
			/* Let the ones already made run an empty measurement, then reap them. */
			atomic64_set(&remaining, 0);
			deadline = 0;
			atomic_sub(nworkers - i, &running);
			break;
		}
		kthread_bind(workers[i].task, cpu);
		wake_up_process(workers[i].task);	/* sleeps in wait_event(startq) */
	}
	if (!err) {
		t_start = ktime_get_ns();
		deadline = t_start + (u64)duration_ms * NSEC_PER_MSEC;
	}
	WRITE_ONCE(go, 1);
	wake_up_all(&startq);
	if (atomic_read(&running) > 0 || err == 0) {
		/* Wake every second: no hung-task warning for insmod during long runs. */
		while (!wait_for_completion_timeout(&done, HZ))
			;
	}
	for (i = 0; i < nworkers; i++)
		if (workers[i].task)
			kthread_stop(workers[i].task);
	if (err)
		goto out;
	format_result();
	if (!proc_create("lockmod", 0444, NULL, &lockmod_proc_ops)) {
		err = -ENOMEM;
		goto out;
	}
	pr_info("%s", result);
	kfree(workers);
	workers = NULL;
	return 0;
out:
	kfree(workers);
	kfree(result);
	return err;
}

static void __exit lockmod_exit(void)
{
	remove_proc_entry("lockmod", NULL);
	kfree(result);
}

module_init(lockmod_init);
module_exit(lockmod_exit);
MODULE_LICENSE("GPL");
MODULE_AUTHOR("schedlab");
MODULE_DESCRIPTION("Lock contention micro-benchmark (ticket, spin-then-yield, kernel qspinlock) for Xen PV guests");
