/* guest.c: guest workload models (not Xen code).  A vCPU executes a small state machine: compute
 * quanta, critical sections under a spinlock (test-and-set, ticket, PV ticket, spin-then-yield),
 * blocking I/O, network receive/request-response, and pure CPU loops.  Spinning is a state with a start
 * time, never an event per iteration.  Guest progress is measured in ns of work at full speed; a vCPU runs
 * slower on a remote NUMA node (factor) and pays a cache-refill stall after being switched in cold. */
#include "sim.h"
#include <stdlib.h>
#include <string.h>

static inline dom_t *D(const vcpu_t *v) { return &S.doms[v->dom]; }
static inline int computing(int g) { return g == G_COMPUTE || g == G_HOLD || g == G_NETPROC || g == G_NBPROC || g == G_NETTXC; }

static void lock_take(vcpu_t *v, lock_t *L);
static void start_compute(vcpu_t *v);
static void after_compute(vcpu_t *v);
static void finish_op(vcpu_t *v);

/* guest-level trace records (GUEST_*): cpu = the vCPU's pCPU, a = lock id, b = event specific */
static inline void gtrace(const char *ev, const vcpu_t *v, long a, long b) { if (S.trace) trace(ev, v->processor, v, a, b); }

/* time to finish the current computing segment when running */
static void arm(vcpu_t *v) {
    v->g_gen++;
    if (computing(v->g)) {
        double w = (double)v->g_rem * v->g_factor;
        ns_t t = v->g_run_start + v->g_stall + (ns_t)(w + 0.999);
        ev_push(t, EV_GUEST, v->id, v->g_gen, 0);
    } else if (v->g == G_SPIN) {
        dom_t *d = D(v);
        if (d->lock_type == LK_PVTICKET || d->lock_type == LK_SPINYIELD || d->lock_type == LK_QYIELD) {
            ns_t left = d->spin_thresh - v->spun_round; if (left < 0) left = 0;
            ev_push(v->g_run_start + left, EV_GUEST, v->id, v->g_gen, 0);
        }
    }
}

/* slowdown of the guest on its current pCPU: remote NUMA memory, and a busy SMT sibling thread */
double guest_factor(const vcpu_t *v) {
    const dom_t *d = D(v);
    const pcpu_t *p = &S.cpu[v->processor];
    double f = 1.0;
    if (d->mem_frac > 0 && p->node != d->home_node) f = 1.0 + d->mem_frac * (S.remote_ratio - 1.0);
    if (S.smt_speed < 1.0) {
        for (cpumask_t m = p->smt_sib & ~bit(v->processor); m; m &= m - 1)
            if (!S.cpu[__builtin_ctzll(m)].curr->is_idle) { f /= S.smt_speed; break; }
    }
    return f;
}

/* a pCPU went busy<->idle: its SMT siblings' guests change speed (re-arm them at the new rate) */
void smt_changed(int cpu) {
    if (S.smt_speed >= 1.0) return;
    for (cpumask_t m = S.cpu[cpu].smt_sib & ~bit(cpu); m; m &= m - 1) {
        vcpu_t *v = S.cpu[__builtin_ctzll(m)].curr;
        if (v->is_idle || !v->g_running) continue;
        guest_pause(v, S.now);
        v->g_factor = guest_factor(v);
        guest_resume(v, S.now, 0);
    }
}

/* stop executing the guest at `now` (descheduled, blocked, or a state change), accounting progress */
void guest_pause(vcpu_t *v, ns_t now) {
    if (!v->g_running) return;
    ns_t el = now - v->g_run_start;
    if (el < 0) el = 0;
    if (computing(v->g)) {
        ns_t st = el < v->g_stall ? el : v->g_stall;
        v->g_stall -= st; v->stall_ns += st; el -= st;
        ns_t done = (ns_t)((double)el / v->g_factor);
        if (done > v->g_rem) done = v->g_rem;
        v->g_rem -= done;
        v->useful_ns += done; D(v)->useful_ns += done;
        if (v->g == G_HOLD) v->hold_ns += el;
    } else if (v->g == G_SPIN) {
        v->spun_round += el; v->spin_ns += el; D(v)->spin_ns += el; S.spin_ns += el;
    }
    v->g_running = 0; v->g_gen++;
}

/* the guest starts (or restarts) executing at t0; switched_in: first run after a context switch */
void guest_resume(vcpu_t *v, ns_t t0, int switched_in) {
    dom_t *d = D(v);
    if (switched_in) {
        int cpu = v->processor;
        pcpu_t *p = &S.cpu[cpu];
        v->g_factor = guest_factor(v);
        ns_t pen = 0;
        if (v->last_cpu >= 0 && (S.refill_cross || S.refill_socket)) {
            if (v->last_cpu == cpu) {
                if (S.evict_ns > 0) {
                    ns_t foreign = p->busy_ns - v->last_cpu_busy;
                    pen = foreign >= S.evict_ns ? S.refill_cross : (ns_t)((double)S.refill_cross * foreign / S.evict_ns);
                }
            } else if (S.cpu[v->last_cpu].socket == p->socket) pen = S.refill_socket;
            else pen = S.refill_cross;
        }
        v->g_stall += pen;
    }
    v->g_running = 1; v->g_run_start = t0;
    switch (v->g) {
    case G_SPIN: {
        lock_t *L = &d->locks[v->lock_id];
        if (LK_FIFO(L->type)) { if (L->holder == v) { guest_pause(v, t0); lock_take(v, L); return; } }
        else if (!L->holder) {
            for (int i = 0; i < L->qlen; i++) if (L->q[i] == v) { L->q[i] = L->q[--L->qlen]; break; }
            guest_pause(v, t0); lock_take(v, L); return;
        }
        arm(v); return;
    }
    case G_POLL: {   /* woken from SCHEDOP_poll: the lock was handed to us, or a spurious wake: spin again */
        lock_t *L = &d->locks[v->lock_id];
        v->g = G_SPIN; v->spun_round = 0;
        if (L->holder == v) { guest_pause(v, t0); lock_take(v, L); return; }
        gtrace("GUEST_LOCK_SPIN", v, v->lock_id, 1);   /* spurious wake from poll: spin again */
        arm(v); return;
    }
    case G_IOWAIT: case G_NETWAIT: case G_NBWAIT: case G_IDLE: case G_DONE:
        /* running but nothing to do (woken before descheduled, then the wait was re-entered): block */
        v->g_running = 0; vcpu_block(v); return;
    default:
        arm(v); return;
    }
}

void guest_after_schedule(vcpu_t *v, int cpu, int continued) {
    (void)cpu; (void)continued;
    if (v->is_idle || v->g_running || S.cpu[v->processor].ctx_pending) return;
    guest_resume(v, S.now, 0);
}

/* ---------------- spinlocks ---------------- */
static void lock_take(vcpu_t *v, lock_t *L) {
    dom_t *d = D(v);
    L->holder = v;
    ns_t w = S.now - v->spin_req_t;
    gtrace("GUEST_LOCK_ACQUIRED", v, v->lock_id, (long)w);
    hist_add(&d->wait_h, w);
    if (S.nwaits == S.capwaits) { S.capwaits = S.capwaits ? 2 * S.capwaits : 65536; S.waits = realloc(S.waits, S.capwaits * sizeof *S.waits); if (!S.waits) exit(3); }
    S.waits[S.nwaits++] = w;
    v->g = G_HOLD; v->g_rem = dist_draw(&d->hold, &v->rng);
    if (v->is_curr && !S.cpu[v->processor].ctx_pending && v->pause == 0) { v->g_running = 1; v->g_run_start = S.now; arm(v); }
}

static void lock_request(vcpu_t *v) {
    dom_t *d = D(v);
    int li = d->nlocks > 1 ? (int)(rng_next(&v->rng) % (uint64_t)d->nlocks) : 0;
    lock_t *L = &d->locks[li];
    v->lock_id = li; v->spin_req_t = S.now; v->spun_round = 0;
    int fifo = LK_FIFO(L->type);
    gtrace("GUEST_LOCK_ACQUIRE", v, li, L->holder ? L->holder->vidx : -1);
    if (!L->holder && (!fifo || L->qlen == 0)) { lock_take(v, L); return; }
    if (fifo) {
        if (L->qlen == L->qcap) {   /* grow ring, unrolled to linear order */
            int nc = L->qcap ? L->qcap * 2 : 8; vcpu_t **nq = malloc(nc * sizeof *nq);
            for (int i = 0; i < L->qlen; i++) nq[i] = L->q[(L->qhead + i) % L->qcap];
            free(L->q); L->q = nq; L->qcap = nc; L->qhead = 0;
        }
        L->q[(L->qhead + L->qlen) % L->qcap] = v; L->qlen++;
    } else {
        if (L->qlen == L->qcap) { L->qcap = L->qcap ? L->qcap * 2 : 8; L->q = realloc(L->q, L->qcap * sizeof *L->q); }
        L->q[L->qlen++] = v;
    }
    v->g = G_SPIN;
    gtrace("GUEST_LOCK_SPIN", v, li, 0);
    v->g_running = 1; v->g_run_start = S.now; arm(v);
}

static inline int spinning_now(const vcpu_t *w) { return w->g_running && w->g == G_SPIN; }

static void lock_release(vcpu_t *v) {
    dom_t *d = D(v);
    lock_t *L = &d->locks[v->lock_id];
    L->holder = NULL;
    if (!L->qlen) { gtrace("GUEST_LOCK_RELEASE", v, v->lock_id, -1); return; }
    if (LK_FIFO(L->type)) {
        /* ticket hand-over: strictly FIFO to the next ticket, running or not */
        vcpu_t *w = L->q[L->qhead]; L->qhead = (L->qhead + 1) % L->qcap; L->qlen--;
        L->holder = w;
        gtrace("GUEST_LOCK_RELEASE", v, v->lock_id, w->vidx);
        if (spinning_now(w)) { guest_pause(w, S.now); lock_take(w, L); }
        else if (w->g == G_POLL && (w->pause & VPF_BLOCKED)) {
            /* PV unlock: xen_unlock_kick -> EVTCHNOP_send -> evtchn_check_pollers -> vcpu_unblock */
            w->n_kicks++;
            trace("GUEST_LOCK_KICK", v->processor, w, v->lock_id, v->vidx);
            int save = S.this_cpu; S.this_cpu = v->processor;
            vcpu_unblock(w);
            S.this_cpu = save;
        }
        /* else: the next waiter is preempted (spinning, not running): the lock waits for it */
    } else {
        /* test-and-set: one of the waiters spinning on a pCPU right now wins (uniformly at random) */
        int n = 0, pick = -1;
        for (int i = 0; i < L->qlen; i++) if (spinning_now(L->q[i])) n++;
        if (!n) { gtrace("GUEST_LOCK_RELEASE", v, v->lock_id, -1); return; }   /* lock stays free: the first waiter to run again takes it */
        int k = (int)(rng_next(&v->rng) % (uint64_t)n);
        for (int i = 0; i < L->qlen; i++) if (spinning_now(L->q[i]) && k-- == 0) { pick = i; break; }
        vcpu_t *w = L->q[pick]; L->q[pick] = L->q[--L->qlen];
        gtrace("GUEST_LOCK_RELEASE", v, v->lock_id, w->vidx);
        guest_pause(w, S.now); lock_take(w, L);
    }
}

/* ---------------- program steps ---------------- */
static void job_done_check(dom_t *d) {
    if (d->done) return;
    d->job_running--;
    if (d->job_running == 0) {
        d->done = 1; d->done_t = S.now; S.ndone_jobs++;
        if (S.stop_when_done && S.ndone_jobs == S.njobs) ev_push(S.now, EV_END, 0, 0, 0);
    }
}

static void start_compute(vcpu_t *v) {
    dom_t *d = D(v);
    if (d->wkind == W_CPU) { v->g = G_COMPUTE; v->g_rem = 3600 * SEC; }
    else {
        ns_t q = dist_draw(&d->compute, &v->rng);
        if (d->job_work > 0) {
            if (d->job_left <= 0) {
                v->g = G_DONE;
                vcpu_block(v);
                job_done_check(d);
                return;
            }
            if (q > d->job_left) q = d->job_left;
            d->job_left -= q;
        }
        v->g = G_COMPUTE; v->g_rem = q;
    }
    v->g_running = 1; v->g_run_start = S.now; arm(v);
}

static void finish_op(vcpu_t *v) {
    dom_t *d = D(v);
    v->ops++; d->ops++;
    if (d->p_io > 0 && rng_unif(&v->rng) < d->p_io) {
        v->g = G_IOWAIT;
        v->w_gen++;
        ev_push(S.now + dist_draw(&d->iolat, &v->rng), EV_WAKE, v->id, v->w_gen, 0);
        vcpu_block(v);
        return;
    }
    start_compute(v);
}

static void after_compute(vcpu_t *v) {
    dom_t *d = D(v);
    if (d->lock_type != LK_NONE && d->p_lock > 0 && (d->p_lock >= 1 || rng_unif(&v->rng) < d->p_lock)) { lock_request(v); return; }
    finish_op(v);
}

static void net_ack_and_next(vcpu_t *v);
static void net_txc_done(vcpu_t *v);
static void netback_done(vcpu_t *v);

/* EV_GUEST: the running guest reached the end of its current segment */
void guest_event(vcpu_t *v) {
    dom_t *d = D(v);
    guest_pause(v, S.now);
    switch (v->g) {
    case G_COMPUTE:
        if (d->wkind == W_CPU) { start_compute(v); return; }
        if (d->wkind == W_IDLE) { v->g = G_IDLE; vcpu_block(v); return; }   /* tick handled: idle again */
        after_compute(v); return;
    case G_HOLD:
        lock_release(v);
        finish_op(v); return;
    case G_SPIN:
        if (d->lock_type == LK_PVTICKET) {
            /* xen_lock_spinning: after SPIN_THRESHOLD, re-check then SCHEDOP_poll on the lock's event channel */
            lock_t *L = &d->locks[v->lock_id];
            if (L->holder == v) { lock_take(v, L); return; }
            v->g = G_POLL; v->n_polls++;
            gtrace("GUEST_LOCK_POLL", v, v->lock_id, L->holder ? L->holder->vidx : -1);
            vcpu_block(v);
            return;
        }
        /* spin-then-yield (S0 guest patch), on a test-and-set or a queued (FIFO) lock: SCHEDOP_yield, then keep spinning */
        v->spun_round = 0;
        v->g_running = 1; v->g_run_start = S.now; arm(v);
        gtrace("GUEST_YIELD", v, v->lock_id, d->locks[v->lock_id].holder ? d->locks[v->lock_id].holder->vidx : -1);
        vcpu_yield(v);
        return;
    case G_NETPROC:
        net_ack_and_next(v); return;
    case G_NETTXC:
        net_txc_done(v); return;
    case G_NBPROC:
        netback_done(v); return;
    default:
        return;
    }
}

/* A timer interrupt of an idle guest (spec section 17, idle_tick_ms): the vCPU's virtual timer -- a Xen timer
 * on the vCPU's pCPU (HVM vpt, PV singleshot/periodic timer) -- fires and vcpu_unblock() wakes the blocked vCPU
 * (BOOST if UNDER, tickling as for any wake, from the vCPU's own pCPU); the guest runs its tick handler for
 * idle_tick_work and blocks again (HLT / SCHEDOP_block).  Periodic at nominal multiples of the period, each
 * firing up to timer_slop late (drawn from the vCPU's own stream); a tick that finds the previous one not yet
 * handled is merged into it. */
static void idle_tick(vcpu_t *v) {
    dom_t *d = D(v);
    v->tick_due += d->idle_tick;
    ns_t late = S.timer_slop ? (ns_t)(rng_next(&v->rng) % (uint64_t)(S.timer_slop + 1)) : 0;
    v->w_gen++;
    ev_push(v->tick_due + late, EV_WAKE, v->id, v->w_gen, 0);
    if (v->g != G_IDLE) return;
    v->g = G_COMPUTE; v->g_rem = d->idle_tick_work;
    S.this_cpu = v->processor;
    vcpu_unblock(v);
}

/* EV_WAKE: a device (disk) completion or an initial start for vCPU v (or an idle guest's timer tick) */
void guest_wake_event(vcpu_t *v) {
    dom_t *d = D(v);
    if (d->wkind == W_IDLE) { idle_tick(v); return; }
    if (v->g == G_IOWAIT) {
        /* prepare the next quantum; the guest runs it when scheduled */
        if (d->job_work > 0 && d->job_left <= 0) {
            v->g = G_DONE; job_done_check(d);   /* stays blocked for ever */
            return;
        }
        ns_t q = d->wkind == W_CPU ? 3600 * SEC : dist_draw(&d->compute, &v->rng);
        if (d->job_work > 0) { if (q > d->job_left) q = d->job_left; d->job_left -= q; }
        v->g = G_COMPUTE; v->g_rem = q;
    }
    vcpu_unblock(v);
}

/* ---------------- network (netperf-like) ---------------- */
enum { NET_ARRIVE, NET_ACK, NET_RESP };

static inline rng_t *NR(dom_t *d) { return &S.vcpus[d->first]->rng; }

static void send_more(dom_t *d) {
    int di = (int)(d - S.doms);
    while (d->inflight + d->seg_bytes <= d->window) {
        ns_t tx = (S.now > d->link_free ? S.now : d->link_free) + d->seg_wire;
        d->link_free = tx;
        ev_push(tx + dist_draw(&d->one_way, NR(d)), EV_NET, di, 0, NET_ARRIVE);
        d->inflight += d->seg_bytes;
    }
}

/* the packet is in the guest's receive ring: netfront's event channel wakes the vCPU (from `cpu`: irq_cpu, or the
 * pCPU of dom0's netback vCPU when one is modelled) */
static void net_deliver(dom_t *d, int cpu) {
    vcpu_t *v = S.vcpus[d->first];
    d->rxq++;
    if (v->g == G_NETWAIT) {
        v->g = G_NETPROC; v->g_rem = dist_draw(&d->proc, &v->rng);
        S.this_cpu = cpu;
        vcpu_unblock(v);   /* event channel notification from netback */
    }
}

/* ---- dom0's netback (spec section 17.6; off unless a domain has kind netback) ----
 * Models the dom0 side of xen-netback (Linux 3.x/4.x drivers/net/xen-netback): a packet for a guest is handled by
 * dom0's NIC driver, bridge and xenvif_start_xmit()/the vif's rx kthread (xenvif_rx_action: grant copy into the
 * guest's ring, then notify), a packet from the guest by the tx path (xenvif_tx_action: grant copy out of the
 * guest, bridge, NIC driver).  Each is one FIFO work item costing the netback vCPU rx_us + rx_per_kb_us per KB
 * (in) or tx_us (out) of CPU time; the vCPU blocks when the queue is empty and is woken (vcpu_unblock, so BOOST
 * if UNDER) by the NIC interrupt on irq_cpu (in) or by the guest's event channel from the guest's pCPU (out). */
enum { NB_RX, NB_TX_ACK, NB_TX_RESP };

static ns_t nb_cost(dom_t *nb, vcpu_t *w, int kind, int bytes) {
    if (kind == NB_RX) return dist_draw(&nb->nb_rx, &w->rng) + (ns_t)(nb->nb_rx_per_kb * (double)bytes / 1024.0 * 1000.0 + 0.5);
    return dist_draw(&nb->nb_tx, &w->rng);
}

/* a packet reaches dom0's netback (from `cpu`): queue it; wake the netback vCPU if it waits for work */
static void netback_enqueue(int di, int kind, int cpu) {
    dom_t *nb = &S.doms[S.netback];
    vcpu_t *w = S.vcpus[nb->first];
    if (nb->nbq_len == nb->nbq_cap) {   /* grow ring, unrolled to linear order */
        int nc = nb->nbq_cap ? nb->nbq_cap * 2 : 16;
        struct nbitem *q = malloc(nc * sizeof *q);
        if (!q) exit(3);
        for (int i = 0; i < nb->nbq_len; i++) q[i] = nb->nbq[(nb->nbq_head + i) % nb->nbq_cap];
        free(nb->nbq); nb->nbq = q; nb->nbq_cap = nc; nb->nbq_head = 0;
    }
    struct nbitem *it = &nb->nbq[(nb->nbq_head + nb->nbq_len) % nb->nbq_cap];
    it->dom = di; it->kind = kind; it->cost = nb_cost(nb, w, kind, kind == NB_RX ? S.doms[di].seg_bytes : 0);
    nb->nbq_len++;
    if (w->g == G_NBWAIT) {
        w->g = G_NBPROC; w->g_rem = it->cost;
        S.this_cpu = cpu;
        vcpu_unblock(w);   /* physical IRQ -> dom0 event channel (in) / guest's notify -> dom0 (out) */
    }
}

/* netback has sent a guest's packet out (xenvif_tx_action): it puts the TX response on the ring and notifies the
 * frontend (make_tx_response, notify_remote_via_irq; netfront asks for that event whenever it has consumed every
 * response, RING_FINAL_CHECK_FOR_RESPONSES).  With tx_notify_us, a guest blocked for want of packets is woken by it
 * (vcpu_unblock from dom0's pCPU, BOOST if UNDER), runs netfront's TX completion (xennet_tx_buf_gc) for tx_notify_us
 * and blocks again; a guest running or runnable finds the response when it next looks, and is not woken. */
static void net_tx_complete(dom_t *d, int cpu) {
    vcpu_t *v = S.vcpus[d->first];
    if (!d->tx_notify || v->g != G_NETWAIT) return;
    v->g = G_NETTXC; v->g_rem = dist_draw(&d->txc, &v->rng);
    S.this_cpu = cpu;
    vcpu_unblock(v);
}

static void net_txc_done(vcpu_t *v) {
    dom_t *d = D(v);
    if (d->rxq > 0) { v->g = G_NETPROC; v->g_rem = dist_draw(&d->proc, &v->rng); v->g_running = 1; v->g_run_start = S.now; arm(v); }
    else { v->g = G_NETWAIT; vcpu_block(v); }
}

/* the netback vCPU finished its head item: pass the packet on, then the next item or block */
static void netback_done(vcpu_t *w) {
    dom_t *nb = D(w);
    struct nbitem it = nb->nbq[nb->nbq_head];
    nb->nbq_head = (nb->nbq_head + 1) % nb->nbq_cap; nb->nbq_len--;
    nb->ops++;
    dom_t *d = &S.doms[it.dom];
    if (it.kind == NB_RX) net_deliver(d, w->processor);
    else {
        ev_push(S.now + dist_draw(&d->one_way, &S.vcpus[d->first]->rng), EV_NET, it.dom, 0, it.kind == NB_TX_ACK ? NET_ACK : NET_RESP);
        net_tx_complete(d, w->processor);
    }
    if (nb->nbq_len > 0) { w->g = G_NBPROC; w->g_rem = nb->nbq[nb->nbq_head].cost; w->g_running = 1; w->g_run_start = S.now; arm(w); }
    else { w->g = G_NBWAIT; vcpu_block(w); }
}

static void net_ack_and_next(vcpu_t *v) {
    dom_t *d = D(v);
    int di = v->dom;
    d->rxq--;
    if (d->wkind == W_NET_STREAM) { d->rx_bytes += d->seg_bytes; d->ops++; }
    if (S.netback >= 0)   /* the ACK / response goes out through dom0's netback first (spec section 17.6) */
        netback_enqueue(di, d->wkind == W_NET_STREAM ? NB_TX_ACK : NB_TX_RESP, v->processor);
    else
        ev_push(S.now + dist_draw(&d->one_way, &v->rng), EV_NET, di, 0, d->wkind == W_NET_STREAM ? NET_ACK : NET_RESP);
    if (d->rxq > 0) { v->g = G_NETPROC; v->g_rem = dist_draw(&d->proc, &v->rng); v->g_running = 1; v->g_run_start = S.now; arm(v); }
    else { v->g = G_NETWAIT; vcpu_block(v); }
}

void net_event(int di, int kind) {
    dom_t *d = &S.doms[di];
    S.this_cpu = d->irq_cpu;
    switch (kind) {
    case NET_ARRIVE:   /* the packet reached the host's NIC (irq_cpu) */
        if (S.netback >= 0) netback_enqueue(di, NB_RX, d->irq_cpu);
        else net_deliver(d, d->irq_cpu);
        break;
    case NET_ACK: d->inflight -= d->seg_bytes; send_more(d); break;
    case NET_RESP: {
        ns_t lat = S.now - d->rr_sent;
        hist_add(&d->lat_h, lat); d->rr_done++; d->ops++;
        d->rr_sent = S.now + dist_draw(&d->rr_client, NR(d));
        ev_push(d->rr_sent + dist_draw(&d->one_way, NR(d)), EV_NET, di, 0, NET_ARRIVE);
        break;
    }
    }
}

/* initial guest states; every non-idle vCPU starts blocked and is woken (domain unpause) near t=0 */
void guest_init(void) {
    for (int i = 0; i < S.nvcpu; i++) {
        vcpu_t *v = S.vcpus[i];
        dom_t *d = D(v);
        v->pause = VPF_BLOCKED; v->runstate = RS_BLOCKED; v->g_factor = 1.0;
        switch (d->wkind) {
        case W_IDLE:
            v->g = G_IDLE;
            if (d->idle_tick > 0 && v->vidx < d->idle_tick_vcpus) {   /* first timer interrupt at a random phase */
                v->tick_due = (ns_t)(rng_unif(&v->rng) * (double)d->idle_tick);
                v->w_gen++;
                ev_push(v->tick_due, EV_WAKE, v->id, v->w_gen, 0);
            }
            break;
        case W_NET_STREAM: case W_NET_RR: v->g = G_NETWAIT; break;
        case W_NETBACK: v->g = G_NBWAIT; break;
        default: {
            v->g = G_IOWAIT;   /* the start is modelled as an I/O completion: draws the first quantum */
            v->w_gen++;
            ev_push((ns_t)i * 1000, EV_WAKE, v->id, v->w_gen, 0);
        }
        }
    }
    for (int di = 0; di < S.ndom; di++) {
        dom_t *d = &S.doms[di];
        if (d->job_work > 0) { d->job_running = d->nv; d->job_left = d->job_work; S.njobs++; }
        if (d->wkind == W_NET_STREAM) { ns_t save = S.now; S.now = 0; send_more(d); S.now = save; }
        if (d->wkind == W_NET_RR) { d->rr_sent = 0; ev_push(dist_draw(&d->one_way, NR(d)), EV_NET, di, 0, NET_ARRIVE); }
    }
}

void guest_reset_counters(void) {
    for (int di = 0; di < S.ndom; di++) {
        dom_t *d = &S.doms[di];
        d->ops = 0; d->rx_bytes = 0; d->rr_done = 0; d->n_boost = d->n_boost_migr = 0;
        d->spin_ns = d->useful_ns = d->runnable_ns = 0;
        memset(&d->wait_h, 0, sizeof d->wait_h); memset(&d->lat_h, 0, sizeof d->lat_h);
    }
}
