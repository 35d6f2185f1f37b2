"""The lab inventory: the sample validates; bad entries are refused with file, line and field."""

import json
import os
from pathlib import Path

import pytest

from schedlab.config import ROOT, ConfigError
from schedlab.lab.inventory import load_inventory

SAMPLE = ROOT / "config" / "lab.yaml"

GOOD = """\
version: 1
state_dir: /tmp/schedlab-lab-test-state
defaults:
  ssh: {user: root, key: {path: /etc/schedlab/id_ed25519}, known_hosts: {cache: lab/known_hosts}}
hosts:
  xen1:
    ssh: {address: 10.0.0.11}
    topology: {sockets: 2, cores_per_socket: 8, threads_per_core: 2, numa_nodes: 2}
    bmc: {address: 10.0.1.11, user: admin, password: {env: XEN1_BMC_PASSWORD}}
    console: {argv: [ipmitool, -I, lanplus, -H, 10.0.1.11, -U, admin, -E, sol, activate], bmc_password: true}
  xen2:
    ssh: {address: xen2.lab.example.org, port: 2222, key: {env: XEN2_KEY}}
    topology: {sockets: 1, cores_per_socket: 4, threads_per_core: 1, numa_nodes: 1}
pools:
  rack: [xen1, xen2]
"""


def load(tmp_path, text):
    p = tmp_path / "lab.yaml"
    p.write_text(text)
    return load_inventory(p)


def refused(tmp_path, text):
    with pytest.raises(ConfigError) as e:
        load(tmp_path, text)
    return str(e.value)


def test_sample_inventory_is_valid():
    inv = load_inventory(SAMPLE)
    (h,) = inv.resolve("virtual")
    assert h.name == "vhost0" and h.address == "127.0.0.1" and h.port == 10022
    assert h.bmc.password.kind == "cache" and h.bmc.password.value == "lab/vhost0/bmc.pass"
    assert h.boot["reboot"] == ["busybox", "reboot"] and h.boot["dom0_cmdline"].startswith("root=/dev/vda1 ")
    assert all(isinstance(a, str) for a in h.console["argv"])


def test_defaults_pools_and_resolution(tmp_path):
    inv = load(tmp_path, GOOD)
    assert [h.name for h in inv.resolve("rack")] == ["xen1", "xen2"]
    x1, x2 = inv.hosts["xen1"], inv.hosts["xen2"]
    assert x1.user == "root" and x1.port == 22 and x1.key.resolve() == Path("/etc/schedlab/id_ed25519")
    assert x2.port == 2222 and x2.bmc is None
    assert x1.timeouts["boot_s"] == 600 and x1.policy["quarantine_after"] == 2 and x1.bmc.port == 623
    os.environ.pop("XEN2_KEY", None)
    with pytest.raises(ConfigError, match=r"lab.yaml:12: field hosts.xen2.ssh.key.env: environment variable XEN2_KEY"):
        x2.key.resolve()
    with pytest.raises(ConfigError, match="no host or pool named 'nope'.*hosts: xen1, xen2; pools: rack"):
        inv.resolve("nope")


def test_public_entry_has_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("XEN1_BMC_PASSWORD", "pw-never-recorded")
    inv = load(tmp_path, GOOD)
    pub = json.dumps(inv.hosts["xen1"].public())
    assert "pw-never-recorded" not in pub and "XEN1_BMC_PASSWORD" not in pub
    assert inv.hosts["xen1"].bmc.password.read() == "pw-never-recorded"


@pytest.mark.parametrize(
    "bad, where, what",
    [
        # a shell metacharacter anywhere a value may reach a command
        ('ssh: {address: "10.0.0.11;reboot"}', "hosts.xen9.ssh.address", "is not allowed"),
        ('bmc: {address: 10.0.1.11, user: "admin$(id)", password: {env: P}}', "hosts.xen9.bmc.user", "is not allowed"),
        # the password itself instead of where it is
        (
            "bmc: {address: 10.0.1.11, user: admin, password: hunter2}",
            "hosts.xen9.bmc.password",
            "is not of type 'object'",
        ),
        (
            "bmc: {address: 10.0.1.11, user: admin, password: {value: hunter2}}",
            "hosts.xen9.bmc.password.value",
            "unknown field",
        ),
        # commands are argv lists, not shell strings
        ('console: {argv: "ipmitool sol activate"}', "hosts.xen9.console.argv", "is not of type 'array'"),
        ('console: {argv: [sh, -c, "cat /dev/ttyS0 | tee log"]}', "hosts.xen9.console.argv.2", "is not allowed"),
        ('boot: {reboot: [systemctl, "reboot;rm"]}', "hosts.xen9.boot.reboot.1", "is not allowed"),
        ('boot: {dom0_cmdline: "root=/dev/sda1 `id`"}', "hosts.xen9.boot.dom0_cmdline", "is not allowed"),
        ("ssh: {address: 10.0.0.11, key: {path: ../id}}", "hosts.xen9.ssh.key.path", "(no '..'"),
        # a trailing newline: JSON Schema's `$` is the end of the value (Python's also matched before a '\n')
        ('ssh: {address: "10.0.0.11\\n"}', "hosts.xen9.ssh.address", "is not allowed"),
        ('ssh: {address: 10.0.0.11, user: "root\\n"}', "hosts.xen9.ssh.user", "is not allowed"),
        ("toplogy: {}", "hosts.xen9.toplogy", "unknown field"),
    ],
)
def test_bad_entries_name_file_line_field(tmp_path, bad, where, what):
    host = ["  xen9:", "    topology: {sockets: 1, cores_per_socket: 4, threads_per_core: 1, numa_nodes: 1}"]
    if not bad.startswith("ssh:"):
        host.append("    ssh: {address: 10.0.0.19}")
    host.append(f"    {bad}")
    text = GOOD.replace("pools:\n", "\n".join(host) + "\npools:\n")
    msg = refused(tmp_path, text)
    assert "lab.yaml:" in msg and f"field {where}: " in msg and what in msg, msg
    line = int(msg.split("lab.yaml:")[1].split(":")[0])
    assert text.splitlines()[line - 1] == f"    {bad}", msg


def test_password_file_inside_repo_refused(tmp_path):
    text = GOOD.replace("password: {env: XEN1_BMC_PASSWORD}", f"password: {{file: {ROOT}/config/bmc.pass}}")
    msg = refused(tmp_path, text)
    assert "lab.yaml:9: field hosts.xen1.bmc.password.file" in msg and "inside the repository" in msg


def test_password_file_must_be_private(tmp_path):
    pw = tmp_path / "bmc.pass"
    pw.write_text("s3cret\n")
    pw.chmod(0o644)
    inv = load(tmp_path, GOOD.replace("password: {env: XEN1_BMC_PASSWORD}", f"password: {{file: {pw}}}"))
    with pytest.raises(ConfigError, match="readable by others.*chmod 600") as e:
        inv.hosts["xen1"].bmc.password.read()
    assert "s3cret" not in str(e.value)
    pw.chmod(0o600)
    assert inv.hosts["xen1"].bmc.password.read() == "s3cret"


def test_password_in_the_cache_is_a_private_file(tmp_path, monkeypatch):
    """{cache: rel}: a file under $SCHEDLAB_CACHE, with the rules of {file: ...}."""
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path / "cache"))
    inv = load(tmp_path, GOOD.replace("password: {env: XEN1_BMC_PASSWORD}", "password: {cache: lab/xen1.pass}"))
    ref = inv.hosts["xen1"].bmc.password
    assert inv.hosts["xen1"].public()["bmc"]["password"] == {"source": "cache"}
    pw = tmp_path / "cache" / "lab" / "xen1.pass"
    pw.parent.mkdir(parents=True)
    pw.write_text("s3cret\n")
    pw.chmod(0o640)
    with pytest.raises(ConfigError, match="readable by others"):
        ref.read()
    pw.chmod(0o600)
    assert ref.read() == "s3cret"
    monkeypatch.setenv("SCHEDLAB_CACHE", str(ROOT / "data"))
    with pytest.raises(ConfigError, match="inside the repository"):
        ref.read()
    msg = refused(tmp_path, GOOD.replace("password: {env: XEN1_BMC_PASSWORD}", "password: {cache: /abs/pw}"))
    assert "field hosts.xen1.bmc.password.cache" in msg


def test_pool_of_unknown_host_and_missing_key(tmp_path):
    msg = refused(tmp_path, GOOD.replace("rack: [xen1, xen2]", "rack: [xen1, xen3]"))
    assert "lab.yaml:15: field pools.rack.1: no host named 'xen3'" in msg
    msg = refused(tmp_path, GOOD.replace(", key: {path: /etc/schedlab/id_ed25519}", ""))
    assert "field hosts.xen1.ssh: no key (set it here or under defaults.ssh)" in msg


def test_bmc_cycle_reboot_needs_bmc(tmp_path):
    text = GOOD.replace("    topology: {sockets: 1,", "    boot: {reboot: [bmc-cycle]}\n    topology: {sockets: 1,")
    msg = refused(tmp_path, text)
    assert "field hosts.xen2.boot.reboot: [bmc-cycle] needs a bmc section" in msg


def test_duplicate_key_names_both_lines(tmp_path):
    """PyYAML lets the last of two equal keys win silently; the inventory refuses it."""
    msg = refused(
        tmp_path,
        GOOD.replace("    ssh: {address: 10.0.0.11}", "    ssh: {address: 10.0.0.11}\n    ssh: {address: 10.0.0.99}"),
    )
    assert "lab.yaml:8: not valid YAML: duplicate key 'ssh' (first on line 7)" in msg, msg


@pytest.mark.parametrize(
    "spec, field",
    [
        ("ssh:-oProxyCommand=id", "address"),
        ("ssh:root@-oProxyCommand=id", "address"),
        ("ssh:-oX=y@host", "user"),
        ("ssh:root@host;id", "address"),
        ("ssh:root@host\n", "address"),
        ("ssh:a b@host", "user"),
        ("ssh:root@host:0", "port"),
        ("ssh:root@host:70000", "port"),
    ],
)
def test_ssh_target_checked_like_the_inventory(spec, field):
    """`--target ssh:USER@HOST[:PORT]` gets the inventory's rules: nothing reaches ssh as an option."""
    from schedlab import packrun as pack_targets

    with pytest.raises(ValueError, match=f"--target .*field {field}: "):
        pack_targets.target_from_name(spec)


def test_ssh_destination_follows_double_dash():
    from schedlab.host import Host

    argv = Host("h.example.org", user="root").ssh_argv(["true"])
    assert argv[-3:] == ["--", "root@h.example.org", "true"] and argv.count("--") == 1
