"""BMC power control, for real: ipmitool over IPMI v2.0 lanplus against OpenIPMI's
ipmi_sim on 127.0.0.1, whose chassis power starts and stops a real process (the
stand-in for the host). Only the BMC hardware is simulated; the code path is
the one used on a lab BMC."""

import os
import shutil
import time
from pathlib import Path

import pytest

from schedlab.lab.inventory import BmcSpec, SecretRef, Where
from schedlab.lab.power import BMC, BmcError
from schedlab.testing.standins import IpmiSim

NEEDS = {"ipmi_sim": "openipmi", "ipmitool": "ipmitool"}
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in NEEDS),
    reason="needs Debian packages " + ", ".join(sorted(set(NEEDS.values()))),
)

WHERE = Where(Path("lab.yaml"), 1, "hosts.t.bmc.password.env")


def _alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text().split()
        return st[2] != "Z"
    except OSError:
        return False


@pytest.fixture
def sim(tmp_path):
    s = IpmiSim(tmp_path / "bmc", ["/bin/sleep", "600"])
    s.start()
    yield s
    s.stop()


def bmc_for(sim, monkeypatch, password=None, **kw):
    monkeypatch.setenv("SCHEDLAB_TEST_BMC_PW", password or sim.password)
    spec = BmcSpec(
        "127.0.0.1", sim.port, sim.user, SecretRef("env", "SCHEDLAB_TEST_BMC_PW", WHERE), **{"timeout_s": 4, **kw}
    )
    lines = []
    return BMC(spec, log=lines.append), lines


def test_power_on_off_cycle_drive_the_host_process(sim, monkeypatch):
    bmc, log = bmc_for(sim, monkeypatch)
    t0 = time.monotonic()
    assert bmc.status() == "off" and sim.powered_pids() == []
    bmc.on()
    (pid,) = sim.powered_pids()
    assert bmc.status() == "on" and _alive(pid)
    bmc.cycle()  # off, wait, on: a new process
    (pid2,) = sim.powered_pids()
    assert pid2 != pid and not _alive(pid) and bmc.status() == "on"
    bmc.off()
    assert bmc.status() == "off" and not _alive(pid2) and sim.powered_pids() == []
    bmc.cycle()  # a cycle of an off host powers it on
    assert bmc.status() == "on" and len(sim.powered_pids()) == 1
    assert time.monotonic() - t0 < 30
    assert any("power cycle" in l or "power on" in l for l in log)


def test_password_only_in_child_environment(sim, monkeypatch):
    bmc, log = bmc_for(sim, monkeypatch)
    argv = bmc.argv("chassis", "power", "status")
    assert sim.password not in " ".join(argv) and "-E" in argv and "-P" not in argv
    assert argv[:3] == ["ipmitool", "-I", "lanplus"]
    bmc.status()
    assert os.environ.get("IPMI_PASSWORD") != sim.password  # never put into our own environment
    assert not any(sim.password in l for l in log)


def test_wrong_password_is_a_clear_error_without_the_password(sim, monkeypatch):
    bmc, _ = bmc_for(sim, monkeypatch, password="not-the-pw-123", retries=0)
    with pytest.raises(BmcError) as e:
        bmc.status()
    msg = str(e.value)
    assert f"BMC schedlab@127.0.0.1:{sim.port}" in msg and "chassis power status" in msg
    assert "wrong user/password" in msg and "hosts.t.bmc.password.env" in msg
    assert "not-the-pw-123" not in msg and sim.password not in msg


def test_unreachable_bmc_times_out(monkeypatch, tmp_path):
    import socket

    from schedlab.testing.standins import free_port

    monkeypatch.setenv("SCHEDLAB_TEST_BMC_PW", "x")
    spec = BmcSpec(
        "127.0.0.1",
        free_port(socket.SOCK_DGRAM),
        "schedlab",
        SecretRef("env", "SCHEDLAB_TEST_BMC_PW", WHERE),
        timeout_s=2,
        retries=0,
    )
    t0 = time.monotonic()
    with pytest.raises(BmcError, match="failed|no answer"):
        BMC(spec).status()
    assert time.monotonic() - t0 < 15


def test_missing_password_names_the_variable(sim, monkeypatch):
    bmc, _ = bmc_for(sim, monkeypatch)
    monkeypatch.delenv("SCHEDLAB_TEST_BMC_PW")
    with pytest.raises(
        Exception,
        match=r"lab.yaml:1: field hosts.t.bmc.password.env: environment variable "
        r"SCHEDLAB_TEST_BMC_PW \(the BMC password\) is not set",
    ):
        bmc.on()


def test_reset_unsupported_says_so(sim, monkeypatch):
    # ipmi_sim can only reset a VM connected to its serial channel; a BMC that
    # cannot reset must say so (the driver power-cycles instead)
    bmc, _ = bmc_for(sim, monkeypatch)
    bmc.on()
    with pytest.raises(BmcError, match="chassis power reset.*does not support that command"):
        bmc.reset()
