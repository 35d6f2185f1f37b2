/* engine.c: event heap, RNG, distributions, histograms, tracing, scenario reader, result writer, CLI. */
#include "sim.h"
#include "json.h"
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <stdarg.h>

sim_t S;

/* ---------------- event heap (binary, ordered by time then insertion sequence) ---------------- */
static inline int ev_less(const event_t *a, const event_t *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

/* events due now (t == S.now) go to a FIFO ring instead of the heap; ev_next() merges both by (t, seq),
 * so the order is exactly that of a single heap */
static event_t *nq; static size_t nq_head, nq_len, nq_cap;

void ev_push(ns_t t, int type, int a, uint32_t gen, int b) {
    if (t == S.now && S.hn >= 0) {
        if (nq_len == nq_cap) {
            size_t nc = nq_cap ? 2 * nq_cap : 256; event_t *n2 = malloc(nc * sizeof *n2); if (!n2) exit(3);
            for (size_t i = 0; i < nq_len; i++) n2[i] = nq[(nq_head + i) % (nq_cap ? nq_cap : 1)];
            free(nq); nq = n2; nq_cap = nc; nq_head = 0;
        }
        event_t e = { t, S.seq++, type, a, gen, b };
        nq[(nq_head + nq_len) % nq_cap] = e; nq_len++;
        return;
    }
    if (S.hn == S.hcap) { S.hcap = S.hcap ? S.hcap * 2 : 1024; S.heap = realloc(S.heap, S.hcap * sizeof(event_t)); if (!S.heap) exit(3); }
    event_t e = { t, S.seq++, type, a, gen, b };
    int i = S.hn++;
    while (i > 0) { int p = (i - 1) >> 1; if (!ev_less(&e, &S.heap[p])) break; S.heap[i] = S.heap[p]; i = p; }
    S.heap[i] = e;
}
static event_t ev_pop(void);
static int ev_pending(void) { return S.hn > 0 || nq_len > 0; }
static event_t ev_next(void) {
    if (nq_len && (!S.hn || !ev_less(&S.heap[0], &nq[nq_head]))) {
        event_t e = nq[nq_head]; nq_head = (nq_head + 1) % nq_cap; nq_len--; return e;
    }
    return ev_pop();
}
static event_t ev_pop(void) {
    event_t top = S.heap[0], last = S.heap[--S.hn];
    int i = 0, n = S.hn;
    for (;;) {
        int c = 2 * i + 1; if (c >= n) break;
        if (c + 1 < n && ev_less(&S.heap[c + 1], &S.heap[c])) c++;
        if (!ev_less(&S.heap[c], &last)) break;
        S.heap[i] = S.heap[c]; i = c;
    }
    if (n) S.heap[i] = last;
    return top;
}

/* ---------------- RNG: xoshiro256** seeded by splitmix64 ---------------- */
static uint64_t splitmix(uint64_t *x) { uint64_t z = (*x += 0x9e3779b97f4a7c15ULL); z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL; z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL; return z ^ (z >> 31); }
void rng_seed(rng_t *r, uint64_t seed) { for (int i = 0; i < 4; i++) r->s[i] = splitmix(&seed); }
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
uint64_t rng_next(rng_t *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return res;
}
double rng_unif(rng_t *r) { return (rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

ns_t dist_draw(const dist_t *d, rng_t *r) {
    double x;
    switch (d->kind) {
    case D_EXP: x = -d->mean * log(1.0 - rng_unif(r)); break;
    case D_UNIFORM: x = d->a + (d->b - d->a) * rng_unif(r); break;
    case D_LOGNORMAL: {
        double s2 = log(1.0 + d->cv * d->cv), mu = log(d->mean) - s2 / 2;
        double u1 = rng_unif(r), u2 = rng_unif(r);
        double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2 * M_PI * u2);
        x = exp(mu + sqrt(s2) * z); break;
    }
    default: x = d->mean;
    }
    ns_t v = (ns_t)(x + 0.5);
    return v < 1 ? 1 : v;
}

/* ---------------- log-linear histogram (32 sub-buckets per octave, ~1.5 % resolution) ---------------- */
static int hidx(ns_t v) {
    if (v < 64) return v < 0 ? 0 : (int)v;
    int msb = 63 - __builtin_clzll((uint64_t)v), shift = msb - 5;
    int sub = (int)((v >> shift) & 31);
    int b = 64 + (msb - 6) * 32 + sub;
    return b < HBUCKETS ? b : HBUCKETS - 1;
}
static double hmid(int b) {
    if (b < 64) return b;
    int msb = (b - 64) / 32 + 6, sub = (b - 64) % 32, shift = msb - 5;
    double lo = (double)((int64_t)(32 + sub) << shift);
    return lo + (double)((int64_t)1 << shift) / 2;
}
void hist_add(hist_t *h, ns_t v) { h->n++; h->sum += (double)v; h->b[hidx(v)]++; }
double hist_quantile(const hist_t *h, double q) {
    if (!h->n) return 0;
    uint64_t target = (uint64_t)ceil(q * (double)h->n); if (target < 1) target = 1;
    uint64_t c = 0;
    for (int i = 0; i < HBUCKETS; i++) { c += h->b[i]; if (c >= target) return hmid(i); }
    return hmid(HBUCKETS - 1);
}

int cpumask_cycle(int n, cpumask_t m) {
    if (!m) return S.ncpu;
    cpumask_t hi = (n + 1 >= 64) ? 0 : (m & (~0ULL << (n + 1)));
    return hi ? __builtin_ctzll(hi) : __builtin_ctzll(m);
}

/* ---------------- trace (xentrace-like TRC_CSCHED_* / TRC_SCHED_* records as JSON lines) ---------------- */
void trace(const char *ev, int cpu, const vcpu_t *v, long a, long b) {
    if (!S.trace) return;
    if (S.trace_limit && S.trace_n >= S.trace_limit) return;
    S.trace_n++;
    fprintf(S.trace, "{\"t_ns\":%lld,\"ev\":\"%s\",\"cpu\":%d,\"dom\":%d,\"vcpu\":%d,\"pri\":%d,\"credit\":%d,\"a\":%ld,\"b\":%ld}\n",
            (long long)S.now, ev, cpu, v ? v->dom : -1, v ? v->vidx : -1, v ? v->pri : 0, v ? v->credit : 0, a, b);
}

static const char *const XT_NAME[XT_N] = { "wake", "yield", "block", "switch", "steal", "pick", "tickle", "boost", "ratelimit" };

/* A trace record the validation counts (sim.h, XT_*): counted, then traced as any other */
void xtrace(int xt, const char *ev, int cpu, const vcpu_t *v, long a, long b) {
    if (S.now >= S.warmup) {   /* as the validation counts a trace: records at or after the warm-up */
        S.xt[xt]++;
        if (v && v->dom >= 0 && v->dom < S.ndom) S.doms[v->dom].xt[xt]++;   /* (--selftest has no domains) */
    }
    if (xt == XT_SWITCH && v && v->dom >= 0 && v->dom < S.ndom) {   /* xentrace's migration: switched in elsewhere */
        if (v->xt_last_cpu >= 0 && v->xt_last_cpu != cpu && S.now >= S.warmup) { S.xt_migr++; S.doms[v->dom].xt_migr++; }
        ((vcpu_t *)v)->xt_last_cpu = cpu;
    }
    trace(ev, cpu, v, a, b);
}

/* ---------------- scenario reader with field-named errors ---------------- */
static void die(const char *fmt, ...) {
    va_list ap; va_start(ap, fmt);
    fprintf(stderr, "credit1sim: bad scenario: ");
    vfprintf(stderr, fmt, ap); fprintf(stderr, "\n");
    va_end(ap); exit(2);
}
static void check_keys(const jval_t *o, const char *path, const char *const *allowed) {
    if (!o) return;
    if (o->t != J_OBJ) die("field '%s' must be an object", path);
    for (int i = 0; i < o->n; i++) {
        int ok = 0;
        for (const char *const *a = allowed; *a; a++) if (!strcmp(*a, o->keys[i])) { ok = 1; break; }
        if (!ok) die("unknown field '%s.%s'", path, o->keys[i]);
    }
}
static double num(const jval_t *o, const char *key, const char *path, double def, double lo, double hi) {
    const jval_t *v = json_get(o, key);
    if (!v) return def;
    if (v->t != J_NUM) die("field '%s.%s' must be a number", path, key);
    if (v->num < lo || v->num > hi) die("field '%s.%s' = %g out of range [%g, %g]", path, key, v->num, lo, hi);
    return v->num;
}
static int boolean(const jval_t *o, const char *key, const char *path, int def) {
    const jval_t *v = json_get(o, key);
    if (!v) return def;
    if (v->t != J_BOOL) die("field '%s.%s' must be true or false", path, key);
    return v->b;
}
static const char *str(const jval_t *o, const char *key, const char *path, const char *def) {
    const jval_t *v = json_get(o, key);
    if (!v) return def;
    if (v->t != J_STR) die("field '%s.%s' must be a string", path, key);
    return v->str;
}
static dist_t dist(const jval_t *o, const char *key, const char *path, double def_us) {
    dist_t d = { D_CONST, def_us * 1000, 0, 0, 0 };
    const jval_t *v = json_get(o, key);
    if (!v) return d;
    char p[256]; snprintf(p, sizeof p, "%s.%s", path, key);
    if (v->t == J_NUM) { if (v->num < 0) die("field '%s' must be >= 0", p); d.mean = v->num * 1000; return d; }
    static const char *const ak[] = { "dist", "mean", "min", "max", "cv", NULL };
    check_keys(v, p, ak);
    const char *k = str(v, "dist", p, "const");
    if (!strcmp(k, "const")) { d.kind = D_CONST; d.mean = num(v, "mean", p, def_us, 0, 1e12) * 1000; }
    else if (!strcmp(k, "exp")) { d.kind = D_EXP; d.mean = num(v, "mean", p, def_us, 0, 1e12) * 1000; }
    else if (!strcmp(k, "uniform")) { d.kind = D_UNIFORM; d.a = num(v, "min", p, 0, 0, 1e12) * 1000; d.b = num(v, "max", p, 0, 0, 1e12) * 1000;
        if (d.b < d.a) { die("field '%s.max' must be >= min", p); } d.mean = (d.a + d.b) / 2; }
    else if (!strcmp(k, "lognormal")) { d.kind = D_LOGNORMAL; d.mean = num(v, "mean", p, def_us, 1e-6, 1e12) * 1000; d.cv = num(v, "cv", p, 1, 0, 100); }
    else die("field '%s.dist' must be one of const, exp, uniform, lognormal (got '%s')", p, k);
    return d;
}
static cpumask_t cpulist(const jval_t *o, const char *key, const char *path, cpumask_t def) {
    const jval_t *v = json_get(o, key);
    if (!v) return def;
    if (v->t != J_ARR) die("field '%s.%s' must be a list of pCPU numbers", path, key);
    cpumask_t m = 0;
    for (int i = 0; i < v->n; i++) {
        if (v->items[i]->t != J_NUM) die("field '%s.%s[%d]' must be a number", path, key, i);
        int c = (int)v->items[i]->num;
        if (c < 0 || c >= S.ncpu) die("field '%s.%s[%d]' = %d is not a pCPU of the host (0..%d)", path, key, i, c, S.ncpu - 1);
        m |= bit(c);
    }
    if (!m && !strcmp(key, "hard_affinity")) die("field '%s.%s' must not be empty", path, key);
    return m;
}

static void load_scenario(const jval_t *sc) {
    static const char *const top[] = { "seed", "duration_s", "warmup_s", "stop_when_done", "check", "host", "xen", "cache", "memory", "trace", "domains", "comment", "meta", NULL };
    if (!sc || sc->t != J_OBJ) die("the scenario must be a JSON object");
    check_keys(sc, "scenario", top);
    const jval_t *jseed = json_get(sc, "seed");
    if (!jseed) die("missing field 'seed'");
    S.seed = (uint64_t)num(sc, "seed", "scenario", 0, 0, 1.8e19);
    S.duration = (ns_t)(num(sc, "duration_s", "scenario", 10, 1e-6, 1e6) * SEC);
    S.warmup = (ns_t)(num(sc, "warmup_s", "scenario", 0, 0, 1e6) * SEC);
    if (S.warmup >= S.duration) die("field 'warmup_s' must be smaller than 'duration_s'");
    S.stop_when_done = boolean(sc, "stop_when_done", "scenario", 0);
    S.check = boolean(sc, "check", "scenario", 0);

    const jval_t *h = json_get(sc, "host");
    static const char *const hk[] = { "sockets", "cores_per_socket", "threads_per_core", "nodes", "irq_cpu", "smt_speed", NULL };
    check_keys(h, "host", hk);
    S.nsock = (int)num(h, "sockets", "host", 1, 1, 64);
    S.ncore = (int)num(h, "cores_per_socket", "host", 4, 1, 64);
    S.nthr = (int)num(h, "threads_per_core", "host", 1, 1, 8);
    S.nnode = (int)num(h, "nodes", "host", 1, 1, 64);
    S.ncpu = S.nsock * S.ncore * S.nthr;
    if (S.ncpu > MAXCPU) die("field 'host': %d pCPUs exceed the maximum of %d", S.ncpu, MAXCPU);
    if (S.ncpu % S.nnode) die("field 'host.nodes' must divide the number of pCPUs (%d)", S.ncpu);
    S.cpus_per_node = S.ncpu / S.nnode;
    int irq_cpu = (int)num(h, "irq_cpu", "host", S.ncpu - 1, 0, S.ncpu - 1);
    S.smt_speed = num(h, "smt_speed", "host", 1.0, 0.05, 1.0);
    S.online = S.ncpu == 64 ? ~0ULL : (bit(S.ncpu) - 1);
    for (int c = 0; c < S.ncpu; c++) {   /* pCPU numbering: socket-major, then core, then thread */
        pcpu_t *p = &S.cpu[c];
        p->socket = c / (S.ncore * S.nthr); p->core = (c / S.nthr) % S.ncore; p->node = c / S.cpus_per_node;
    }
    for (int c = 0; c < S.ncpu; c++) for (int d = 0; d < S.ncpu; d++) {
        if (S.cpu[c].socket == S.cpu[d].socket) { S.cpu[c].socket_mask |= bit(d); if (S.cpu[c].core == S.cpu[d].core) S.cpu[c].smt_sib |= bit(d); }
        if (S.cpu[c].node == S.cpu[d].node) S.cpu[c].node_mask |= bit(d);
    }

    const jval_t *x = json_get(sc, "xen");
    static const char *const xk[] = { "version", "tslice_ms", "ratelimit_us", "migration_delay_us", "yield", "pick", "push", "push_period_ms",
                                      "ipi_latency_us", "ctxsw_us", "tickle_one_idle", "timer_slop_us", "cachehot_rule",
                                      "switch_cost_us", "yield_cost_us", NULL };
    check_keys(x, "xen", xk);
    const char *ver = str(x, "version", "xen", "4.17");
    int maj = 0, min = 0;
    if (sscanf(ver, "%d.%d", &maj, &min) != 2 || maj != 4 || min < 0 || min > 20) die("field 'xen.version' must look like \"4.6\" or \"4.17\" (4.0 .. 4.20), got '%s'", ver);
    S.ver = maj * 100 + min;
    int tslice_ms = (int)num(x, "tslice_ms", "xen", 30, 1, 1000);
    S.tslice = tslice_ms * MS;
    S.ticks_per_tslice = tslice_ms < 3 ? 1 : 3;             /* __csched_set_tslice [C:1241-1250] */
    S.tick_period = S.tslice / S.ticks_per_tslice;
    S.credits_per_tslice = 10 * tslice_ms;
    double rl = num(x, "ratelimit_us", "xen", S.ver >= 402 ? 1000 : 0, 0, 500000);
    if (rl > 0 && rl < 100) die("field 'xen.ratelimit_us' must be 0 (off) or 100..500000");
    S.ratelimit = (ns_t)(rl * US); if (S.ratelimit > S.tslice) S.ratelimit = S.tslice;
    if (S.ver < 402) S.ratelimit = 0;
    S.migr_delay = (ns_t)(num(x, "migration_delay_us", "xen", 0, 0, 100000) * US);
    /* cache-hot stamp (spec section 17): the version implies sched_time (4.13+) or run_time (4.0-4.12) */
    const char *ch = str(x, "cachehot_rule", "xen", S.ver >= 413 ? "sched_time" : "run_time");
    if (!strcmp(ch, "sched_time")) S.cachehot_rule = CH_SCHED_TIME;
    else if (!strcmp(ch, "run_time")) S.cachehot_rule = CH_RUN_TIME;
    else if (!strcmp(ch, "state_entry")) S.cachehot_rule = CH_STATE_ENTRY;
    else die("field 'xen.cachehot_rule' must be \"sched_time\", \"run_time\" or \"state_entry\", got '%s'", ch);
    const char *y = str(x, "yield", "xen", S.ver >= 401 ? "credit1" : "noop");
    if (!strcmp(y, "noop")) S.yield_noop = 1; else if (!strcmp(y, "credit1")) S.yield_noop = 0;
    else die("field 'xen.yield' must be \"credit1\" or \"noop\", got '%s'", y);
    S.pick = boolean(x, "pick", "xen", 0);
    S.push = boolean(x, "push", "xen", 0);
    S.push_period = (ns_t)(num(x, "push_period_ms", "xen", tslice_ms, 1, 10000) * MS);
    S.ipi_ns = (ns_t)(num(x, "ipi_latency_us", "xen", 2, 0, 1000) * US);
    S.ctxsw_ns = (ns_t)(num(x, "ctxsw_us", "xen", 1, 0, 1000) * US);
    S.tickle_one_idle = boolean(x, "tickle_one_idle", "xen", S.ver >= 401);   /* 4.0 tickled every idler (spec section 17) */
    S.sched_cost = (ns_t)(num(x, "switch_cost_us", "xen", 0, 0, 1000) * US);   /* spec section 17 */
    S.yield_cost = (ns_t)(num(x, "yield_cost_us", "xen", 0, 0, 1000) * US);
    S.timer_slop = (ns_t)(num(x, "timer_slop_us", "xen", 0, 0, 10000) * US);
    rng_seed(&S.trng, S.seed ^ 0x5bd1e9955bd1e995ULL);

    const jval_t *c = json_get(sc, "cache");
    static const char *const ck[] = { "refill_cross_us", "refill_socket_us", "evict_after_us", NULL };
    check_keys(c, "cache", ck);
    S.refill_cross = (ns_t)(num(c, "refill_cross_us", "cache", 0, 0, 1e6) * US);
    S.refill_socket = (ns_t)(num(c, "refill_socket_us", "cache", 0, 0, 1e6) * US);
    S.evict_ns = (ns_t)(num(c, "evict_after_us", "cache", 0, 0, 1e9) * US);
    const jval_t *m = json_get(sc, "memory");
    static const char *const mk[] = { "remote_ratio", NULL };
    check_keys(m, "memory", mk);
    S.remote_ratio = num(m, "remote_ratio", "memory", 1.0, 1.0, 10.0);

    const jval_t *t = json_get(sc, "trace");
    static const char *const tk[] = { "file", "limit", NULL };
    check_keys(t, "trace", tk);
    if (t) {
        const char *f = str(t, "file", "trace", NULL);
        if (!f) die("missing field 'trace.file'");
        S.trace = fopen(f, "w");
        if (!S.trace) die("field 'trace.file': cannot open '%s' for writing", f);
        S.trace_limit = (long)num(t, "limit", "trace", 1000000, 0, 1e9);
    }

    const jval_t *ds = json_get(sc, "domains");
    if (!ds) die("missing field 'domains'");
    if (ds->t != J_ARR || ds->n < 1) die("field 'domains' must be a non-empty list");
    S.ndom = ds->n;
    S.doms = calloc(S.ndom, sizeof(dom_t));
    int nv = 0;
    for (int i = 0; i < ds->n; i++) {
        char p[64]; snprintf(p, sizeof p, "domains[%d]", i);
        nv += (int)num(ds->items[i], "vcpus", p, 1, 1, 512);
    }
    S.nvcpu = nv; S.vcpus = calloc(nv, sizeof(vcpu_t *));
    S.netback = -1;
    int vi = 0;
    static const char *const dk[] = { "name", "vcpus", "weight", "cap", "hard_affinity", "soft_affinity", "vcpu_hard_affinity", "home_node", "workload", NULL };
    static const char *const wk[] = { "kind", "compute_us", "lock", "io", "mem_frac", "job_work_s", "one_way_us", "link_mbps", "seg_bytes",
                                      "wire_overhead_bytes", "window_bytes", "proc_us", "client_us", "tx_notify_us",
                                      "idle_tick_ms", "idle_tick_vcpus", "idle_tick_work_us", "rx_us", "rx_per_kb_us", "tx_us", NULL };
    static const char *const lk[] = { "type", "p", "hold_us", "nlocks", "spin_threshold_us", NULL };
    static const char *const ik[] = { "p", "latency_us", NULL };
    for (int i = 0; i < ds->n; i++) {
        const jval_t *dj = ds->items[i];
        char p[64]; snprintf(p, sizeof p, "domains[%d]", i);
        check_keys(dj, p, dk);
        dom_t *d = &S.doms[i];
        snprintf(d->name, sizeof d->name, "%s", str(dj, "name", p, "vm"));
        d->nv = (int)num(dj, "vcpus", p, 1, 1, 512);
        d->weight = (int)num(dj, "weight", p, 256, 1, 65535);
        d->cap = (int)num(dj, "cap", p, 0, 0, 100 * MAXCPU);
        d->home_node = (int)num(dj, "home_node", p, 0, 0, S.nnode - 1);
        d->first = vi; d->ad_prev = d->ad_next = -1; d->irq_cpu = irq_cpu;
        cpumask_t hard = cpulist(dj, "hard_affinity", p, S.online), soft = cpulist(dj, "soft_affinity", p, 0);
        const jval_t *pv = json_get(dj, "vcpu_hard_affinity");
        if (pv && (pv->t != J_ARR || pv->n != d->nv)) die("field '%s.vcpu_hard_affinity' must be a list with one pCPU list per vCPU", p);
        const jval_t *w = json_get(dj, "workload");
        char wp[96]; snprintf(wp, sizeof wp, "%s.workload", p);
        if (!w) die("missing field '%s'", wp);
        check_keys(w, wp, wk);
        const char *kind = str(w, "kind", wp, NULL);
        if (!kind) die("missing field '%s.kind'", wp);
        if (!strcmp(kind, "idle")) d->wkind = W_IDLE;
        else if (!strcmp(kind, "cpu")) d->wkind = W_CPU;
        else if (!strcmp(kind, "loop")) d->wkind = W_LOOP;
        else if (!strcmp(kind, "net_stream")) d->wkind = W_NET_STREAM;
        else if (!strcmp(kind, "net_rr")) d->wkind = W_NET_RR;
        else if (!strcmp(kind, "netback")) d->wkind = W_NETBACK;
        else die("field '%s.kind' must be one of idle, cpu, loop, net_stream, net_rr, netback (got '%s')", wp, kind);
        /* dom0's netback (spec section 17.6): with a kind-netback domain, every packet into or out of a network
         * guest costs that domain's vCPU rx_us + rx_per_kb_us per KB (in) or tx_us (out) before it moves on */
        if (d->wkind == W_NETBACK) {
            if (S.netback >= 0) die("field '%s.kind': only one domain may be of kind netback (domains[%d] is already)", wp, S.netback);
            if (d->nv != 1) die("field '%s.vcpus' must be 1 for kind netback", p);
            S.netback = i;
            d->nb_rx = dist(w, "rx_us", wp, 0);
            d->nb_rx_per_kb = num(w, "rx_per_kb_us", wp, 0, 0, 1e6);
            d->nb_tx = dist(w, "tx_us", wp, 0);
        } else {
            static const char *const nbk[] = { "rx_us", "rx_per_kb_us", "tx_us", NULL };
            for (int k = 0; nbk[k]; k++)
                if (json_get(w, nbk[k])) die("field '%s.%s' applies to kind netback only (got kind '%s')", wp, nbk[k], kind);
        }
        d->compute = dist(w, "compute_us", wp, 100);
        d->mem_frac = num(w, "mem_frac", wp, 0, 0, 1);
        d->job_work = (ns_t)(num(w, "job_work_s", wp, 0, 0, 1e6) * SEC);
        /* timer interrupts of an idle guest (spec section 17): every idle_tick_ms the first idle_tick_vcpus vCPUs
         * are woken by their virtual timer, run idle_tick_work_us and block again */
        d->idle_tick = (ns_t)(num(w, "idle_tick_ms", wp, 0, 0, 10000) * MS);
        if (d->idle_tick > 0 && d->wkind != W_IDLE) die("field '%s.idle_tick_ms' applies to kind idle only (got kind '%s')", wp, kind);
        if (d->idle_tick > 0 && d->idle_tick < 100 * US) die("field '%s.idle_tick_ms' must be 0 (off) or >= 0.1", wp);
        d->idle_tick_vcpus = (int)num(w, "idle_tick_vcpus", wp, d->nv, 1, d->nv);
        d->idle_tick_work = (ns_t)(num(w, "idle_tick_work_us", wp, 5, 0.001, 10000) * US);
        const jval_t *l = json_get(w, "lock");
        char lp[128]; snprintf(lp, sizeof lp, "%s.lock", wp);
        check_keys(l, lp, lk);
        d->lock_type = LK_NONE;
        if (l) {
            const char *lt = str(l, "type", lp, "none");
            if (!strcmp(lt, "none")) d->lock_type = LK_NONE;
            else if (!strcmp(lt, "tas")) d->lock_type = LK_TAS;
            else if (!strcmp(lt, "ticket")) d->lock_type = LK_TICKET;
            else if (!strcmp(lt, "pv-ticket")) d->lock_type = LK_PVTICKET;
            else if (!strcmp(lt, "spin-yield")) d->lock_type = LK_SPINYIELD;
            else if (!strcmp(lt, "queued-yield")) d->lock_type = LK_QYIELD;
            else die("field '%s.type' must be one of none, tas, ticket, pv-ticket, spin-yield, queued-yield (got '%s')", lp, lt);
            d->p_lock = num(l, "p", lp, 1, 0, 1);
            d->hold = dist(l, "hold_us", lp, 1);
            d->nlocks = (int)num(l, "nlocks", lp, 1, 1, 4096);
            d->spin_thresh = (ns_t)(num(l, "spin_threshold_us", lp, 100, 0.001, 1e6) * US);
        }
        if (d->nlocks < 1) d->nlocks = 1;
        d->locks = calloc(d->nlocks, sizeof(lock_t));
        for (int k = 0; k < d->nlocks; k++) d->locks[k].type = d->lock_type;
        const jval_t *io = json_get(w, "io");
        char ip[128]; snprintf(ip, sizeof ip, "%s.io", wp);
        check_keys(io, ip, ik);
        d->p_io = num(io, "p", ip, 0, 0, 1);
        d->iolat = dist(io, "latency_us", ip, 100);
        if (d->wkind == W_NET_STREAM || d->wkind == W_NET_RR) {
            if (d->nv != 1) die("field '%s.vcpus' must be 1 for network workloads", p);
            d->one_way = dist(w, "one_way_us", wp, 30);
            double mbps = num(w, "link_mbps", wp, 1000, 1, 1e6);
            d->seg_bytes = d->wkind == W_NET_RR ? 1 : (int)num(w, "seg_bytes", wp, 65160, 1, 1 << 24);
            double ovh = num(w, "wire_overhead_bytes", wp, 90, 0, 1e4) / 1448.0;   /* per-MSS framing */
            d->seg_wire = (ns_t)(d->seg_bytes * (1.0 + ovh) * 8.0 / mbps * 1000.0 + 0.5);
            d->window = (int)num(w, "window_bytes", wp, 262144, 1, 1 << 30);
            if (d->window < d->seg_bytes) die("field '%s.window_bytes' must be >= seg_bytes", wp);
            d->proc = dist(w, "proc_us", wp, 10);
            d->rr_client = dist(w, "client_us", wp, 5);
            d->tx_notify = json_get(w, "tx_notify_us") != NULL;   /* netfront's TX completion interrupt (guest.c) */
            d->txc = dist(w, "tx_notify_us", wp, 0);
        }
        for (int k = 0; k < d->nv; k++) {
            vcpu_t *v = calloc(1, sizeof *v);
            v->id = vi; v->dom = i; v->vidx = k;
            v->hard = hard; v->soft = soft & hard;
            if (pv) {
                char pp[96]; snprintf(pp, sizeof pp, "%s.vcpu_hard_affinity", p);
                const jval_t *wrap_items[1] = { pv->items[k] };
                jval_t wrap = { J_OBJ, 0, 0, NULL, 1, (jval_t **)wrap_items, (char *[]){ "hard_affinity" } };
                v->hard = cpulist(&wrap, "hard_affinity", pp, hard);
                v->soft = soft & v->hard;
            }
            v->has_soft = v->soft && (v->soft & v->hard) != v->hard;
            /* initial placement (insert_unit -> pick): spread round-robin over the hard affinity */
            int nh = popcnt(v->hard), idx = (vi) % nh, cc = -1;
            for (cpumask_t mm = v->hard; mm; mm &= mm - 1) if (idx-- == 0) { cc = __builtin_ctzll(mm); break; }
            v->processor = cc;
            rng_seed(&v->rng, S.seed * 0x9e3779b97f4a7c15ULL + (uint64_t)vi * 0xd1b54a32d192ed03ULL + 1);
            S.vcpus[vi++] = v;
        }
    }
}

/* ---------------- result ---------------- */
static double sec(ns_t t) { return (double)t / 1e9; }

static void reset_counters(void) {
    S.n_ctx = S.n_migr = S.n_steal = S.n_boost = S.n_boost_migr = S.n_yield = S.n_yield_changed = S.n_tickle = 0;
    S.n_kickaway = S.n_ratelimit = S.n_acct = S.n_push = S.n_tick_migr = S.n_park = S.n_cachehot_skip = S.n_pick_avoid = 0;
    S.spin_ns = S.runnable_ns = 0;
    for (int i = 0; i < S.nvcpu; i++) {
        vcpu_t *v = S.vcpus[i];
        v->rs_since = S.now;   /* restart runstate accounting without touching state_entry_time */
        memset(v->rs_time, 0, sizeof v->rs_time); v->home_run_ns = 0;
        if (v->g_running) { guest_pause(v, S.now); guest_resume(v, S.now, 0); }   /* split the running segment */
        v->n_boost = v->n_boost_migr = v->n_migr = v->n_yield = v->n_yield_changed = v->n_ctx = v->n_wakes = v->ops = v->n_kicks = v->n_polls = 0;
        v->spin_ns = v->useful_ns = v->stall_ns = v->hold_ns = 0;
    }
    guest_reset_counters();
    S.nwaits = 0;
    S.t_measure = S.now;
}

static int cmp_ns(const void *a, const void *b) { ns_t x = *(const ns_t *)a, y = *(const ns_t *)b; return (x > y) - (x < y); }
/* nearest-rank quantile; sorts the array in place */
static ns_t exact_quantile(ns_t *a, size_t n, double q) {
    static int sorted_n = -1;
    if (!n) return 0;
    if ((size_t)sorted_n != n) { qsort(a, n, sizeof *a, cmp_ns); sorted_n = (int)n; }
    size_t k = (size_t)ceil(q * (double)n); if (k < 1) k = 1; if (k > n) k = n;
    return a[k - 1];
}

static void write_result(double wall) {
    (void)wall;
    ns_t meas = S.now - S.t_measure; if (meas <= 0) meas = 1;
    double ms = sec(meas);
    /* flush runstates */
    for (int i = 0; i < S.nvcpu; i++) { vcpu_t *v = S.vcpus[i]; int rs = v->runstate; v->rs_time[rs] += S.now - v->rs_since;
        if (rs == RS_RUNNING && S.cpu[v->processor].node == S.doms[v->dom].home_node) v->home_run_ns += S.now - v->rs_since;
        if (rs == RS_RUNNABLE) { S.doms[v->dom].runnable_ns += S.now - v->rs_since; S.runnable_ns += S.now - v->rs_since; } v->rs_since = S.now; }
    for (int i = 0; i < S.nvcpu; i++) { vcpu_t *v = S.vcpus[i]; if (v->g_running) { guest_pause(v, S.now); } }
    printf("{\"version\":\"%s\",\"seed\":%llu,\"sim_time_s\":%.9f,\"measured_s\":%.9f,\"events\":%llu,\n",
           SIM_VERSION, (unsigned long long)S.seed, sec(S.now), ms, (unsigned long long)S.n_events);
    printf(" \"counters\":{\"context_switches\":%llu,\"migrations\":%llu,\"steals\":%llu,\"boosts\":%llu,\"boosts_on_migration\":%llu,"
           "\"yields\":%llu,\"yields_changed\":%llu,\"tickles\":%llu,\"kickaways\":%llu,\"ratelimited\":%llu,\"acct_periods\":%llu,"
           "\"push_moves\":%llu,\"tick_migrations\":%llu,\"parks\":%llu,\"cachehot_skips\":%llu,\"pick_avoids\":%llu,"
           "\"spin_s\":%.9f,\"runnable_wait_s\":%.9f},\n",
           (unsigned long long)S.n_ctx, (unsigned long long)S.n_migr, (unsigned long long)S.n_steal, (unsigned long long)S.n_boost,
           (unsigned long long)S.n_boost_migr, (unsigned long long)S.n_yield, (unsigned long long)S.n_yield_changed,
           (unsigned long long)S.n_tickle, (unsigned long long)S.n_kickaway, (unsigned long long)S.n_ratelimit,
           (unsigned long long)S.n_acct, (unsigned long long)S.n_push, (unsigned long long)S.n_tick_migr,
           (unsigned long long)S.n_park, (unsigned long long)S.n_cachehot_skip, (unsigned long long)S.n_pick_avoid,
           sec(S.spin_ns), sec(S.runnable_ns));
    /* exact nearest-rank quantiles over every lock wait of the measured period */
    double wsum = 0; for (size_t i = 0; i < S.nwaits; i++) wsum += (double)S.waits[i];
    double p50 = (double)exact_quantile(S.waits, S.nwaits, 0.5), p99 = (double)exact_quantile(S.waits, S.nwaits, 0.99);
    printf(" \"lock_wait\":{\"n\":%llu,\"mean_us\":%.4f,\"p50_us\":%.4f,\"p99_us\":%.4f},\n", (unsigned long long)S.nwaits,
           S.nwaits ? wsum / S.nwaits / 1e3 : 0.0, p50 / 1e3, p99 / 1e3);
    printf(" \"xentrace\":{\"migrations\":%llu,\"total\":{", (unsigned long long)S.xt_migr);
    for (int k = 0; k < XT_N; k++) printf("%s\"%s\":%llu", k ? "," : "", XT_NAME[k], (unsigned long long)S.xt[k]);
    printf("},\n  \"by_domain\":[");
    for (int di = 0; di < S.ndom; di++) {
        printf("%s{\"migration\":%llu", di ? "," : "", (unsigned long long)S.doms[di].xt_migr);
        for (int k = 0; k < XT_N; k++) printf(",\"%s\":%llu", XT_NAME[k], (unsigned long long)S.doms[di].xt[k]);
        printf("}");
    }
    printf("]},\n");
    printf(" \"domains\":[\n");
    for (int di = 0; di < S.ndom; di++) {
        dom_t *d = &S.doms[di];
        ns_t run = 0, home = 0; uint64_t migr = 0, ctx = 0, yl = 0, ylc = 0, kicks = 0, polls = 0; ns_t stall = 0;
        for (int k = 0; k < d->nv; k++) { vcpu_t *v = S.vcpus[d->first + k]; run += v->rs_time[RS_RUNNING]; home += v->home_run_ns; migr += v->n_migr; ctx += v->n_ctx;
            yl += v->n_yield; ylc += v->n_yield_changed; kicks += v->n_kicks; polls += v->n_polls; stall += v->stall_ns; }
        printf("  {\"name\":\"%s\",\"ops\":%llu,\"ops_per_s\":%.6f,\"useful_s\":%.9f,\"running_s\":%.9f,\"home_running_s\":%.9f,\"spin_s\":%.9f,\"stall_s\":%.9f,"
               "\"runnable_s\":%.9f,\"boosts\":%llu,\"boosts_on_migration\":%llu,\"migrations\":%llu,\"context_switches\":%llu,"
               "\"yields\":%llu,\"yields_changed\":%llu,\"kicks\":%llu,\"polls\":%llu,\"done\":%s,\"done_s\":%.9f,\"rx_mbps\":%.6f,"
               "\"rr_n\":%llu,\"rr_mean_us\":%.4f,\"rr_p99_us\":%.4f,\"lock_wait_n\":%llu,\"lock_wait_mean_us\":%.4f,\"lock_wait_p99_us\":%.4f}%s\n",
               d->name, (unsigned long long)d->ops, d->ops / ms, sec(d->useful_ns), sec(run), sec(home), sec(d->spin_ns), sec(stall),
               sec(d->runnable_ns), (unsigned long long)d->n_boost, (unsigned long long)d->n_boost_migr, (unsigned long long)migr,
               (unsigned long long)ctx, (unsigned long long)yl, (unsigned long long)ylc, (unsigned long long)kicks, (unsigned long long)polls,
               d->done ? "true" : "false", d->done ? sec(d->done_t) : 0.0, d->rx_bytes * 8.0 / ms / 1e6,
               (unsigned long long)d->rr_done, d->lat_h.n ? d->lat_h.sum / d->lat_h.n / 1e3 : 0.0, hist_quantile(&d->lat_h, 0.99) / 1e3,
               (unsigned long long)d->wait_h.n, d->wait_h.n ? d->wait_h.sum / d->wait_h.n / 1e3 : 0.0, hist_quantile(&d->wait_h, 0.99) / 1e3,
               di + 1 < S.ndom ? "," : "");
    }
    printf(" ],\n \"vcpus\":[");
    for (int i = 0; i < S.nvcpu; i++) {
        vcpu_t *v = S.vcpus[i];
        printf("%s\n  {\"dom\":%d,\"vcpu\":%d,\"pri\":%d,\"credit\":%d,\"active\":%s,\"processor\":%d,\"running_s\":%.9f,\"runnable_s\":%.9f,"
               "\"boosts\":%llu,\"migrations\":%llu,\"context_switches\":%llu,\"yields\":%llu,\"spin_s\":%.9f,\"useful_s\":%.9f}",
               i ? "," : "", v->dom, v->vidx, v->pri, v->credit, v->active ? "true" : "false", v->processor,
               sec(v->rs_time[RS_RUNNING]), sec(v->rs_time[RS_RUNNABLE]), (unsigned long long)v->n_boost,
               (unsigned long long)v->n_migr, (unsigned long long)v->n_ctx, (unsigned long long)v->n_yield, sec(v->spin_ns), sec(v->useful_ns));
    }
    printf("\n ]}\n");
}

static char *read_all(FILE *f) {
    size_t cap = 1 << 16, n = 0; char *b = malloc(cap);
    for (;;) { size_t r = fread(b + n, 1, cap - n - 1, f); n += r; if (n + 1 >= cap) { cap *= 2; b = realloc(b, cap); } if (r == 0) break; }
    b[n] = 0; return b;
}

int main(int argc, char **argv) {
    FILE *in = stdin;
    if (argc > 2 || (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        fprintf(stderr, "usage: credit1sim [scenario.json]   (reads stdin without an argument; writes result JSON to stdout)\n");
        return argc == 2 ? 0 : 2;
    }
    if (argc == 2 && !strcmp(argv[1], "--version")) { printf("%s\n", SIM_VERSION); return 0; }
    if (argc == 2 && !strcmp(argv[1], "--selftest")) { extern int credit_selftest(void); return credit_selftest() ? 1 : 0; }
    if (argc == 2 && strcmp(argv[1], "-")) { in = fopen(argv[1], "r"); if (!in) { fprintf(stderr, "credit1sim: cannot open %s\n", argv[1]); return 2; } }
    if (argc == 2 && !strcmp(argv[1], "--version")) { printf("%s\n", SIM_VERSION); return 0; }
    if (argc == 2 && !strcmp(argv[1], "--selftest")) { extern int credit_selftest(void); int f = credit_selftest(); return f ? 1 : 0; }
    char *text = read_all(in);
    char err[256];
    jval_t *sc = json_parse(text, err, sizeof err);
    if (!sc) { fprintf(stderr, "credit1sim: bad scenario: %s\n", err); return 2; }
    load_scenario(sc);
    sched_init();
    guest_init();
    if (S.warmup > 0) ev_push(S.warmup, EV_WARMUP, 0, 0, 0);
    ev_push(S.duration, EV_END, 0, 0, 0);
    while (ev_pending() && !S.stopped) {
        event_t e = ev_next();
        S.now = e.t;
        switch (e.type) {
        case EV_STIMER: {
            pcpu_t *p = &S.cpu[e.a];
            if (e.t != p->stimer_ev_t) continue;            /* superseded by an earlier re-arm */
            p->stimer_ev_t = -1;
            if (p->stimer_t < 0) continue;                  /* stopped */
            if (p->stimer_t > S.now) { p->stimer_ev_t = p->stimer_t; ev_push(p->stimer_t, EV_STIMER, e.a, 0, 0); continue; }
            p->stimer_t = -1; S.this_cpu = e.a; raise_softirq(e.a); break;
        }
        case EV_TICK: if (e.gen != S.cpu[e.a].tick_gen || !S.cpu[e.a].tick_on) continue; csched_tick(e.a); break;
        case EV_ACCT: S.this_cpu = S.master; csched_acct(); break;
        case EV_SOFTIRQ: S.this_cpu = e.a; core_schedule(e.a); break;
        case EV_CTXDONE: ctx_done(e.a); break;
        case EV_GUEST: { vcpu_t *v = S.vcpus[e.a]; if (e.gen != v->g_gen) continue; S.this_cpu = v->processor; guest_event(v); break; }
        case EV_WAKE: { vcpu_t *v = S.vcpus[e.a]; if (e.gen != v->w_gen) continue; S.this_cpu = S.doms[v->dom].irq_cpu; guest_wake_event(v); break; }
        case EV_NET: net_event(e.a, e.b); break;
        case EV_PUSH: csched_push(); break;
        case EV_WARMUP: reset_counters(); break;
        case EV_END: S.stopped = 1; break;
        }
        S.n_events++;
        if (S.check) check_invariants();
    }
    if (S.trace) fclose(S.trace);
    write_result(0);
    return 0;
}
