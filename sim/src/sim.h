/* credit1sim: a discrete-event model of Xen's credit1 scheduler (xen/common/sched/credit.c, 4.17)
 * with guest workload models.  Line references [C:n] / [K:n] are explained in docs/credit1-model.md (the model description):
 * [C] = xen/common/sched/credit.c, [K] = xen/common/sched/core.c (Xen 4.17.5).  No Xen code is copied;
 * each function below names the Xen function it models. */
#ifndef SIM_H
#define SIM_H
#include <stdint.h>
#include <stdio.h>

#define SIM_VERSION_BASE "credit1sim 1.0"
/* Mutants (docs/validation.md, "Mutants"): each KO_ switch knocks out one credit1 mechanism, named after the Xen
 * function whose work it removes; `make -C sim build/mutants/credit1sim-NAME` builds the one with KO_<NAME in
 * capitals> (the list: config/validation.yaml, mutants).  At most one at a time; --version names it, so a caller can
 * check what it runs (a mistyped switch would build the model itself). */
#if defined(KO_CSCHED_UNIT_WAKE_BOOST) + defined(KO_CSCHED_UNIT_YIELD) + defined(KO_CSCHED_LOAD_BALANCE) \
  + defined(KO_CSCHED_ACCT_OVER) + defined(KO_RUNQ_TICKLE) + defined(KO_CSCHED_VCPU_IS_CACHE_HOT) \
  + defined(KO_CSCHED_SCHEDULE_RATELIMIT) + defined(KO_CSCHED_ACCT_CAP) + defined(KO_CSCHED_UNIT_ACCT_UNBOOST) > 1
#error "at most one KO_ switch"
#endif
#if defined(KO_CSCHED_UNIT_WAKE_BOOST)
#define SIM_MUTANT "KO_CSCHED_UNIT_WAKE_BOOST"        /* csched_unit_wake(): no UNDER -> BOOST on wake */
#elif defined(KO_CSCHED_UNIT_YIELD)
#define SIM_MUTANT "KO_CSCHED_UNIT_YIELD"             /* csched_unit_yield(): no YIELD flag (a yield is a plain re-schedule) */
#elif defined(KO_CSCHED_LOAD_BALANCE)
#define SIM_MUTANT "KO_CSCHED_LOAD_BALANCE"           /* csched_load_balance(): no runqueue stealing */
#elif defined(KO_CSCHED_ACCT_OVER)
#define SIM_MUTANT "KO_CSCHED_ACCT_OVER"              /* csched_acct(): never OVER, every vCPU stays UNDER */
#elif defined(KO_RUNQ_TICKLE)
#define SIM_MUTANT "KO_RUNQ_TICKLE"                   /* __runq_tickle(): no pCPU is tickled on a wake */
#elif defined(KO_CSCHED_VCPU_IS_CACHE_HOT)
#define SIM_MUTANT "KO_CSCHED_VCPU_IS_CACHE_HOT"      /* __csched_vcpu_is_cache_hot(): never hot (no migration delay) */
#elif defined(KO_CSCHED_SCHEDULE_RATELIMIT)
#define SIM_MUTANT "KO_CSCHED_SCHEDULE_RATELIMIT"     /* csched_schedule(): no rate limit */
#elif defined(KO_CSCHED_ACCT_CAP)
#define SIM_MUTANT "KO_CSCHED_ACCT_CAP"               /* csched_acct(): caps ignored (no cap on credit, no parking) */
#elif defined(KO_CSCHED_UNIT_ACCT_UNBOOST)
#define SIM_MUTANT "KO_CSCHED_UNIT_ACCT_UNBOOST"      /* csched_unit_acct() via csched_tick(): the tick does not end a BOOST */
#endif
#ifdef SIM_MUTANT
#define SIM_VERSION SIM_VERSION_BASE " mutant " SIM_MUTANT
#else
#define SIM_VERSION SIM_VERSION_BASE
#endif
#define MAXCPU 64
typedef int64_t ns_t;
typedef uint64_t cpumask_t;

#define US 1000LL
#define MS 1000000LL
#define SEC 1000000000LL

/* priorities [C:61-64] */
enum { PRI_BOOST = 0, PRI_UNDER = -1, PRI_OVER = -2, PRI_IDLE = -64 };
/* csched flags [C:74-77] */
#define F_PARKED    1u
#define F_YIELD     2u
#define F_MIGRATING 4u
#define F_PINNED    8u
/* core pause flags */
#define VPF_BLOCKED   1u
#define VPF_MIGRATING 2u
#define VPF_PAUSED    4u   /* vcpu_pause() by accounting (cap parking) */
#define VPF_DONE      8u   /* guest workload finished: never runs again */

enum { RS_RUNNING, RS_RUNNABLE, RS_BLOCKED, RS_OFFLINE, RS_N };

/* guest states */
enum { G_IDLE, G_COMPUTE, G_HOLD, G_SPIN, G_POLL, G_IOWAIT, G_NETWAIT, G_NETPROC, G_DONE,
       G_NBWAIT, G_NBPROC,     /* kind netback (dom0's netback thread): queue empty (blocked) / processing an item */
       G_NETTXC };             /* a network guest handling a transmit completion (tx_notify_us) */

/* The xentrace records the validation compares with real Xen's (schedlab/report/validation.py, EVENTS): each is
 * counted after warm-up, per domain and in all, whether or not a trace is written (the result's "xentrace", by
 * xtrace()), so the validation need not read a trace; the counts equal the trace's (tests/test_validation.py). */
enum { XT_WAKE, XT_YIELD, XT_BLOCK, XT_SWITCH, XT_STEAL, XT_PICK, XT_TICKLE, XT_BOOST, XT_RATELIMIT, XT_N };

/* event types */
enum { EV_STIMER, EV_TICK, EV_ACCT, EV_SOFTIRQ, EV_CTXDONE, EV_GUEST, EV_WAKE, EV_NET, EV_PUSH, EV_WARMUP, EV_END };

typedef struct { ns_t t; uint64_t seq; int type; int a; uint32_t gen; int b; } event_t;

typedef struct { int kind; double mean, a, b, cv; } dist_t;   /* times in ns */
enum { D_CONST, D_EXP, D_UNIFORM, D_LOGNORMAL };

typedef struct { uint64_t s[4]; } rng_t;

enum { CH_SCHED_TIME, CH_RUN_TIME, CH_STATE_ENTRY };

enum { LK_NONE, LK_TAS, LK_TICKET, LK_PVTICKET, LK_SPINYIELD, LK_QYIELD };
#define LK_FIFO(t) ((t) == LK_TICKET || (t) == LK_PVTICKET || (t) == LK_QYIELD)

struct vcpu;
typedef struct lock {
    int type;
    struct vcpu *holder;           /* owner (ticket: may be granted to a waiter not yet running) */
    struct vcpu **q; int qhead, qlen, qcap;   /* FIFO waiters (ticket) or waiter set (TAS) */
} lock_t;

#define HBUCKETS (64 * 48)
typedef struct { uint64_t n; double sum; uint64_t b[HBUCKETS]; } hist_t;

typedef struct vcpu {
    int id, dom, vidx, is_idle;
    /* csched_unit [C:164-192] */
    int pri, credit; int64_t residual; ns_t start_time; unsigned flags; ns_t last_sched_time;
    int active; struct vcpu *act_prev, *act_next;
    struct vcpu *rq_prev, *rq_next; int on_runq;
    /* sched_unit / vcpu core state */
    int processor, is_running, is_curr;
    unsigned pause;
    ns_t state_entry_time; int runstate; ns_t rs_since; ns_t rs_time[RS_N];
    ns_t home_run_ns;     /* running time on a pCPU of the domain's home node (S4's home share) */
    cpumask_t hard, soft; int has_soft;
    /* guest */
    int g; ns_t g_rem; ns_t g_run_start; int g_running; double g_factor; ns_t g_stall;
    uint32_t g_gen, w_gen;
    ns_t spin_round_start, spin_req_t; ns_t spun_round; int lock_id; int want_lock;
    int granted;  /* ticket: lock handed to us while not running */
    int kick_pending;
    int last_cpu; ns_t last_cpu_busy;
    int xt_last_cpu;      /* the pCPU it last ran on, as xentrace sees it (-1: never ran): migrations as xentrace counts them */
    ns_t tick_due;        /* kind idle with idle_tick_ms: nominal time of the next guest timer interrupt */
    ns_t last_run_time;   /* Xen < 4.13 struct vcpu last_run_time: set by schedule() when the vCPU is switched out */
    rng_t rng;
    /* counters */
    uint64_t n_boost, n_boost_migr, n_migr, n_yield, n_yield_changed, n_ctx, n_wakes, ops, n_kicks, n_polls;
    ns_t spin_ns, useful_ns, stall_ns, hold_ns;
    int yield_pending; /* set at yield, resolved at next schedule of this vcpu */
} vcpu_t;

typedef struct {
    char name[64];
    int weight, cap, nv, first;     /* vcpus are vcpus[first .. first+nv) */
    int active_count; vcpu_t *act_head;
    int on_active; int ad_prev, ad_next;   /* active_sdom list (indices) */
    int home_node;
    /* workload */
    int wkind; /* W_IDLE, W_LOOP, W_CPU, W_NET_STREAM, W_NET_RR */
    dist_t compute, hold, iolat; double p_lock, p_io; int nlocks; int lock_type; ns_t spin_thresh;
    double mem_frac; ns_t job_work; ns_t job_left; int job_running; ns_t done_t; int done;
    ns_t op_work; /* for loops with an "op" size: ops counted per compute quantum */
    lock_t *locks;
    hist_t wait_h; hist_t lat_h;
    /* network */
    dist_t one_way, proc, rr_client, txc; int tx_notify; ns_t seg_wire; int seg_bytes, window; int inflight, rxq; ns_t link_free;
    uint64_t rx_bytes; uint64_t rr_done; ns_t rr_sent; double lat_sum;
    uint64_t ops; uint64_t n_boost, n_boost_migr; ns_t spin_ns, useful_ns, runnable_ns;
    int irq_cpu;
    ns_t idle_tick, idle_tick_work; int idle_tick_vcpus;   /* kind idle: guest timer wakes (spec section 17) */
    /* kind netback (spec section 17.6): dom0 CPU per packet into a guest (rx_us + rx_per_kb_us per KB) and per
     * packet out of a guest (tx_us); a FIFO of work items processed by the domain's one vCPU */
    dist_t nb_rx, nb_tx; double nb_rx_per_kb;
    struct nbitem { int dom, kind; ns_t cost; } *nbq; int nbq_head, nbq_len, nbq_cap;
    uint64_t nb_items;
    uint64_t xt[XT_N], xt_migr;   /* XT_* records of this domain's vCPUs after warm-up (xtrace) */
} dom_t;
enum { W_IDLE, W_LOOP, W_CPU, W_NET_STREAM, W_NET_RR, W_NETBACK };

typedef struct {
    vcpu_t rq;          /* sentinel of the runq */
    vcpu_t *curr, *idle;
    int nr_runnable; unsigned runq_sort_last; int idle_bias;
    uint32_t stimer_gen, tick_gen; int tick_on;
    ns_t stimer_t, stimer_ev_t;   /* s_timer deadline (-1 = stopped) and time of its live heap event (lazy timer) */
    int softirq_pending; ns_t softirq_t;
    int ctx_pending; vcpu_t *ctx_prev; uint32_t ctx_gen;
    int socket, core, node; cpumask_t smt_sib, socket_mask, node_mask;
    ns_t busy_ns; ns_t busy_since; int last_tickle;
} pcpu_t;

typedef struct {
    /* options */
    int ver;               /* major*100+minor: 406, 407, 417 ... */
    ns_t tslice, tick_period, ratelimit, migr_delay;
    int credits_per_tslice, ticks_per_tslice;
    int yield_noop, pick, push; ns_t push_period;
    ns_t ipi_ns, ctxsw_ns, timer_slop; rng_t trng;
    int tickle_one_idle;
    int netback;           /* index of the kind-netback domain (dom0's netback, spec section 17.6), -1 = none */
    int cachehot_rule;     /* CH_*: which stamp __csched_vcpu_is_cache_hot() compares (docs/credit1-model.md section 17) */
    ns_t sched_cost, yield_cost;   /* switch_cost_us, yield_cost_us (section 17); 0 = free */
    /* cache + memory */
    ns_t refill_cross, refill_socket, evict_ns; double remote_ratio, smt_speed;
    /* topology */
    int ncpu, nsock, ncore, nthr, nnode; int cpus_per_node;
    pcpu_t cpu[MAXCPU];
    cpumask_t online;
    /* csched_private [C:209-231] */
    cpumask_t idlers; int weight; int credit; int credit_balance; unsigned runq_sort; int master;
    int balance_bias[MAXCPU];
    int active_head;    /* active_sdom list head (dom index, -1 = empty) */
    /* entities */
    int ndom, nvcpu; dom_t *doms; vcpu_t **vcpus;
    int nlock_total;
    /* time + events */
    ns_t now; uint64_t seq; event_t *heap; int hn, hcap; int this_cpu;
    ns_t duration, warmup, t_measure; int stop_when_done; int ndone_jobs, njobs; int stopped;
    uint64_t seed;
    /* global counters */
    uint64_t n_events, n_ctx, n_migr, n_steal, n_boost, n_boost_migr, n_yield, n_yield_changed, n_tickle,
             n_kickaway, n_ratelimit, n_acct, n_push, n_tick_migr, n_park, n_cachehot_skip, n_pick_avoid;
    ns_t spin_ns, runnable_ns;
    ns_t *waits; size_t nwaits, capwaits;   /* every lock wait after warm-up, for exact quantiles */
    uint64_t xt[XT_N], xt_migr;  /* XT_* records after warm-up, all domains and idle (xtrace) */
    /* trace */
    FILE *trace; long trace_n, trace_limit; int check;
} sim_t;

extern sim_t S;

/* engine.c */
void ev_push(ns_t t, int type, int a, uint32_t gen, int b);
uint64_t rng_next(rng_t *r);
double rng_unif(rng_t *r);
ns_t dist_draw(const dist_t *d, rng_t *r);
void rng_seed(rng_t *r, uint64_t seed);
void trace(const char *ev, int cpu, const vcpu_t *v, long a, long b);
void xtrace(int xt, const char *ev, int cpu, const vcpu_t *v, long a, long b);
void hist_add(hist_t *h, ns_t v);
double hist_quantile(const hist_t *h, double q);
static inline int popcnt(cpumask_t m) { return __builtin_popcountll(m); }
static inline cpumask_t bit(int c) { return 1ULL << c; }
int cpumask_cycle(int n, cpumask_t m);
/* timer_slop (common/timer.c:29): a Xen timer may fire up to this late; drawn per arming */
static inline ns_t slop(void) { return S.timer_slop ? (ns_t)(rng_next(&S.trng) % (uint64_t)(S.timer_slop + 1)) : 0; }
void raise_softirq(int cpu);

/* credit.c : scheduler + core */
void sched_init(void);
void csched_tick(int cpu);
void csched_acct(void);
void core_schedule(int cpu);
void ctx_done(int cpu);
void vcpu_wake(vcpu_t *v);
void vcpu_block(vcpu_t *v);
void vcpu_unblock(vcpu_t *v);
void vcpu_yield(vcpu_t *v);
void csched_push(void);
void set_runstate(vcpu_t *v, int rs);
void check_invariants(void);

/* guest.c */
void guest_init(void);
void guest_pause(vcpu_t *v, ns_t now);
void guest_resume(vcpu_t *v, ns_t t0, int switched_in);
void guest_event(vcpu_t *v);
void guest_wake_event(vcpu_t *v);
void net_event(int dom, int kind);
void guest_after_schedule(vcpu_t *v, int cpu, int continued);
void guest_reset_counters(void);
double guest_factor(const vcpu_t *v);
void smt_changed(int cpu);
#endif
