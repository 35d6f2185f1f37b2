"""S1's workload: a network stream and request/response pair into VM-I/O, with and
without a CPU-bound VM-CPU on the same pCPU (seed 001: netperf TCP_STREAM and TCP_RR
from another machine; here iperf3 and sockperf from dom0, pinned to another pCPU).

Guests (guest/guest-init.sh): role=io runs the iperf3 and sockperf servers, role=cpu
one busy loop per vCPU. Both have 1 vCPU and are pinned to `guest_pcpu`; dom0 (netback
and the clients) is pinned to `dom0_pcpu`. "alone" pauses VM-CPU (`xl pause`), so the
two modes share a boot and guests; "corun" unpauses it.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from typing import Any

from schedlab.core.testbed import RunFailed, RunResult

from ..config import ConfigError
from ..host import Host
from .scenario import netback_domain, sub_seed, xen_options
from .xentrace import SCHED_ALL_MASK, Trace, guest_span, traced_events
from .xl import Domains, guest_cfg

# the study files' workload.kind this module runs (workloads.KINDS); its errors name it
KIND = "netperf-pair"

DEFAULTS: dict[str, Any] = {
    "guest_memory_mb": 256,
    "guest_timeout_s": 180,  # xl create -> guest servers reachable
    "run_timeout_s": 300,  # one measurement command
    "duration_s": 10,  # each of: throughput run, latency run
    "weights": {"io": 256, "cpu": 256},
    "guest_pcpu": 0,  # VM-I/O and VM-CPU pinned here
    "dom0_pcpu": 1,  # dom0 (netback + the client) pinned here
    "fresh_guests": False,  # True: xl create/destroy the guests in every run; False: create
    # once per boot, "alone" = the CPU guest paused (`xl pause`)
    # The stream's socket buffer (iperf3 -w, e.g. "8K"; Linux doubles it and the window is
    # part of that). None: autotuning. A wait of one slice cuts a stream's throughput only
    # where the data of that wait exceeds the window; under TCG the stream is ~40x slower
    # than 1 GbE, so the window has to shrink with it to keep the seed's regime.
    "stream_window": None,
}
IO_IP, CPU_IP = "10.10.0.2", "10.10.0.3"
IPERF_PORT, SOCKPERF_PORT = 5201, 11111
GUESTS = {"io": (IO_IP, "00:16:3e:5c:00:02"), "cpu": (CPU_IP, "00:16:3e:5c:00:03")}


def config_text(role: str, opts: dict) -> str:
    ip, mac = GUESTS[role]
    return guest_cfg(
        role,
        extra=f"console=hvc0 quiet schedlab.role={role} schedlab.ip={ip}",
        memory_mb=opts["guest_memory_mb"],
        vcpus=1,
        cpus=str(int(opts["guest_pcpu"])),
        weight=opts["weights"][role],
        vif=f"bridge=xenbr0,mac={mac}",
    )


def _ensure(doms: Domains, role: str, opts: dict, counters: dict) -> None:
    secs = doms.ensure(role, config_text(role, opts), opts["guest_timeout_s"])
    counters[f"{role}_start_seconds"] = round(secs, 1)
    if role == "io" and secs:
        t = int(opts["guest_timeout_s"])
        doms.host.run(
            [
                "timeout",
                str(t),
                "bash",
                "-c",
                'until (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && (exec 3<>"/dev/tcp/$1/$3") 2>/dev/null;'
                " do sleep 0.5; done",
                "_",
                IO_IP,
                str(IPERF_PORT),
                str(SOCKPERF_PORT),
            ],
            timeout=t + 30,
        )


def run(h: Host, doms: Domains, opts: dict, point: dict, seed: int, booted: dict) -> RunResult:
    mode = point.get("mode", "alone")
    if mode not in ("alone", "corun"):
        raise RunFailed(f"{KIND}: unknown mode {mode!r}")
    dur = int(opts["duration_s"])
    counters: dict[str, Any] = {"seed": seed, "xen_scheduler": booted.get("xen_scheduler")}
    doms.destroy_all(keep=() if opts["fresh_guests"] else ("io", "cpu"))
    h.run(["xl", "vcpu-pin", "Domain-0", "all", str(opts["dom0_pcpu"])], timeout=60)
    _ensure(doms, "io", opts, counters)
    if mode == "corun":
        _ensure(doms, "cpu", opts, counters)
    elif "cpu" in doms.list():
        doms.pause("cpu")
    state = doms.list()
    counters["domains"] = state
    if mode == "alone" and "cpu" in state and "p" not in state["cpu"]:
        raise RunFailed(f"{KIND} alone: the CPU guest is not paused ({state['cpu']})")
    sched = h.run(["xl", "sched-credit"], timeout=60).stdout
    counters["sched_credit"] = sched.strip()
    counters["vcpu_list"] = h.run(["xl", "vcpu-list"], timeout=60).stdout.strip()
    for role in ("io", "cpu") if mode == "corun" else ("io",):
        m = re.search(rf"^{role}\s+\d+\s+(\d+)", sched, re.M)
        if not m or int(m.group(1)) != int(opts["weights"][role]):
            raise RunFailed(f"{KIND}: weight of {role} is {m.group(1) if m else '?'}, wanted {opts['weights'][role]}")

    trace = Trace(h, pages=int(opts["trace_pages"]), mask=SCHED_ALL_MASK) if opts["sched_trace"] else None
    with trace if trace is not None else contextlib.nullcontext(), guest_span(h, counters):
        t_cpu0, w0, tpj, lat, t_cpu1, t_mid = _measure(h, doms, opts, dur)
    if trace is not None:
        counters["sched_events"] = traced_events(trace, doms, ["io", "cpu"], KIND, opts)
    recv = tpj["end"]["sum_received"]["bits_per_second"] / 1e6
    lat_us, pct = parse_sockperf(lat.stdout + lat.stderr)
    # host wall time around cpu_seconds; a CPU share divides by trace_window_guest_s (dom0's
    # clock: guest time under icount), never by this
    counters["window_seconds"] = round(time.monotonic() - w0, 1)
    counters["cpu_seconds"] = {k: round(t_cpu1.get(k, 0) - v, 2) for k, v in t_cpu0.items()}
    # the stream's and the request/response phase's share of it (a model of the guest's CPU per
    # segment and per transaction needs them apart)
    counters["cpu_seconds_by_phase"] = {
        "stream": {k: round(t_mid.get(k, 0) - v, 2) for k, v in t_cpu0.items()},
        "rr": {k: round(t_cpu1.get(k, 0) - t_mid.get(k, 0), 2) for k in t_cpu0},
    }
    counters["latency_percentiles_us"] = pct
    counters["throughput_sent_mbps"] = round(tpj["end"]["sum_sent"]["bits_per_second"] / 1e6, 2)
    counters["retransmits"] = tpj["end"]["sum_sent"].get("retransmits")
    counters["stream_window"] = opts.get("stream_window")
    # the socket buffers iperf3 ended up with (the kernel doubles what -w asks for)
    test_start = tpj.get("start") or {}
    counters["stream_sock_bufsize"] = {
        k: test_start.get(k) for k in ("sock_bufsize", "sndbuf_actual", "rcvbuf_actual") if k in test_start
    }
    if opts["fresh_guests"]:
        doms.destroy_all()
    return RunResult(metrics={"throughput_mbps": round(recv, 2), "latency_us": round(lat_us, 1)}, counters=counters)


def _measure(h: Host, doms: Domains, opts: dict, dur: int):
    """iperf3 then sockperf from dom0 against the I/O guest; (CPU times before, wall start,
    iperf3's JSON, sockperf's output, CPU times after, CPU times between the two)."""
    t_cpu0, w0 = doms.cpu_times(), time.monotonic()
    client = ["taskset", "-c", "0"]  # dom0 has one vCPU (pinned to dom0_pcpu)
    window = ["-w", str(opts["stream_window"])] if opts.get("stream_window") else []
    tp = h.run(
        [*client, "iperf3", "-c", IO_IP, "-p", str(IPERF_PORT), "-t", str(dur), *window, "-J"],
        timeout=min(opts["run_timeout_s"], dur + 120),
    )
    try:
        tpj = json.loads(tp.stdout)
    except json.JSONDecodeError:
        raise RunFailed("iperf3: output is not JSON:\n" + tp.stdout[-2000:]) from None
    if "error" in tpj:
        raise RunFailed(f"iperf3: {tpj['error']}")
    t_cpu_mid = doms.cpu_times()  # between the phases: each phase's CPU per domain
    lat = h.run(
        [
            *client,
            "sockperf",
            "ping-pong",
            "--tcp",
            "-i",
            IO_IP,
            "-p",
            str(SOCKPERF_PORT),
            "-t",
            str(dur),
            "--mps=max",
            "--full-rtt",
        ],
        timeout=min(opts["run_timeout_s"], dur + 120),
    )
    return t_cpu0, w0, tpj, lat, doms.cpu_times(), t_cpu_mid


def parse_sockperf(text: str) -> tuple[float, dict[str, float]]:
    """Average round-trip time (us) and percentiles from `sockperf ping-pong --full-rtt`."""
    m = re.search(r"avg-rtt=([\d.]+)", text) or re.search(r"avg-lat(?:ency)?=([\d.]+)", text)
    if not m:
        raise RunFailed("sockperf: no average latency in output:\n" + text[-2000:])
    pct = {}
    for p, v in re.findall(r"--->\s+percentile\s+([\d.]+)\s+=\s+([\d.]+)", text):
        pct[p] = float(v)
    for name, v in re.findall(r"--->\s+<(MAX|MIN)> observation\s+=\s+([\d.]+)", text):
        pct[name.lower()] = float(v)
    return float(m.group(1)), pct


# ---------------------------------------------------------------- the simulator's scenario of this workload


def sim_scenarios(study, variant, sim, wl, point, seed):
    """The simulator's scenarios of a run of this workload (netperf-pair): [(tag, scenario)]."""
    mode = point["mode"]
    out = []
    dom0 = netback_domain(wl, wl["host"])
    for tag, kind, params in (("stream", "net_stream", wl["stream"]), ("rr", "net_rr", wl["rr"])):
        io = {"name": "io", "vcpus": 1, "hard_affinity": [wl["pin_cpu"]], "workload": dict(params, kind=kind)}
        doms = [io]
        if mode == "corun":
            doms.append({"name": "cpu", "vcpus": 1, "hard_affinity": [wl["pin_cpu"]], "workload": {"kind": "cpu"}})
        elif mode != "alone":
            raise ConfigError(f"{KIND}: unknown mode {mode!r}")
        if dom0 is not None:
            doms.append(dom0)
        out.append(
            (
                tag,
                {
                    "seed": sub_seed(seed, tag),
                    "duration_s": float(wl["duration_s"]),
                    "warmup_s": float(wl["warmup_s"]),
                    "host": wl["host"],
                    "xen": xen_options(sim, wl.get("xen")),
                    "domains": doms,
                },
            )
        )
    return out


def sim_metrics(study, res, point, wl):
    """The study's metrics (and the per-VM samples behind them) from the simulator's results."""
    io_s = next(d for d in res["stream"]["domains"] if d["name"] == "io")
    io_r = next(d for d in res["rr"]["domains"] if d["name"] == "io")
    return ({"throughput_mbps": io_s["rx_mbps"], "latency_us": io_r["rr_mean_us"]}, {})
