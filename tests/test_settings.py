"""workflow/schemas/settings.schema.json against what the testbeds read: the keys (and
defaults) of every testbed's options are its DEFAULTS', a variant's simulator switches are
those the scenario builders pass on, the sim_workload keys are those they read (each workload
kind's sim_scenarios and sim_metrics, and the scenario format's pieces), and the
simulator's own settings, lock types and distributions are those sim/src/engine.c accepts.
So a schema and a testbed cannot drift apart: a new option without a schema entry fails
here, and an option the schema allows but no testbed reads fails too."""

from __future__ import annotations

import ast
import copy
import re

import pytest
import yaml
from conftest import ROOT

from schedlab import config, workloads
from schedlab.core import settings
from schedlab.testbeds import lab, qemu_host, sim

SCHEMA = config._schema("settings")
DEFS = SCHEMA["$defs"]
ENGINE = (ROOT / "sim" / "src" / "engine.c").read_text()
SCENARIO_PY = ROOT / "schedlab" / "workloads" / "scenario.py"


def _sim_code() -> str:
    """The code that turns a study's sim_workload and a variant's switches into scenarios: the
    scenario format's pieces, each workload kind's sim_scenarios and sim_metrics, sim.py."""
    import inspect
    import textwrap

    parts = [SCENARIO_PY.read_text(), (ROOT / "schedlab" / "testbeds" / "sim.py").read_text()]
    for kind in workloads.KINDS:
        model = workloads.sim_model(kind)
        if model:
            parts += [textwrap.dedent(inspect.getsource(f)) for f in model]
    return "\n\n".join(parts)


def _options(testbed: str) -> dict:
    d = DEFS[f"{testbed}_options"]
    return (
        {**DEFS["workload_options"]["properties"], **d.get("properties", {})} if testbed != "sim" else d["properties"]
    )


@pytest.mark.parametrize(
    "testbed,defaults", [("qemu", qemu_host.DEFAULTS), ("lab", lab.DEFAULTS), ("sim", sim.DEFAULTS)]
)
def test_option_keys_and_defaults_are_the_testbeds(testbed, defaults):
    props = _options(testbed)
    assert set(props) == set(defaults)
    if testbed != "sim":
        assert sorted(DEFS[f"{testbed}_options"]["propertyNames"]["enum"]) == sorted(defaults)
    assert settings.defaults(testbed, SCHEMA) == defaults


def test_workload_options_are_the_workloads():
    assert set(DEFS["workload_options"]["properties"]) == set(workloads.DEFAULTS)


def test_every_default_passes_its_schema():
    for tb in ("qemu", "lab"):
        config.validate({"testbeds": {tb: {"options": settings.defaults(tb, SCHEMA)}}}, "settings", ROOT / "x.yaml")


def _c_list(name: str) -> list[str]:
    m = re.search(r"static const char \*const " + name + r"\[\] = \{(.*?)NULL \};", ENGINE, re.S)
    assert m, name
    return re.findall(r'"([a-z_0-9]+)"', m[1])


def test_sim_xen_settings_are_the_simulators():
    assert set(DEFS["sim_xen"]["properties"]) == set(_c_list("xk"))


def _xen_map_keys() -> set[str]:
    fn = next(
        n for n in ast.parse(SCENARIO_PY.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "xen_options"
    )
    d = next(n for n in ast.walk(fn) if isinstance(n, ast.Dict))
    return {k.value for k in d.keys}


def test_variant_sim_settings_are_what_sim_py_reads():
    read = _xen_map_keys() | {"lock", "placement"}  # need(sim, "lock"), need(sim, "placement")
    assert set(DEFS["sim_variant"]["properties"]) == read
    src = _sim_code()
    assert 'need(sim, "lock"' in src and 'need(sim, "placement"' in src


def _read_keys(var: str) -> set[str]:
    """String keys the scenario code reads from the variable `var`: var["k"], var.get("k"),
    "k" in var, need(var, "k")."""
    keys = set()
    for n in ast.walk(ast.parse(_sim_code())):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == var:
            if isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                keys.add(n.slice.value)
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name) and f.value.id == var:
                if n.args and isinstance(n.args[0], ast.Constant):
                    keys.add(n.args[0].value)
            if isinstance(f, ast.Name) and f.id == "need" and isinstance(n.args[0], ast.Name) and n.args[0].id == var:
                keys.add(n.args[1].value)
        elif isinstance(n, ast.Compare) and isinstance(n.comparators[0], ast.Name) and n.comparators[0].id == var:
            if isinstance(n.left, ast.Constant) and isinstance(n.ops[0], ast.In):
                keys.add(n.left.value)
    return keys


def test_sim_workload_keys_are_what_the_builders_read():
    read = _read_keys("wl")
    # the idle guests' timer ticks are read in a loop over these names
    read |= {"idle_tick_ms", "idle_tick_vcpus", "idle_tick_work_us"}
    assert set(DEFS["sim_workload"]["properties"]) == read


def test_lock_types_and_distributions_are_the_simulators():
    lock_types = set(re.findall(r'strcmp\(lt, "([a-z-]+)"\)', ENGINE))
    assert set(DEFS["lock"]["properties"]["type"]["enum"]) == lock_types
    assert set(DEFS["sim_variant"]["properties"]["lock"]["enum"]) == lock_types
    dists = set(re.findall(r'strcmp\(k, "([a-z]+)"\)', ENGINE))
    assert set(DEFS["dist"]["anyOf"][1]["properties"]["dist"]["enum"]) == dists
    assert set(DEFS["dist"]["anyOf"][1]["properties"]) == {"dist", *_c_list("ak")}
    net = set(DEFS["sim_workload"]["properties"]["stream"]["properties"])
    assert net <= set(_c_list("wk")) and set(DEFS["io"]["properties"]) == set(_c_list("ik"))
    assert set(DEFS["lock"]["properties"]) == set(_c_list("lk"))
    assert set(DEFS["sim_workload"]["properties"]["host"]["properties"]) == set(_c_list("hk"))
    assert set(DEFS["sim_workload"]["properties"]["cache"]["properties"]) == set(_c_list("ck"))
    assert set(DEFS["sim_workload"]["properties"]["memory"]["properties"]) == set(_c_list("mk"))


STUDY = yaml.safe_load((ROOT / "config" / "studies" / "s1.yaml").read_text())


@pytest.mark.parametrize(
    "where,value,field",
    [
        (("sim_workload", "duration_s"), -10, "sim_workload.duration_s"),
        (("sim_workload", "stream", "link_mbps"), 0, "sim_workload.stream.link_mbps"),
        (("sim_workload", "pin_cpu"), 99, "sim_workload.pin_cpu"),
        (("sim_workload", "rr", "one_way_us", "dist"), "cauchy", "sim_workload.rr.one_way_us.dist"),
        (("testbeds", "qemu", "options", "smp"), "three", "testbeds.qemu.options.smp"),
        (("testbeds", "qemu", "options", "icount_shift"), 5.5, "testbeds.qemu.options.icount_shift"),
        (("testbeds", "qemu", "options", "trace_pages"), "1024; reboot", "testbeds.qemu.options.trace_pages"),
        (("testbeds", "qemu", "options", "duration_s"), -10, "testbeds.qemu.options.duration_s"),
        (("testbeds", "qemu", "options", "guest_pcpu"), 3, "testbeds.qemu.options.guest_pcpu"),
        (("testbeds", "sim", "options"), {"seed": 1}, "testbeds.sim.options.seed"),
        (("testbeds", "lab", "options"), {"reboot": "never"}, "testbeds.lab.options.reboot"),
        (("variants", "bug", "sim", "yeild"), "noop", "variants.bug.sim.yeild"),
        (("variants", "bug", "sim", "version"), 4.6, "variants.bug.sim.version"),
    ],
)
def test_a_bad_value_names_its_field(tmp_path, where, value, field):
    data = copy.deepcopy(STUDY)
    obj = data
    for k in where[:-1]:
        obj = obj.setdefault(k, {})
    obj[where[-1]] = value
    path = tmp_path / "s1.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(config.ConfigError, match=rf"s1\.yaml:\d+: field {re.escape(field)}: "):
        config.load_study(path)


def test_every_study_passes():
    for p in sorted((ROOT / "config" / "studies").glob("*.yaml")):
        config.load_study(p)
