/* credit.c: the credit1 scheduler (xen/common/sched/credit.c, Xen 4.17) and the parts of the core
 * scheduler (xen/common/sched/core.c) it interacts with.  Every function names the Xen function it
 * models; [C:a-b] / [K:a-b] are line ranges in the 4.17.5 sources as cited in docs credit1-model.md.
 * Version switches (S.ver) reproduce the 4.6-era wake path (spec section 6.1). */
#include "sim.h"
#include <stdlib.h>
#include <string.h>

#define V_MIGRATING_FLAG (S.ver >= 407)   /* 66c7449a4d: CSCHED_FLAG_VCPU_MIGRATING */
#define V_IDLERS_ON_TICKLE (S.ver >= 409) /* 47d5292995 */
#define V_NR_RUNNABLE (S.ver >= 409)      /* 341450eaf7 */
#define V_BALANCE_BIAS (S.ver >= 409)     /* 89216c7999 */
#define V_YIELD_BYPASS_RL (S.ver >= 408)  /* 9fdd2f3c9c */
#define V_RL_REMAINING (S.ver >= 408)     /* 0053127890 */
#define V40 (S.ver < 401)                 /* Xen 4.0 forms (spec section 17): sched_credit.c of 4.0 */

static int in_migrate_wake;

static inline pcpu_t *PC(int c) { return &S.cpu[c]; }
static inline int runnable(const vcpu_t *v) { return v->is_idle || v->pause == 0; }

/* models vcpu_runstate_change() [K] : runstate bookkeeping (time runnable-but-waiting etc.) */
void set_runstate(vcpu_t *v, int rs) {
    if (v->runstate == rs) return;
    ns_t d = S.now - v->rs_since;
    v->rs_time[v->runstate] += d;
    if (v->runstate == RS_RUNNING && !v->is_idle && PC(v->processor)->node == S.doms[v->dom].home_node) v->home_run_ns += d;
    if (v->runstate == RS_RUNNABLE && !v->is_idle) { S.doms[v->dom].runnable_ns += d; S.runnable_ns += d; }
    v->runstate = rs; v->rs_since = S.now; v->state_entry_time = S.now;
}

/* ---------- runqueue: __runq_insert / __runq_remove [C:276-326] ---------- */
static void rq_link_before(vcpu_t *pos, vcpu_t *v) {
    v->rq_next = pos; v->rq_prev = pos->rq_prev; pos->rq_prev->rq_next = v; pos->rq_prev = v; v->on_runq = 1;
}
/* models __runq_insert() [C:276-305]: FIFO within a priority; a YIELDing unit goes past one more
 * non-idle entry of lower priority. */
static void runq_insert(vcpu_t *v) {
    vcpu_t *head = &PC(v->processor)->rq, *it;
    for (it = head->rq_next; it != head; it = it->rq_next)
        if (v->pri > it->pri) break;
    if ((v->flags & F_YIELD) && it != head && it->pri > PRI_IDLE && it->rq_next != head)
        it = it->rq_next;
    rq_link_before(it, v);
}
/* models __runq_remove() [C:307-312] */
static void runq_remove(vcpu_t *v) {
    v->rq_prev->rq_next = v->rq_next; v->rq_next->rq_prev = v->rq_prev; v->rq_next = v->rq_prev = NULL; v->on_runq = 0;
}
/* models !is_runq_idle() [C]: a non-idle unit waits at the head of cpu's runq */
static int runq_has_waiting(int cpu) {
    vcpu_t *h = &PC(cpu)->rq; return h->rq_next != h && !h->rq_next->is_idle;
}

/* models burn_credits() [C:328-346] */
static void burn_credits(vcpu_t *v, ns_t now) {
    ns_t delta = now - v->start_time;
    if (delta <= 0) return;
    if (V40) {   /* 4.0 burn_credits(): rounded to the nearest credit, no residual; start_time may run ahead of now */
        int64_t c = (delta * 10 + 500000) / 1000000;
        v->credit -= (int)c; v->start_time += c * 100000;
        return;
    }
    int64_t val = delta * 10 + v->residual;   /* CSCHED_CREDITS_PER_MSEC */
    int64_t credits = val / 1000000;
    v->residual = val % 1000000;
    v->credit -= (int)credits;
    v->start_time += credits * 100000;
}

/* models cpu_raise_softirq(cpu, SCHEDULE_SOFTIRQ): immediate locally, an IPI (ipi_latency_us) remotely */
void raise_softirq(int cpu) {
    pcpu_t *p = PC(cpu);
    if (p->softirq_pending) return;
    p->softirq_pending = 1;
    ev_push(S.now + (cpu == S.this_cpu ? 0 : S.ipi_ns), EV_SOFTIRQ, cpu, 0, 0);
}

/* models affinity_balance_cpumask() (sched-if.h): soft step = soft & hard, hard step = hard */
static inline cpumask_t balance_mask(const vcpu_t *v, int soft) { return soft ? (v->soft & v->hard) : v->hard; }

/* models csched_runq_sort() [C:1326-1368]: stable move of UNDER/BOOST entries ahead of OVER */
static void runq_sort(int cpu) {
    pcpu_t *p = PC(cpu);
    if (p->runq_sort_last == S.runq_sort) return;
    p->runq_sort_last = S.runq_sort;
    vcpu_t *head = &p->rq, *last_under = head, *e = head->rq_next;
    while (e != head) {
        vcpu_t *next = e->rq_next;
        if (e->pri >= PRI_UNDER) {
            if (e->rq_prev != last_under) {
                e->rq_prev->rq_next = e->rq_next; e->rq_next->rq_prev = e->rq_prev;   /* list_del */
                e->rq_next = last_under->rq_next; e->rq_prev = last_under;           /* list_add after last_under */
                last_under->rq_next->rq_prev = e; last_under->rq_next = e;
            }
            last_under = e;
        }
        e = next;
    }
}

/* domain sibling count on a pCPU (current + runq), for the "pick"/"push" extensions (spec section 10) */
static int siblings_on(int cpu, int dom, const vcpu_t *except) {
    int n = 0; pcpu_t *p = PC(cpu);
    if (!p->curr->is_idle && p->curr->dom == dom && p->curr != except) n++;
    for (vcpu_t *e = p->rq.rq_next; e != &p->rq; e = e->rq_next)
        if (!e->is_idle && e->dom == dom && e != except) n++;
    return n;
}

/* models _csched_cpu_pick() [C:722-861] (+ the "pick" extension when S.pick); with version 4.0 its 4.0 form
 * (spec section 17): no soft step, the start pCPU always counts as idle, no move to an idle start, and the same
 * "more idlers" comparison within and across sockets */
static int cpu_pick(vcpu_t *v, int commit) {
    int cpu = v->processor; pcpu_t *spc = NULL;
    for (int soft = 1; soft >= 0; soft--) {
        if (soft && (!v->has_soft || V40)) continue;
        cpumask_t cpus = balance_mask(v, soft) & S.online;
        if (soft && !cpus) continue;
        if (S.pick && !v->is_idle) {   /* extension: avoid pCPUs already holding a sibling of v's domain */
            cpumask_t ok = 0;
            for (cpumask_t m = cpus; m; m &= m - 1) { int c = __builtin_ctzll(m); if (!siblings_on(c, v->dom, v)) ok |= bit(c); }
            if (ok && ok != cpus) { cpus = ok; S.n_pick_avoid++; }
        }
        cpu = (cpus & bit(v->processor)) ? v->processor : cpumask_cycle(v->processor, cpus);
        cpumask_t idlers = S.online & S.idlers;
        if (V40) idlers |= bit(cpu);                     /* 4.0: cpu_set(cpu, idlers) unconditionally */
        else if (v->processor == cpu && !runq_has_waiting(cpu)) idlers |= bit(cpu);
        cpus &= idlers;
        if (!V40 && !(cpus & bit(cpu)) && cpus) cpu = cpumask_cycle(cpu, cpus);
        cpus &= ~bit(cpu);
        while (cpus) {
            int nxt = cpumask_cycle(cpu, cpus);
            cpumask_t ci, ni; int f;
            if (PC(cpu)->socket == PC(nxt)->socket) { f = 1; ci = idlers & PC(cpu)->smt_sib; ni = idlers & PC(nxt)->smt_sib; }
            else { f = V40 ? 1 : 2; ci = idlers & PC(cpu)->socket_mask; ni = idlers & PC(nxt)->socket_mask; }
            if (popcnt(ci) * f < popcnt(ni)) {
                ni &= cpus;
                spc = PC(nxt);
                cpu = cpumask_cycle(spc->idle_bias, ni);
                cpus &= ~PC(cpu)->smt_sib;
            } else cpus &= ~ni;
        }
        if (idlers & bit(cpu)) break;
    }
    if (commit && spc) spc->idle_bias = cpu;
    xtrace(XT_PICK, "TRC_CSCHED_PICKED_CPU", cpu, v, commit, 0);
    return cpu;
}

/* models csched_res_pick() [C:863-877]: sets the MIGRATING flag (4.7+) */
static int res_pick(vcpu_t *v) {
    if (V_MIGRATING_FLAG) v->flags |= F_MIGRATING;
    return cpu_pick(v, 1);
}

/* models __runq_tickle() [C:353-508] (4.17) and its 4.6/4.7 forms [v4.6:~390-470]; 4.0 form (spec section 17):
 * the waker's pCPU is tickled whenever new outranks cur, and, when cur is not idle, the idlers in new's affinity
 * too (all of them unless tickle_one_idle; no kick-away, no soft affinity) */
static void runq_tickle(vcpu_t *nw) {
#ifdef KO_RUNQ_TICKLE
    (void)nw; return;   /* mutant: a wake never raises SCHEDULE_SOFTIRQ anywhere */
#endif
    int cpu = nw->processor; vcpu_t *cur = PC(cpu)->curr;
    cpumask_t idle_mask = S.idlers & S.online, mask = 0;
    if (V40) {
        if (nw->pri > cur->pri) mask = bit(cpu);
        if (cur->pri > PRI_IDLE) {
            cpumask_t s = idle_mask & nw->hard;
            if (s) {
                int *ltc = &PC(S.this_cpu)->last_tickle;
                if (S.tickle_one_idle) { *ltc = cpumask_cycle(*ltc, s); mask |= bit(*ltc); }
                else mask |= s;
            }
            mask &= nw->hard;
        }
        goto tickle;
    }
    if (S.ver >= 411 && (nw->flags & F_PINNED) && (idle_mask & bit(cpu))) { mask = bit(cpu); goto tickle; }
    if (cur->pri == PRI_IDLE || (!idle_mask && nw->pri > cur->pri)) mask = bit(cpu);
    else if (idle_mask) {
        for (int soft = 1; soft >= 0; soft--) {
            if (soft && !nw->has_soft) continue;
            cpumask_t s = balance_mask(nw, soft) & idle_mask;
            if (!s && soft) continue;
            if (!s && nw->pri > cur->pri) {
                int kick;
                if (S.ver < 407) kick = 1;                                    /* 4.6: unconditional [v4.6:446] */
                else if (S.ver < 413) kick = (cur->hard & idle_mask) != 0;    /* f02a5760c7 */
                else kick = 0;                                                /* 4.13+: dead code (spec 6) */
                if (kick && !cur->is_idle) { cur->pause |= VPF_MIGRATING; S.n_kickaway++; trace("TRC_CSCHED_KICKAWAY", cpu, cur, 0, 0); }
                mask = bit(cpu);
            } else if (s) {
                if (S.ver >= 406 && S.ver < 408) s = idle_mask;   /* 4.6-4.7 regression: any pool idler */
                int *ltc = &PC(S.this_cpu)->last_tickle;
                if (S.tickle_one_idle) { *ltc = cpumask_cycle(*ltc, s); mask = bit(*ltc); }
                else mask = s;
            }
            if (mask) break;
        }
    }
tickle:
    for (cpumask_t m = mask; m; m &= m - 1) {
        int c = __builtin_ctzll(m);
        if (V_IDLERS_ON_TICKLE) S.idlers &= ~bit(c);
        S.n_tickle++;
        xtrace(XT_TICKLE, "TRC_CSCHED_TICKLE", c, nw, 0, 0);
        raise_softirq(c);
    }
}

/* models csched_unit_wake() [C:1108-1168] */
static void csched_unit_wake(vcpu_t *v) {
    if (v->is_curr || v->on_runq) return;
    int migrating = 0;
    if (V_MIGRATING_FLAG && (v->flags & F_MIGRATING)) { v->flags &= ~F_MIGRATING; migrating = 1; }
#ifndef KO_CSCHED_UNIT_WAKE_BOOST
    if (!migrating && v->pri == PRI_UNDER && !(v->flags & F_PARKED)) {
        v->pri = PRI_BOOST; v->n_boost++; S.n_boost++; S.doms[v->dom].n_boost++;
        if (in_migrate_wake) { v->n_boost_migr++; S.n_boost_migr++; S.doms[v->dom].n_boost_migr++; }
        xtrace(XT_BOOST, "TRC_CSCHED_BOOST_START", v->processor, v, in_migrate_wake, 0);
    }
#else
    (void)migrating;   /* mutant: a wake never BOOSTs */
#endif
    runq_insert(v);
    PC(v->processor)->nr_runnable++;
    runq_tickle(v);
}

/* models vcpu_wake() [K:965-1002] */
void vcpu_wake(vcpu_t *v) {
    if (v->pause == 0) {
        if (v->runstate >= RS_BLOCKED) set_runstate(v, RS_RUNNABLE);
        v->n_wakes++;
        xtrace(XT_WAKE, "TRC_SCHED_WAKE", v->processor, v, 0, 0);
        csched_unit_wake(v);
    } else if (!(v->pause & VPF_BLOCKED) && v->runstate == RS_BLOCKED) set_runstate(v, RS_OFFLINE);
}

/* models vcpu_unblock() [K:1004-1022] */
void vcpu_unblock(vcpu_t *v) {
    if (!(v->pause & VPF_BLOCKED)) return;
    v->pause &= ~VPF_BLOCKED;
    vcpu_wake(v);
}

/* models csched_unit_sleep() [C:1083-1106] */
static void csched_unit_sleep(vcpu_t *v) {
    if (v->is_curr) raise_softirq(v->processor);
    else if (v->on_runq) { runq_remove(v); PC(v->processor)->nr_runnable--; }
}

/* models vcpu_block_enable_events() [K:1414-1440] / do_poll() [K:1442-1514]: the guest stops executing */
void vcpu_block(vcpu_t *v) {
    guest_pause(v, S.now);
    v->pause |= VPF_BLOCKED;
    xtrace(XT_BLOCK, "TRC_SCHED_BLOCK", v->processor, v, 0, 0);
    csched_unit_sleep(v);
}

/* models vcpu_yield() [K:1517-1535] + csched_unit_yield() [C:1170-1177].  With yield "noop" (Xen < 4.1)
 * the hypercall still enters the scheduler but no YIELD flag is set. */
void vcpu_yield(vcpu_t *v) {
#ifndef KO_CSCHED_UNIT_YIELD
    if (!S.yield_noop) v->flags |= F_YIELD;   /* csched_unit_yield() */
#endif
    v->n_yield++; S.n_yield++; v->yield_pending = 1;
    xtrace(XT_YIELD, "TRC_SCHED_YIELD", v->processor, v, 0, 0);
    if (S.yield_cost) {
        /* yield_cost_us (spec section 17): the hypercall (guest exit, do_sched_op, return) takes yield_cost on the
         * yielder's pCPU before the SCHEDULE_SOFTIRQ it raised runs on the way out; the yielder is current, so it is
         * charged; its guest is stopped meanwhile and softirqs are held, as in a context-switch window */
        pcpu_t *p = PC(v->processor);
        guest_pause(v, S.now);
        p->ctx_pending = 1; p->ctx_prev = NULL; p->softirq_pending = 2;
        ev_push(S.now + S.yield_cost, EV_CTXDONE, v->processor, 0, 0);
        return;
    }
    raise_softirq(v->processor);
}

/* models __csched_vcpu_acct_start() / _stop() [C:880-931] */
static void acct_start(vcpu_t *v) {
    dom_t *d = &S.doms[v->dom];
    if (v->active) return;
    v->active = 1;
    v->act_prev = NULL; v->act_next = d->act_head; if (d->act_head) d->act_head->act_prev = v; d->act_head = v;
    d->active_count++;
    if (!V40 || !d->on_active) S.weight += d->weight;   /* 4.0: weight counted once per active domain */
    if (!d->on_active) {   /* list_add at the head of active_sdom */
        int di = v->dom;
        d->on_active = 1; d->ad_prev = -1; d->ad_next = S.active_head;
        if (S.active_head >= 0) S.doms[S.active_head].ad_prev = di;
        S.active_head = di;
    }
    trace("TRC_CSCHED_ACCOUNT_START", v->processor, v, 0, 0);
}
static void sdom_unlink(int di) {
    dom_t *d = &S.doms[di];
    if (d->ad_prev >= 0) S.doms[d->ad_prev].ad_next = d->ad_next; else S.active_head = d->ad_next;
    if (d->ad_next >= 0) S.doms[d->ad_next].ad_prev = d->ad_prev;
    d->on_active = 0;
}
static void acct_stop(vcpu_t *v) {
    dom_t *d = &S.doms[v->dom];
    if (!v->active) return;
    if (v->act_prev) v->act_prev->act_next = v->act_next; else d->act_head = v->act_next;
    if (v->act_next) v->act_next->act_prev = v->act_prev;
    v->active = 0; v->act_prev = v->act_next = NULL;
    d->active_count--;
    if (!V40 || !d->active_count) S.weight -= d->weight;
    if (!d->active_count) sdom_unlink(v->dom);
    trace("TRC_CSCHED_ACCOUNT_STOP", v->processor, v, 0, 0);
}

static inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* models csched_acct() [C:1370-1574] */
void csched_acct(void) {
    S.n_acct++;
    int64_t weight_total = S.weight, credit_total = S.credit;
    if (S.credit_balance < 0) credit_total -= S.credit_balance;
    if (weight_total == 0) { S.credit_balance = 0; goto out; }
    int64_t weight_left = weight_total, balance = 0; int xtra = 0;
    int cpt = S.credits_per_tslice;
    for (int di = S.active_head, nd; di >= 0; di = nd) {
        dom_t *d = &S.doms[di];
        nd = d->ad_next;
        int64_t n = d->active_count, w = d->weight;
#ifndef KO_CSCHED_ACCT_CAP
        const int dcap = d->cap;
#else
        const int dcap = 0;   /* mutant: caps ignored */
#endif
        int64_t wn = V40 ? w : w * n;   /* 4.0: a domain competes with its weight, not weight x active vCPUs */
        weight_left -= wn;
        int64_t peak = n * cpt, ccap = 0;
        if (S.credit_balance < 0) peak += div_up(-(int64_t)S.credit_balance * wn, weight_total);
        if (dcap) {
            ccap = div_up((int64_t)dcap * cpt, 100);
            if (ccap < peak) peak = ccap;
            ccap = div_up(ccap, n);
        }
        int64_t fair = div_up(credit_total * wn, weight_total);
        if (fair < peak) xtra = 1;
        else {
            if (weight_left) credit_total += div_up((fair - peak) * weight_total, weight_left);
            if (xtra) {   /* list_del + list_add: move to the head of active_sdom */
                sdom_unlink(di);
                d->on_active = 1; d->ad_prev = -1; d->ad_next = S.active_head;
                if (S.active_head >= 0) S.doms[S.active_head].ad_prev = di;
                S.active_head = di;
            }
            fair = peak;
        }
        fair = div_up(fair, n);
        for (vcpu_t *v = d->act_head, *nv; v; v = nv) {
            nv = v->act_next;
            v->credit += (int)fair;
            if (v->credit < 0) {
#ifndef KO_CSCHED_ACCT_OVER
                v->pri = PRI_OVER;
#else
                v->pri = PRI_UNDER;   /* mutant: no credit priority; a BOOST still ends here, as going OVER ends it */
#endif
                if (dcap && v->credit < -ccap && !(v->flags & F_PARKED)) {
                    v->flags |= F_PARKED; S.n_park++;
                    v->pause |= VPF_PAUSED; guest_pause(v, S.now); csched_unit_sleep(v);   /* vcpu_pause_nosync */
                }
                if (v->credit < -cpt) v->credit = -cpt;
            } else {
                if (v->pri == PRI_BOOST) trace("TRC_CSCHED_BOOST_END", v->processor, v, 1, 0);
                v->pri = PRI_UNDER;
                if (v->flags & F_PARKED) {
                    /* 4.13+ (5c8c0ae7c4): unpause before clearing PARKED, so no BOOST; 4.3-4.12: BOOSTed */
                    if (S.ver >= 413) { v->pause &= ~VPF_PAUSED; vcpu_wake(v); v->flags &= ~F_PARKED; }
                    else { v->flags &= ~F_PARKED; v->pause &= ~VPF_PAUSED; vcpu_wake(v); }
                }
                if (v->credit > cpt) { acct_stop(v); v->credit = V40 ? 0 : v->credit / 2; }   /* 4.0: reset to 0 */
            }
            balance += v->credit;
        }
    }
    S.credit_balance = (int)balance;
    S.runq_sort++;
out:
    ev_push(S.now + S.tslice + slop(), EV_ACCT, S.master, 0, 0);
}

/* models _csched_cpu_pick's caller in csched_unit_acct() [C:933-998] and csched_tick() [C:1576-1601] */
void csched_tick(int cpu) {
    pcpu_t *p = PC(cpu);
    S.this_cpu = cpu;
    vcpu_t *cur = p->curr;
    if (!cur->is_idle) {
#ifndef KO_CSCHED_UNIT_ACCT_UNBOOST
        if (cur->pri == PRI_BOOST) { cur->pri = PRI_UNDER; trace("TRC_CSCHED_BOOST_END", cpu, cur, 0, 0); }
#endif
        burn_credits(cur, S.now);
        if (!cur->active) acct_start(cur);
        else if (!(cur->pause & VPF_MIGRATING) && cpu_pick(cur, 0) != cpu) {
            cur->pause |= VPF_MIGRATING; S.n_tick_migr++;
            raise_softirq(cpu);
        }
    }
    runq_sort(cpu);
    trace("TRC_CSCHED_TICK", cpu, cur->is_idle ? NULL : cur, 0, 0);
    ev_push(S.now + S.tick_period + slop(), EV_TICK, cpu, p->tick_gen, 0);
}

/* models __csched_vcpu_is_cache_hot() [C:690-720] and its older forms (spec section 17, cachehot_rule):
 * 4.13+ (sched/credit.c): now - svc->last_sched_time, stamped by every csched_schedule() pass over the unit;
 * 4.0-4.12 (sched_credit.c): now - v->last_run_time, stamped by schedule() only when the vCPU is switched out;
 * 2009 patch 95e3cd67add2 (xen-unstable before 3.4): now - v->runstate.state_entry_time, which a wake from
 * blocked also resets, so a freshly woken vCPU counts as cache-hot however long it slept. */
static inline int cache_hot(const vcpu_t *s) {
#ifdef KO_CSCHED_VCPU_IS_CACHE_HOT
    (void)s; return 0;   /* mutant: nothing is cache-hot, vcpu_migration_delay has no effect */
#endif
    ns_t stamp = S.cachehot_rule == CH_SCHED_TIME ? s->last_sched_time
               : S.cachehot_rule == CH_RUN_TIME ? s->last_run_time : s->state_entry_time;
    return S.now - stamp < S.migr_delay;
}

/* models csched_runq_steal() [C:1603-1677] */
static vcpu_t *runq_steal(int peer, int cpu, int pri, int soft) {
    pcpu_t *pp = PC(peer);
    if (pp->curr->is_idle) return NULL;
    for (vcpu_t *s = pp->rq.rq_next; s != &pp->rq; s = s->rq_next) {
        if (s->pri <= pri) break;
        if (s->is_running) continue;
        if (soft && !s->has_soft) continue;
        if (S.migr_delay && cache_hot(s)) { S.n_cachehot_skip++; continue; }
        if (!(balance_mask(s, soft) & bit(cpu))) continue;
        xtrace(XT_STEAL, "TRC_CSCHED_STOLEN_VCPU", peer, s, cpu, 0);
        runq_remove(s);
        s->processor = cpu; s->n_migr++; S.n_migr++;
        pp->nr_runnable--;
        return s;
    }
    return NULL;
}

/* models csched_load_balance() [C:1679-1817] */
static vcpu_t *load_balance(int cpu, vcpu_t *snext) {
#ifdef KO_CSCHED_LOAD_BALANCE
    runq_remove(snext);   /* mutant: the pCPU never looks at its peers' runqueues */
    return snext;
#endif
    int mynode = PC(cpu)->node, nn = V40 ? 1 : S.nnode;
    for (int soft = V40 ? 0 : 1; soft >= 0; soft--) {
        for (int k = 0; k < nn; k++) {
            int node = (mynode + k) % S.nnode;
            cpumask_t workers = (S.online & ~S.idlers) & (V40 ? S.online : S.cpu[node * S.cpus_per_node].node_mask) & ~bit(cpu);
            if (!workers) continue;
            /* 4.0 (spec section 17): one pass, no soft step and no node loop, over all busy pCPUs from the neighbour */
            int first = V_BALANCE_BIAS ? cpumask_cycle(S.balance_bias[node], workers)
                      : V40 ? cpumask_cycle(cpu, workers) : __builtin_ctzll(workers);
            int peer = first;
            do {
                if (!V_NR_RUNNABLE || PC(peer)->nr_runnable > 1) {
                    vcpu_t *s = runq_steal(peer, cpu, snext->pri, soft);
                    if (s) {
                        S.balance_bias[node] = peer;
                        S.n_steal++;
                        PC(cpu)->nr_runnable++;
                        return s;
                    }
                }
                peer = cpumask_cycle(peer, workers);
            } while (peer != first);
        }
    }
    runq_remove(snext);
    return snext;
}

/* models csched_schedule() [C:1823-2007]; returns snext and the time slice (-1 = none) */
static vcpu_t *csched_schedule(int cpu, ns_t now, ns_t *tslice_out) {
    pcpu_t *p = PC(cpu);
    vcpu_t *scurr = p->curr, *snext;
    ns_t runtime = now - scurr->state_entry_time; if (runtime < 0) runtime = 0;
    ns_t tslice;
    if (!scurr->is_idle) { burn_credits(scurr, now); scurr->start_time -= now; scurr->last_sched_time = now; }
    else scurr->pri = PRI_IDLE;
    int yield_blocks_rl = V_YIELD_BYPASS_RL ? (scurr->flags & F_YIELD) : 0;
#ifdef KO_CSCHED_SCHEDULE_RATELIMIT
    yield_blocks_rl = 1;   /* mutant: the rate limit never keeps the current vCPU */
#endif
    if (!yield_blocks_rl && S.ratelimit && runnable(scurr) && !scurr->is_idle && runtime < S.ratelimit) {
        snext = scurr; snext->start_time += now;
        if (V_RL_REMAINING) { tslice = S.ratelimit - runtime; if (runtime < 100 * US) tslice = 100 * US; }
        else tslice = S.ratelimit;
        S.n_ratelimit++;
        xtrace(XT_RATELIMIT, "TRC_CSCHED_RATELIMIT", cpu, scurr, runtime, 0);
        goto out;
    }
    tslice = S.tslice;
    if (runnable(scurr)) runq_insert(scurr);
    else p->nr_runnable--;
    scurr->flags &= ~F_YIELD;
    snext = p->rq.rq_next;
    if (snext->pri > PRI_OVER) runq_remove(snext);
    else snext = load_balance(cpu, snext);
    if (snext->pri == PRI_IDLE) S.idlers |= bit(cpu); else S.idlers &= ~bit(cpu);
    if (!snext->is_idle) snext->start_time += now;
out:
    *tslice_out = snext->is_idle ? -1 : tslice;
    return snext;
}

/* models schedule() [K:2654-2706] + sched_context_switch(): the SCHEDULE_SOFTIRQ handler */
void core_schedule(int cpu) {
    pcpu_t *p = PC(cpu);
    p->softirq_pending = 0;
    if (p->ctx_pending) { p->softirq_pending = 2; return; }   /* runs when the context switch completes */
    vcpu_t *prev = p->curr;
    p->stimer_t = -1;                                         /* stop s_timer */
    ns_t tslice;
    vcpu_t *snext = csched_schedule(cpu, S.now, &tslice);
    if (tslice >= 0) {
        /* lazy re-arm: keep at most one live heap event per s_timer; a later deadline is re-pushed when the
         * earlier event fires (this keeps the heap small when schedule() runs often, e.g. on yields) */
        p->stimer_t = S.now + tslice + slop();
        if (p->stimer_ev_t < 0 || p->stimer_t < p->stimer_ev_t) { p->stimer_ev_t = p->stimer_t; ev_push(p->stimer_t, EV_STIMER, cpu, 0, 0); }
    }
    /* ticker: stopped while idle, restarted aligned to the tick period when leaving idle [C:1999-2004] */
    if (snext->is_idle) { if (p->tick_on) { p->tick_on = 0; p->tick_gen++; } }
    else if (!p->tick_on) {
        p->tick_on = 1; p->tick_gen++;
        ev_push(S.now + S.tick_period - S.now % S.tick_period + slop(), EV_TICK, cpu, p->tick_gen, 0);
    }
    if (prev->yield_pending) { prev->yield_pending = 0; if (snext != prev) { prev->n_yield_changed++; S.n_yield_changed++; } }
    if (snext == prev) {
        /* switch_cost_us (spec section 17): the pass itself costs CPU; the vCPU that keeps the pCPU is current
         * throughout, so Xen charges it; its guest resumes when the pass is over (softirqs meanwhile are held) */
        if (S.sched_cost && !prev->is_idle) {
            guest_pause(prev, S.now);
            p->ctx_pending = 1; p->ctx_prev = NULL;
            ev_push(S.now + S.sched_cost, EV_CTXDONE, cpu, 0, 0);
            return;
        }
        guest_after_schedule(prev, cpu, 1); return;
    }
    /* context switch */
    if (!prev->is_idle) {
        guest_pause(prev, S.now);
        p->busy_ns += S.now - p->busy_since;
        prev->last_cpu = cpu; prev->last_cpu_busy = p->busy_ns; prev->last_run_time = S.now;   /* schedule(): prev->last_run_time = now (< 4.13) */
    }
    prev->is_curr = 0;
    if (!prev->is_idle) set_runstate(prev, runnable(prev) ? RS_RUNNABLE : ((prev->pause & VPF_BLOCKED) ? RS_BLOCKED : RS_OFFLINE));
    snext->is_curr = 1; snext->is_running = 1;
    if (snext->processor != cpu) snext->processor = cpu;
    if (!snext->is_idle) { set_runstate(snext, RS_RUNNING); p->busy_since = S.now; snext->n_ctx++; }
    snext->state_entry_time = S.now;
    p->curr = snext;
    if (prev->is_idle != snext->is_idle) smt_changed(cpu);
    S.n_ctx++;
    xtrace(XT_SWITCH, "TRC_SCHED_SWITCH", cpu, snext, prev->is_idle ? -1 : prev->dom, prev->is_idle ? -1 : prev->vidx);
    p->ctx_pending = 1; p->ctx_prev = prev;
    /* ctxsw_us: switch latency; switch_cost_us: the scheduler pass (spec section 17).  Both are charged to snext,
     * whose start_time is this pass's `now`, as in Xen */
    ev_push(S.now + S.ctxsw_ns + S.sched_cost, EV_CTXDONE, cpu, 0, 0);
}

/* models sched_unit_migrate_finish() [K:1098-1190] (vcpu_migrate() in 4.6) */
static void vcpu_migrate(vcpu_t *v) {
    if (v->is_running || !(v->pause & VPF_MIGRATING)) return;
    int old = v->processor;
    int nc = res_pick(v);
    v->pause &= ~VPF_MIGRATING;
    if (nc != old) {
        v->processor = nc; v->n_migr++; S.n_migr++;
        trace("TRC_SCHED_MIGRATE", nc, v, old, 0);
    }
    in_migrate_wake = 1;
    vcpu_wake(v);
    in_migrate_wake = 0;
}

/* models context_saved() / sched_context_switched() [K:2306-2325] at context-switch completion */
void ctx_done(int cpu) {
    pcpu_t *p = PC(cpu);
    S.this_cpu = cpu;
    vcpu_t *prev = p->ctx_prev;
    p->ctx_pending = 0; p->ctx_prev = NULL;
    if (prev && prev != p->curr) {
        prev->is_running = 0;
        if (!prev->is_idle && (prev->pause & VPF_MIGRATING)) vcpu_migrate(prev);
    }
    if (!p->curr->is_idle) guest_resume(p->curr, S.now, prev != NULL);   /* prev NULL: end of a hypercall/pass cost */
    if (p->softirq_pending == 2) { p->softirq_pending = 0; raise_softirq(cpu); }
}

/* "push" extension (spec section 10; seed 000): periodically move a waiting vCPU that shares a pCPU with a
 * sibling of its domain to an allowed pCPU holding no sibling (fewest runnable units, round-robin ties). */
void csched_push(void) {
    S.this_cpu = S.master;
    for (int c = 0; c < S.ncpu; c++) {
        pcpu_t *p = PC(c);
        for (vcpu_t *w = p->rq.rq_next, *nx; w != &p->rq; w = nx) {
            nx = w->rq_next;
            if (w->is_idle || w->is_running) continue;
            if (!siblings_on(c, w->dom, w)) continue;
            int best = -1, bestload = 1 << 30;
            cpumask_t m = w->hard & S.online & ~bit(c);
            for (int k = 1; k <= S.ncpu; k++) {
                int t = (c + k) % S.ncpu;
                if (!(m & bit(t))) continue;
                if (siblings_on(t, w->dom, w)) continue;
                int load = PC(t)->nr_runnable;
                if (load < bestload) { best = t; bestload = load; }
            }
            if (best < 0) continue;
            runq_remove(w); p->nr_runnable--;
            w->processor = best; w->n_migr++; S.n_migr++; S.n_push++;
            trace("TRC_SCHED_MIGRATE", best, w, c, 1);
            runq_insert(w); PC(best)->nr_runnable++;
            S.this_cpu = S.master;
            runq_tickle(w);
        }
    }
    ev_push(S.now + S.push_period, EV_PUSH, S.master, 0, 0);
}

/* models csched_alloc_udata/csched_unit_insert [C:1000-1054] and csched_init/alloc_pdata [C:560-640] */
void sched_init(void) {
    S.idlers = S.online;
    S.credit = S.credits_per_tslice * S.ncpu;
    S.active_head = -1;
    for (int c = 0; c < S.ncpu; c++) {
        pcpu_t *p = PC(c);
        p->rq.rq_next = p->rq.rq_prev = &p->rq;
        vcpu_t *idle = calloc(1, sizeof *idle);
        idle->is_idle = 1; idle->pri = PRI_IDLE; idle->processor = c; idle->dom = -1; idle->id = -1 - c;
        idle->hard = bit(c); idle->is_curr = 1; idle->is_running = 1;
        p->idle = p->curr = idle;
        p->last_tickle = c; p->stimer_t = p->stimer_ev_t = -1;
        p->idle_bias = S.ncpu - 1;   /* init_pdata(): nr_cpu_ids - 1 */
        p->runq_sort_last = 0;
    }
    for (int i = 0; i < S.nvcpu; i++) {
        vcpu_t *v = S.vcpus[i];
        v->pri = PRI_UNDER; v->credit = 0; v->last_cpu = -1; v->xt_last_cpu = -1;
        if (popcnt(v->hard) == 1) v->flags |= F_PINNED;
    }
    ev_push(S.tslice, EV_ACCT, S.master, 0, 0);
    if (S.push) ev_push(S.push_period, EV_PUSH, S.master, 0, 0);
}

/* ---------------- invariants (scenario "check": true; after every event) ---------------- */
void check_invariants(void) {
    for (int c = 0; c < S.ncpu; c++) {
        pcpu_t *p = PC(c);
        int n = 0, idle_seen = 0, last = 1000;
        for (vcpu_t *e = p->rq.rq_next; e != &p->rq; e = e->rq_next) {
            if (e->rq_next->rq_prev != e) { fprintf(stderr, "invariant: runq %d broken\n", c); abort(); }
            if (e->is_idle) { idle_seen++; if (e != p->idle || e->rq_next != &p->rq) { fprintf(stderr, "invariant: idle not at tail of runq %d\n", c); abort(); } continue; }
            if (e->processor != c || e->is_curr || e->pause) { fprintf(stderr, "invariant: bad entry d%dv%d on runq %d\n", e->dom, e->vidx, c); abort(); }
            (void)last; n++;
        }
        if (!p->curr->is_idle && p->curr->processor != c) { fprintf(stderr, "invariant: curr of %d has processor %d\n", c, p->curr->processor); abort(); }
        if (p->curr->is_idle == (idle_seen == 1)) { fprintf(stderr, "invariant: idle vCPU of %d neither running nor queued exactly once\n", c); abort(); }
        if (!p->softirq_pending && !p->ctx_pending) {
            int want = n + ((!p->curr->is_idle && p->curr->pause == 0) ? 1 : 0);
            if (p->nr_runnable != want) { fprintf(stderr, "invariant: nr_runnable[%d]=%d, expected %d at t=%lld\n", c, p->nr_runnable, want, (long long)S.now); abort(); }
        }
    }
    for (int i = 0; i < S.nvcpu; i++) {
        vcpu_t *v = S.vcpus[i];
        int inflight = 0;
        for (int c = 0; c < S.ncpu; c++) if (PC(c)->ctx_prev == v || (PC(c)->softirq_pending && PC(c)->curr == v)) inflight = 1;
        if (v->pause == 0 && !v->is_curr && !v->on_runq && !inflight) { fprintf(stderr, "invariant: runnable d%dv%d is lost at t=%lld\n", v->dom, v->vidx, (long long)S.now); abort(); }
        if (v->g_running && (!v->is_curr || (v->pause && !PC(v->processor)->softirq_pending))) { fprintf(stderr, "invariant: guest d%dv%d executes while not current/runnable at t=%lld\n", v->dom, v->vidx, (long long)S.now); abort(); }
        if (v->credit < -S.credits_per_tslice * 4 || v->credit > S.credits_per_tslice * 4) { fprintf(stderr, "invariant: credit out of range d%dv%d %d\n", v->dom, v->vidx, v->credit); abort(); }
    }
}

/* ---------------- C-level self-test of the runqueue rules (credit1sim --selftest) ---------------- */
static int st_fail;
#define ST_CHECK(cond, msg) do { if (!(cond)) { fprintf(stderr, "selftest FAILED: %s\n", msg); st_fail++; } else fprintf(stderr, "selftest ok: %s\n", msg); } while (0)

static vcpu_t st_v[8];
static void st_reset(int ncpu) {
    for (int c = 0; c < ncpu; c++) {
        pcpu_t *p = PC(c);
        p->rq.rq_next = p->rq.rq_prev = &p->rq;
        static vcpu_t idle[4];
        memset(&idle[c], 0, sizeof idle[c]);
        idle[c].is_idle = 1; idle[c].pri = PRI_IDLE; idle[c].processor = c; idle[c].dom = -1;
        p->idle = &idle[c]; p->curr = &idle[c];
        runq_insert(&idle[c]);
    }
    memset(st_v, 0, sizeof st_v);
    for (int i = 0; i < 8; i++) { st_v[i].id = i; st_v[i].dom = 0; st_v[i].hard = S.online; }
}
static int st_order(int cpu, const int *want, int n) {   /* want: indices into st_v, -1 = idle */
    vcpu_t *e = PC(cpu)->rq.rq_next;
    for (int i = 0; i < n; i++, e = e->rq_next) {
        if (e == &PC(cpu)->rq) return 0;
        if (want[i] < 0 ? !e->is_idle : e != &st_v[want[i]]) return 0;
    }
    return e == &PC(cpu)->rq;
}

int credit_selftest(void) {
    S.ver = 417; S.cachehot_rule = CH_SCHED_TIME;
    S.ncpu = 2; S.online = 3; S.nnode = 1; S.cpus_per_node = 2;
    S.cpu[0].node_mask = S.cpu[1].node_mask = 3;
    vcpu_t *x = &st_v[0], *z = &st_v[1], *v = &st_v[2];
    /* section 10: [x(UNDER), z(OVER), idle] + UNDER yielder v -> [x, z, v, idle] */
    st_reset(2);
    x->pri = PRI_UNDER; z->pri = PRI_OVER; v->pri = PRI_UNDER; v->flags = F_YIELD;
    runq_insert(x); runq_insert(z); runq_insert(v);
    ST_CHECK(st_order(0, (int[]){ 0, 1, 2, -1 }, 4), "yield: [x(U), z(O), idle] + yielder v(U) -> [x, z, v, idle]");
    st_reset(2);
    z = &st_v[1]; v = &st_v[2]; z->pri = PRI_OVER; v->pri = PRI_UNDER; v->flags = F_YIELD;
    runq_insert(z); runq_insert(v);
    ST_CHECK(st_order(0, (int[]){ 1, 2, -1 }, 3), "yield: [z(O), idle] + yielder v(U) -> [z, v, idle] (OVER ahead of UNDER yielder)");
    st_reset(2);
    v = &st_v[2]; v->pri = PRI_UNDER; v->flags = F_YIELD; runq_insert(v);
    ST_CHECK(st_order(0, (int[]){ 2, -1 }, 2), "yield: never past the idle vCPU ([idle] + v -> [v, idle])");
    st_reset(2);
    x = &st_v[0]; v = &st_v[2]; x->pri = PRI_UNDER; v->pri = PRI_UNDER; v->flags = 0;
    runq_insert(x); runq_insert(v);
    ST_CHECK(st_order(0, (int[]){ 0, 2, -1 }, 3), "no-op yield / plain insert: after all entries of equal priority");
    /* FIFO within a priority; BOOST ahead */
    st_reset(2);
    st_v[0].pri = PRI_UNDER; st_v[1].pri = PRI_UNDER; st_v[2].pri = PRI_BOOST; st_v[3].pri = PRI_OVER; st_v[4].pri = PRI_BOOST;
    for (int i = 0; i < 5; i++) runq_insert(&st_v[i]);
    ST_CHECK(st_order(0, (int[]){ 2, 4, 0, 1, 3, -1 }, 6), "FIFO within a priority: [B2, B4, U0, U1, O3, idle]");
    /* runq_sort: stable, UNDER/BOOST ahead of OVER, relative order kept */
    st_reset(2);
    st_v[0].pri = PRI_OVER; st_v[1].pri = PRI_UNDER; st_v[2].pri = PRI_OVER; st_v[3].pri = PRI_BOOST;
    for (int i = 0; i < 4; i++) { int save = st_v[i].pri; st_v[i].pri = PRI_OVER; runq_insert(&st_v[i]); st_v[i].pri = save; }
    S.runq_sort = 1; PC(0)->runq_sort_last = 0; runq_sort(0);
    ST_CHECK(st_order(0, (int[]){ 1, 3, 0, 2, -1 }, 5), "runq_sort: [O0, U1, O2, B3] -> [U1, B3, O0, O2, idle]");
    /* burn_credits: 250 us -> 2 credits, carry kept; +50 us -> 3 credits in all */
    vcpu_t b; memset(&b, 0, sizeof b); b.start_time = 0; b.credit = 0;
    burn_credits(&b, 250000);
    ST_CHECK(b.credit == -2 && b.start_time == 200000, "burn_credits: 250 us = 2 credits, start_time keeps the 50 us carry");
    burn_credits(&b, 300000);
    ST_CHECK(b.credit == -3, "burn_credits: +50 us completes the 3rd credit");
    /* stealing: only strictly higher priority; cache-hot rule */
    st_reset(2);
    vcpu_t *runner = &st_v[5]; runner->pri = PRI_UNDER; runner->is_curr = 1; runner->is_running = 1; runner->processor = 1;
    PC(1)->curr = runner;
    vcpu_t *u = &st_v[0]; u->pri = PRI_UNDER; u->processor = 1; runq_insert(u);
    S.now = 10 * MS; u->last_sched_time = 0; S.migr_delay = 0;
    ST_CHECK(runq_steal(1, 0, PRI_UNDER, 0) == NULL, "steal: an UNDER pCPU does not steal UNDER work");
    ST_CHECK(runq_steal(1, 0, PRI_OVER, 0) == u, "steal: an OVER pCPU steals UNDER work");
    u->processor = 1; runq_insert(u);
    S.migr_delay = 1 * MS; u->last_sched_time = S.now - 500 * US;
    ST_CHECK(runq_steal(1, 0, PRI_IDLE, 0) == NULL, "cache-hot: descheduled 0.5 ms ago, delay 1 ms -> not stolen");
    u->last_sched_time = S.now - 2 * MS;
    ST_CHECK(runq_steal(1, 0, PRI_IDLE, 0) == u, "cache-hot: descheduled 2 ms ago, delay 1 ms -> stolen");
    /* cachehot_rule (spec section 17): descheduled 5 ms ago but woken 0.5 ms ago -> hot only for state_entry */
    u->processor = 1; runq_insert(u);
    u->last_sched_time = u->last_run_time = S.now - 5 * MS; u->state_entry_time = S.now - 500 * US;
    S.cachehot_rule = CH_STATE_ENTRY;
    ST_CHECK(runq_steal(1, 0, PRI_IDLE, 0) == NULL, "cache-hot state_entry: woken 0.5 ms ago -> not stolen");
    S.cachehot_rule = CH_RUN_TIME;
    ST_CHECK(runq_steal(1, 0, PRI_IDLE, 0) == u, "cache-hot run_time: switched out 5 ms ago -> stolen");
    S.cachehot_rule = CH_SCHED_TIME;
    /* 4.0 burn_credits: nearest credit, no residual: 250 us -> 3 credits, start_time 50 us ahead */
    S.ver = 400; memset(&b, 0, sizeof b); burn_credits(&b, 250000);
    ST_CHECK(b.credit == -3 && b.start_time == 300000 && b.residual == 0, "burn_credits 4.0: 250 us = 3 credits (rounded), start_time 300 us");
    S.ver = 417;
    PC(1)->curr = PC(1)->idle;
    u->processor = 1; runq_insert(u); u->last_sched_time = 0;
    ST_CHECK(runq_steal(1, 0, PRI_IDLE, 0) == NULL, "steal: never from a pCPU whose current vCPU is idle");
    return st_fail;
}
