"""The pipeline under SLURM: a one-node cluster on this machine (Debian slurmctld +
slurmd + munge, on loopback), and Snakemake's slurm executor plugin submitting the
sim jobs of S1 (build the simulator, four point jobs, gather) with sbatch.

What it shows: the rules need no change to run under a cluster scheduler, the
jobs' environment carries what they need (the `schedlab` CLI, the repository copy),
and their records are whole. The lab testbed's part under SLURM (a shared
$SCHEDLAB_CACHE/lab for locks and quarantine) is docs/lab-testbed.md section 8.

Needs root, Debian packages slurmctld slurmd slurm-client munge, the PyPI package
snakemake-executor-plugin-slurm (2.8.0 with snakemake 9.27.1), and no SLURM
configuration of the machine's own: the test writes /etc/slurm/slurm.conf (srun
inside a job reads only that: the plugin removes SLURM_* variables such as
SLURM_CONF from the job's environment) and removes it afterwards. Marked slow:
about 3-5 min (most of it the plugin's status polling).
"""

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BIN, copy_workdir, install_debs

CONF = Path("/etc/slurm/slurm.conf")
MARK = "# schedlab test cluster (tests/test_lab_slurm.py)"
TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "srun", "munged")


SLURM_DEBS = ("slurmctld", "slurmd", "slurm-client", "munge")


def _why_not() -> str | None:
    """Why the test cannot run: None, a reason to skip (not asked for), or it fails. Asked
    for, it installs the SLURM packages itself."""
    # it starts system daemons and writes /etc/slurm/slurm.conf: only when asked for
    if os.environ.get("SCHEDLAB_SLURM_TESTS") != "1":
        return "one-node SLURM test: set SCHEDLAB_SLURM_TESTS=1 (root; installs slurmctld slurmd slurm-client munge)"
    if os.geteuid() != 0:
        pytest.fail(
            "SCHEDLAB_SLURM_TESTS=1: the one-node cluster needs root (system daemons, /etc/slurm)", pytrace=False
        )
    install_debs(*SLURM_DEBS, why="SCHEDLAB_SLURM_TESTS=1: SLURM's Debian packages")
    missing = [t for t in TOOLS if not (shutil.which(t) or Path(f"/usr/sbin/{t}").exists())]
    if missing:
        pytest.fail(f"SLURM packages installed but {', '.join(missing)} not found", pytrace=False)
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.fail("snakemake-executor-plugin-slurm missing from the venv (requirements.lock pins it)", pytrace=False)
    if CONF.exists() and MARK not in CONF.read_text():
        pytest.fail(
            f"{CONF} exists: this machine has its own SLURM configuration, which the test would overwrite",
            pytrace=False,
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbin(tool: str) -> str:
    return shutil.which(tool) or f"/usr/sbin/{tool}"


def _kill_pidfile(p: Path) -> None:
    try:
        pid = int(p.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path):
    """munged (own socket and key copy), slurmctld and slurmd of a one-node cluster."""
    why = _why_not()
    if why:
        pytest.skip(why)
    d = tmp_path / "slurm"
    for sub in ("munge", "state", "spool", "log"):
        (d / sub).mkdir(parents=True)
    os.chmod(d / "munge", 0o700)
    key = d / "munge" / "key"
    if Path("/etc/munge/munge.key").exists():
        shutil.copy("/etc/munge/munge.key", key)
    else:
        key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    sock = d / "munge" / "sock"
    subprocess.run(
        [
            _sbin("munged"),
            "-f",
            "-S",
            str(sock),
            "--key-file",
            str(key),
            "--pid-file",
            str(d / "munge" / "pid"),
            "--log-file",
            str(d / "munge" / "log"),
            "--seed-file",
            str(d / "munge" / "seed"),
        ],
        check=True,
        capture_output=True,
    )
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    CONF.parent.mkdir(parents=True, exist_ok=True)
    CONF.write_text(
        "\n".join(
            [
                MARK + "; removed when the test ends",
                "ClusterName=schedlabtest",
                f"SlurmctldHost={node}(127.0.0.1)",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "AuthType=auth/munge",
                f"AuthInfo=socket={sock}",
                "CredType=cred/munge",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={d / 'state'}",
                f"SlurmdSpoolDir={d / 'spool'}",
                f"SlurmctldPidFile={d / 'slurmctld.pid'}",
                f"SlurmdPidFile={d / 'slurmd.pid'}",
                f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={d / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "SchedulerType=sched/backfill",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "ReturnToService=2",
                "MinJobAge=3600",  # finished jobs stay visible to squeue (no accounting database here)
                "MpiDefault=none",
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=2000 State=UNKNOWN",
                f"PartitionName=lab Nodes={node} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    try:
        subprocess.run([_sbin("slurmctld")], check=True, capture_output=True)
        subprocess.run([_sbin("slurmd")], check=True, capture_output=True)
        t0 = time.monotonic()
        while True:
            r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated"):
                break
            if time.monotonic() - t0 > 60:
                raise RuntimeError(
                    f"SLURM node not up: {r.stdout} {r.stderr}\n" + (d / "log" / "slurmctld.log").read_text()[-2000:]
                )
            time.sleep(1)
        yield d
    finally:
        subprocess.run(["scancel", "--user=root"], capture_output=True)
        _kill_pidfile(d / "slurmd.pid")
        _kill_pidfile(d / "slurmctld.pid")
        subprocess.run([_sbin("munged"), "-s", "-S", str(sock)], capture_output=True)
        if CONF.exists() and MARK in CONF.read_text():
            CONF.unlink()


@pytest.mark.slow
def test_sim_jobs_run_under_slurm(cluster, tmp_path):
    work = copy_workdir(tmp_path / "w")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("SLURM_CONF", None)
    target = "data/runs/sim/s1/all.json"
    r = subprocess.run(
        [
            str(BIN / "snakemake"),
            "--executor",
            "slurm",
            "--jobs",
            "4",
            "--default-resources",
            "slurm_partition=lab",
            "runtime=30",
            "mem_mb=200",
            "--slurm-status-command",
            "squeue",
            "--slurm-keep-successful-logs",
            "--latency-wait",
            "10",
            target,
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:]
    # every job went through sbatch: the simulator build, one job per S1 point, the gather
    submitted = [l for l in out.splitlines() if "has been submitted with SLURM jobid" in l]
    assert len(submitted) == 6, out[-4000:]
    jobs = subprocess.run(["squeue", "--states=all", "-h", "-o", "%i %T"], capture_output=True, text=True).stdout
    states = [l.split()[1] for l in jobs.splitlines() if l.strip()]
    assert states.count("COMPLETED") >= 6, jobs
    logs = list((work / ".snakemake" / "slurm_logs").rglob("*.log"))
    assert any("rule_run_point" in str(p) for p in logs), logs
    assert (work / target).exists()
    v = subprocess.run([str(BIN / "schedlab"), "verify", "data"], cwd=work, capture_output=True, text=True)
    assert v.returncode == 0 and "0 with problems" in v.stdout + v.stderr, v.stdout + v.stderr
