"""S4's workload on Xen hosts (schedlab/workloads/numamix.py): what it reads from xl and
from the guests' benchmark lines. The texts are as Xen 4.17 and the guests printed them
on the qemu testbed's 2-node host. No QEMU."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from schedlab import workloads
from schedlab.core.testbed import RunFailed
from schedlab.packs.forkexec import PACK as FORKEXEC
from schedlab.packs.sysbench import MEMORY as SYSBENCH_MEMORY
from schedlab.workloads import numamix

PACKS = Path(__file__).parent / "data" / "packs"

XL_INFO_N = """\
xen_version            : 4.17.5
xen_scheduler          : credit
cpu_topology           :
cpu:    core    socket     node
  0:       0        0        0
  1:       0        1        1
device topology        :
device           node
No device topology data available
numa_info              :
node:    memsize    memfree    distances
   0:      2048       1710      10,20
   1:      3072       1317      20,10
xen_commandline        : console=com1
"""

DMESG = """\
(XEN) 'u' pressed -> dumping numa info (now = 1)
(XEN) Memory location of each domain:
(XEN) Domain 1 (total: 40960):
(XEN)     Node 0: 0
(XEN)     Node 1: 40960
(XEN) 'u' pressed -> dumping numa info (now = 252785133483)
(XEN) NODE0 start->0 size->524288 free->437870
(XEN) NODE1 start->524288 size->786432 free->91436
(XEN) CPU0 -> NODE0
(XEN) CPU1 -> NODE1
(XEN) Memory location of each domain:
(XEN) Domain 0 (total: 262144):
(XEN)     Node 0: 84909
(XEN)     Node 1: 177235
(XEN) Domain 1 (total: 40960):
(XEN)     Node 0: 40960
(XEN)     Node 1: 0
(XEN) Domain 2 (total: 40960):
(XEN)     Node 0: 0
(XEN)     Node 1: 40960
(XEN) [2026-11-22 02:00:01] d3 (total: 40960):
(XEN) [2026-11-22 02:00:01]     Node 0: 20480
(XEN) [2026-11-22 02:00:01]     Node 1: 20480
(XEN) 'q' pressed -> dumping domain info
"""

VCPU_LIST = """\
Name                                ID  VCPU   CPU State   Time(s) Affinity (Hard / Soft)
Domain-0                             0     0    1   r--     300.1  all / all
lock1                                1     0    0   -b-       4.1  all / 0
lock1                                1     1    1   -b-       4.0  all / 0
lock2                                2     0    0   r--       3.6  1 / all
lock2                                2     1    -   --p       0.0  1 / all
"""


def test_cpu_nodes_from_xl_info_n():
    assert numamix.cpu_nodes(XL_INFO_N) == {0: 0, 1: 1}
    with pytest.raises(RunFailed, match="no cpu_topology"):
        numamix.cpu_nodes("xen_version : 4.17.5\n")


def test_domain_memory_from_the_last_dump():
    mem = numamix.domain_memory(DMESG)
    assert mem == {0: {0: 84909, 1: 177235}, 1: {0: 40960, 1: 0}, 2: {0: 0, 1: 40960}, 3: {0: 20480, 1: 20480}}
    with pytest.raises(RunFailed, match="Memory location"):
        numamix.domain_memory("(XEN) nothing\n")


def test_vcpu_affinity():
    aff = numamix.vcpu_affinity(VCPU_LIST, ["lock1", "lock2"])
    assert aff == {"lock1": ["all / 0", "all / 0"], "lock2": ["1 / all", "1 / all"]}


def _line(vm, out: str, rc=0, token="00000007abcdef"):
    return (
        f"SCHEDLAB-BENCH-RESULT token={token} vm={vm} rc={rc} guest_ticks=1,0,2,3,0,0,0,4 "
        f"out={base64.b64encode(out.encode()).decode()}"
    )


def test_bench_results_use_the_packs_parsers():
    sysb = (PACKS / "sysbench_memory.ok.txt").read_text()
    fork = (PACKS / "forkexec.ok.txt").read_text()
    phase = {"token": "00000007abcdef"}
    got = numamix.bench_results(SYSBENCH_MEMORY, {"lock1": _line("lock1", sysb)}, phase)
    assert got["lock1"] == SYSBENCH_MEMORY.parse(sysb)
    assert phase["output"]["lock1"] == sysb and phase["guest_ticks"]["lock1"]["steal"] == 4
    got = numamix.bench_results(FORKEXEC, {"lock2": _line("lock2", fork)}, {"token": "t"})
    assert got["lock2"]["median_us"] == FORKEXEC.parse(fork)["median_us"]


def test_malformed_bench_output_names_the_vm_token_and_text():
    garbage = (PACKS / "sysbench_memory.garbage.txt").read_text()
    with pytest.raises(RunFailed, match=r"lock3: .*lock3 token=00000007abcdef") as e:
        numamix.bench_results(SYSBENCH_MEMORY, {"lock3": _line("lock3", garbage)}, {"token": "00000007abcdef"})
    assert garbage.strip().splitlines()[0][:30] in str(e.value)
    with pytest.raises(RunFailed, match="exited with status 2"):
        numamix.bench_results(FORKEXEC, {"lock1": _line("lock1", "forkexec: fork: EAGAIN\n", rc=2)}, {})
    with pytest.raises(RunFailed, match="unknown-program"):
        numamix.bench_results(
            FORKEXEC, {"lock1": "SCHEDLAB-BENCH-RESULT token=t vm=lock1 rc=127 error=unknown-program-ls"}, {}
        )
    with pytest.raises(RunFailed, match="not base64"):
        numamix.bench_results(FORKEXEC, {"lock1": "SCHEDLAB-BENCH-RESULT token=t vm=lock1 rc=0 out=@@@"}, {})


def test_numa_mix_is_a_workload_with_known_options():
    assert workloads.WORKLOADS["numa-mix"] is numamix.run
    for k in numamix.DEFAULTS:
        assert k in workloads.DEFAULTS


def test_placement_must_be_known():
    with pytest.raises(RunFailed, match="guest.placement 'spread'"):
        numamix.run(
            None,
            None,
            {**workloads.DEFAULTS, "variant_guest": {"placement": "spread"}, "variant": "x"},
            {"vms": 2},
            1,
            {},
        )
