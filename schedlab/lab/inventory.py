"""The lab inventory: config/lab.yaml, validated by workflow/schemas/lab.schema.json.

An error names the file, the line (from the YAML node marks) and the field, e.g.

    config/lab.yaml:42: field hosts.xen1.bmc.password: ...

Secrets never live in the inventory: the BMC password is referenced by the name
of an environment variable or by a file outside the repository, and is read
only when a BMC command runs (schedlab.lab.power). `HostSpec.public()` is the
host's entry as recorded with every run: everything but where the secret is.
"""

from __future__ import annotations

import copy
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedlab.config import ROOT, ConfigError, _field, _line_of, _schema, _short, _validator_class, load_yaml, validate
from schedlab.core.files import cache_root

DEFAULT_PATH = ROOT / "config" / "lab.yaml"
ENV_INVENTORY = "SCHEDLAB_LAB_INVENTORY"

# What a host gets when neither it nor the inventory's `defaults` say otherwise.
BUILTIN: dict[str, dict[str, Any]] = {
    "ssh": {"port": 22, "user": "root", "multiplex": False},
    "boot": {
        "dir": "/boot/schedlab",
        "grub_dir": "/boot/grub",
        "grub_path": "",
        "dom0_cmdline": "",
        "xen_cmdline_extra": "",
        "grub_reboot": ["grub-reboot"],
        "reboot": ["systemctl", "reboot"],
        "keep_builds": 8,
    },
    "timeouts": {
        "ssh_connect_s": 10,
        "boot_s": 600,
        "shutdown_s": 120,
        "command_s": 3600,
        "install_s": 600,
        "lock_s": 0,
    },
    "policy": {"boot_attempts": 3, "quarantine_after": 2},
}
BMC_DEFAULTS = {"type": "ipmi-lan", "port": 623, "privilege": "ADMINISTRATOR", "timeout_s": 20, "retries": 1}


@dataclass(frozen=True)
class Where:
    """A place in the inventory file, for error messages."""

    file: Path
    line: int | None
    field: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: field {self.field}" if self.line else f"{self.file}: field {self.field}"

    def error(self, msg: str) -> ConfigError:
        return ConfigError(f"{self}: {msg}")


@dataclass(frozen=True)
class FileRef:
    """A file named by {path: /abs}, {cache: rel} or {env: NAME}; resolved when used."""

    kind: str
    value: str
    where: Where

    def resolve(self) -> Path:
        if self.kind == "path":
            return Path(self.value)
        if self.kind == "cache":
            return cache_root() / self.value
        val = os.environ.get(self.value)
        if not val:
            raise self.where.error(f"environment variable {self.value} is not set (it should hold the file's path)")
        return Path(val)

    def resolve_existing(self) -> Path:
        p = self.resolve()
        if not p.is_file():
            raise self.where.error(f"{p}: no such file ({self.describe()})")
        return p

    def describe(self) -> str:
        return {"path": self.value, "cache": f"$SCHEDLAB_CACHE/{self.value}", "env": f"${self.value}"}[self.kind]


@dataclass(frozen=True)
class SecretRef:
    """Where the BMC password is: {env: NAME}, {file: /abs/path} or {cache: rel} (a file
    under $SCHEDLAB_CACHE). `read()` is the only way to get it; it is never stored,
    logged or put on a command line. A file must be outside the repository and readable
    by its owner only."""

    kind: str
    value: str
    where: Where

    def read(self) -> str:
        if self.kind == "env":
            pw = os.environ.get(self.value)
            if pw is None or pw == "":
                raise self.where.error(f"environment variable {self.value} (the BMC password) is not set")
            return pw
        p = Path(self.value) if self.kind == "file" else cache_root() / self.value
        if self.kind == "cache" and _is_inside(p, ROOT):
            raise self.where.error(
                f"{p} ($SCHEDLAB_CACHE/{self.value}) is inside the repository; keep the BMC password outside it"
            )
        try:
            st = p.stat()
        except OSError as e:
            raise self.where.error(f"cannot read the BMC password file {p}: {e.strerror}") from None
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise self.where.error(
                f"the BMC password file {p} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it"
            )
        pw = p.read_text().rstrip("\r\n")
        if not pw:
            raise self.where.error(f"the BMC password file {p} is empty")
        return pw

    def public(self) -> dict:
        # where the secret comes from is not itself secret, but keep records free of it too
        return {"source": self.kind}


@dataclass
class BmcSpec:
    address: str
    port: int
    user: str
    password: SecretRef
    privilege: str = "ADMINISTRATOR"
    cipher_suite: int | None = None
    timeout_s: float = 20
    retries: int = 1
    type: str = "ipmi-lan"


@dataclass
class HostSpec:
    name: str
    description: str
    address: str
    port: int
    user: str
    key: FileRef
    known_hosts: FileRef
    host_key_alias: str | None
    topology: dict
    bmc: BmcSpec | None
    console: dict | None
    boot: dict
    timeouts: dict
    policy: dict
    entry: dict = field(repr=False)  # the merged entry as validated (no secrets in it)
    multiplex: bool = False  # one shared ssh connection (ControlMaster) for all commands
    where: Where | None = field(default=None, repr=False)

    def public(self) -> dict:
        """The inventory entry for provenance records: no password, no key material."""
        e = copy.deepcopy(self.entry)
        if self.bmc is not None:
            e["bmc"]["password"] = self.bmc.password.public()
        e["name"] = self.name
        return e

    def host(self):
        """The SSH driver (schedlab.host.Host) for this host."""
        from schedlab.host import Host

        return Host(
            self.address,
            user=self.user,
            port=self.port,
            identity=self.key.resolve_existing(),
            known_hosts=self.known_hosts.resolve_existing(),
            host_key_alias=self.host_key_alias,
            connect_timeout=int(self.timeouts["ssh_connect_s"]),
            multiplex=self.multiplex,
        )


@dataclass
class Inventory:
    path: Path
    hosts: dict[str, HostSpec]
    pools: dict[str, list[str]]
    state_dir: Path

    def resolve(self, name: str | None) -> list[HostSpec]:
        """A host name or a pool name -> its hosts (None: every host)."""
        if name is None:
            return list(self.hosts.values())
        if name in self.hosts:
            return [self.hosts[name]]
        if name in self.pools:
            return [self.hosts[h] for h in self.pools[name]]
        raise ConfigError(
            f"{self.path}: no host or pool named {name!r} "
            f"(hosts: {', '.join(self.hosts) or '-'}; pools: {', '.join(self.pools) or '-'})"
        )


REPLACED_WHOLE = {"key", "known_hosts", "password"}  # {path|cache|env: ...}: one source, never merged


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in REPLACED_WHOLE:
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _is_inside(p: Path, root: Path) -> bool:
    try:
        p.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def check_destination(user: str, address: str, port: int, source: str) -> None:
    """An ssh destination given elsewhere (`--target ssh:USER@HOST:PORT`) checked as an
    inventory entry's is (lab.schema.json's user, address, port): nothing can reach ssh
    as an option or a shell word. Raises ConfigError naming `source` and the field."""
    schema = {
        "$defs": _schema("lab")["$defs"],
        "type": "object",
        "properties": {k: {"$ref": f"#/$defs/{k}"} for k in ("user", "address", "port")},
    }
    for e in _validator_class()(schema).iter_errors({"user": user, "address": address, "port": port}):
        raise ConfigError(f"{source}: field {_field(list(e.absolute_path))}: {_short(e)}")


def load_inventory(path: str | Path | None = None) -> Inventory:
    """Load and check the inventory: $SCHEDLAB_LAB_INVENTORY, else config/lab.yaml."""
    path = Path(path or os.environ.get(ENV_INVENTORY) or DEFAULT_PATH)
    data, node = load_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: empty inventory")
    validate(data, "lab", path, node)

    def where(*fpath) -> Where:
        return Where(path, _line_of(node, list(fpath)), _field(list(fpath)))

    defaults = data.get("defaults") or {}
    pools = {k: list(v) for k, v in (data.get("pools") or {}).items()}
    hosts: dict[str, HostSpec] = {}
    for name, raw in data["hosts"].items():
        if name in pools:
            raise where("pools", name).error(f"pool {name!r} has the name of a host")
        entry = {}
        for section, builtin in BUILTIN.items():
            entry[section] = _merge(_merge(builtin, defaults.get(section) or {}), raw.get(section) or {})
        for section in ("description", "topology", "bmc", "console"):
            if section in raw:
                entry[section] = copy.deepcopy(raw[section])
        ssh = entry["ssh"]
        # a host's ssh section may omit key/known_hosts when defaults give them: say where they are missing
        src = {"key": None, "known_hosts": None}
        for k in src:
            if k in (raw.get("ssh") or {}):
                src[k] = ("hosts", name, "ssh", k)
            elif k in (defaults.get("ssh") or {}):
                src[k] = ("defaults", "ssh", k)
            else:
                raise where("hosts", name, "ssh").error(f"no {k} (set it here or under defaults.ssh)")

        def fileref(k):  # noqa: B023  (called at once, in this iteration)
            ((kind, value),) = ssh[k].items()  # noqa: B023
            return FileRef(kind, value, where(*src[k], kind))  # noqa: B023

        bmc = None
        if "bmc" in entry:
            b = _merge(BMC_DEFAULTS, entry["bmc"])
            entry["bmc"] = b
            ((pkind, pval),) = b["password"].items()
            pw_where = where("hosts", name, "bmc", "password", pkind)
            if pkind == "file" and _is_inside(Path(pval), ROOT):
                raise pw_where.error(
                    f"{pval} is inside the repository; keep the BMC password outside it "
                    "(e.g. /etc/schedlab/bmc-NAME.pass, mode 600)"
                )
            bmc = BmcSpec(
                address=b["address"],
                port=b["port"],
                user=b["user"],
                password=SecretRef(pkind, pval, pw_where),
                privilege=b["privilege"],
                cipher_suite=b.get("cipher_suite"),
                timeout_s=b["timeout_s"],
                retries=b["retries"],
                type=b["type"],
            )
        if entry["boot"]["reboot"] == ["bmc-cycle"] and bmc is None:
            raise where("hosts", name, "boot", "reboot").error("[bmc-cycle] needs a bmc section")
        if entry.get("console", {}).get("bmc_password") and bmc is None:
            raise where("hosts", name, "console", "bmc_password").error("needs a bmc section")
        hosts[name] = HostSpec(
            name=name,
            description=raw.get("description", ""),
            address=ssh["address"],
            port=ssh["port"],
            user=ssh["user"],
            key=fileref("key"),
            known_hosts=fileref("known_hosts"),
            host_key_alias=ssh.get("host_key_alias"),
            topology=entry["topology"],
            bmc=bmc,
            console=entry.get("console"),
            boot=entry["boot"],
            timeouts=entry["timeouts"],
            policy=entry["policy"],
            entry=entry,
            where=where("hosts", name),
            multiplex=bool(ssh.get("multiplex")),
        )
    for pool, members in pools.items():
        for i, m in enumerate(members):
            if m not in hosts:
                raise where("pools", pool, i).error(f"no host named {m!r} (hosts: {', '.join(hosts)})")
    sd = Path(data.get("state_dir", "lab"))
    state_dir = sd if sd.is_absolute() else cache_root() / sd
    return Inventory(path=path, hosts=hosts, pools=pools, state_dir=state_dir)
