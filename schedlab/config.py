"""Load and validate the pipeline config and the study files.

Everything is checked against the JSON Schemas in workflow/schemas (draft
2020-12) before any run starts; an error names the file, the field and, where
the YAML has it, the line."""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import re
from pathlib import Path
from typing import Any

import yaml

from schedlab.core import inputs, settings


def _project_root() -> Path:
    """The project folder: this checkout when the package runs from one (an editable install);
    installed from a wheel, the nearest folder from the working directory up holding
    config/studies/, else the copy of the project's files the wheel carries (schedlab/_project)."""
    here = Path(__file__).resolve().parent
    checkout = here.parent
    if (checkout / "workflow" / "schemas").is_dir() and (checkout / "config" / "studies").is_dir():
        return checkout
    cwd = Path.cwd()
    for d in (cwd, *cwd.parents):
        if (d / "config" / "studies").is_dir():
            return d
    return here / "_project"


ROOT = _project_root()
# a project folder without the schemas (a copy of config/ only) validates against the wheel's
SCHEMAS = ROOT / "workflow" / "schemas"
if not SCHEMAS.is_dir():
    SCHEMAS = Path(__file__).resolve().parent / "_project" / "workflow" / "schemas"
STUDIES_DIR = ROOT / "config" / "studies"


class ConfigError(Exception):
    """Bad configuration: the message names the file and field."""


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _line_of(node: yaml.Node | None, path: list) -> int | None:
    """Line (1-based) of the YAML node at `path`, or of its deepest existing parent."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in path:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line


def _field(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


# The one YAML reader (YAML 1.2 numbers, duplicate keys, alias and depth limits, bounded
# regular files): schedlab.core.inputs; its problems are ConfigErrors here.
Loader, FastLoader, MAX_DEPTH = inputs.Loader, inputs.FastLoader, inputs.MAX_DEPTH


def load_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """(data, root node) of a YAML file; every problem is a one-line ConfigError naming the
    file and, where there is one, the line."""
    try:
        return inputs.load_yaml(path)
    except inputs.InputError as e:
        raise ConfigError(str(e)) from None


@functools.cache
def _ecma_pattern(pattern: str) -> str:
    """A schema pattern with JSON Schema's (ECMA-262) `$`, end of input, as Python's `\\Z`:
    Python's `$` also matches before a final newline, so 'bug\\n' would pass '^[a-z]+$'."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append("\\Z" if c == "$" and not in_class else c)
        i += 1
    return "".join(out)


def _pattern(validator, pattern, instance, schema):
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not re.search(_ecma_pattern(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _strict_integer(checker, instance) -> bool:
    """JSON Schema's integer includes 10.0; a count, a port or a seed written 10.0 (or
    `!!float 10`) is a mistake that would reach range() as a float: only ints are integers."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _validator_class():
    from jsonschema import Draft202012Validator, validators

    return validators.extend(
        Draft202012Validator,
        {"pattern": _pattern},
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _strict_integer),
    )


def validate(data: Any, schema_name: str, path: Path, node: yaml.Node | None = None) -> None:
    validator = _validator_class()(_schema(schema_name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = []
        for e in errors[:10]:
            p = list(e.absolute_path)
            # an unknown key is reported on its parent; name the key itself
            if e.validator == "additionalProperties" and isinstance(e.instance, dict):
                extra = [k for k in e.instance if k not in e.schema.get("properties", {})]
                if extra:
                    p = p + [extra[0]]
            elif e.validator == "enum" and "propertyNames" in e.schema_path:  # a key not in the list
                p = p + [e.instance]
            p = list(_chosen(e).absolute_path) if e.validator in ("anyOf", "oneOf") else p
            line = _line_of(node, p)
            loc = f"{path}:{line}" if line else str(path)
            lines.append(f"{loc}: field {_field(p)}: {_short(e)}")
        raise ConfigError("\n".join(lines))


def _wrong_type(e) -> bool:
    """An error that only says the value is of another type (for every alternative)."""
    return e.validator == "type" or (e.validator in ("anyOf", "oneOf") and all(map(_wrong_type, e.context)))


def _types(e) -> list:
    return [e.validator_value] if e.validator == "type" else [t for c in e.context for t in _types(c)]


def _fits(e) -> list:
    """The errors of an anyOf/oneOf's alternatives that accept the value's type (an
    alternative that also says the value has the wrong type does not fit)."""
    alts: dict = {}
    for c in e.context:
        alts.setdefault(c.relative_schema_path[0], []).append(c)
    return [
        c
        for errs in alts.values()
        if not any(_wrong_type(x) and not x.relative_path for x in errs)
        for c in errs
        if not _wrong_type(c)
    ]


def _chosen(e):
    """The error that says what is wrong: for an anyOf/oneOf, the one of the alternative
    that fits the value's type (deepest first: `dist: cauchy` rather than the distribution)."""
    while e.validator in ("anyOf", "oneOf") and e.context:
        fits = _fits(e)
        if not fits:
            break
        e = min(fits, key=lambda c: len(c.relative_path)) if len(fits) > 1 else fits[0]
    return e


def _short(e) -> str:
    if e.validator in ("anyOf", "oneOf") and e.context:
        # the alternative for the value's type says what is wrong, else name the types allowed
        if _fits(e):
            return _short(_chosen(e))
        types = dict.fromkeys(str(t) for c in e.context for t in _types(c))
        return f"{e.instance!r} is not of type {' or '.join(map(repr, types))}"
    if e.validator == "not":
        return f"{e.instance!r} is not allowed ({e.schema.get('description', 'a forbidden form')})"
    if e.validator == "pattern":
        return f"{e.instance!r} is not allowed (must match {e.validator_value}; {e.schema.get('description', 'no special characters')})"
    if e.validator == "additionalProperties" or (e.validator == "enum" and "propertyNames" in e.schema_path):
        return "unknown field"
    return e.message


def _semantic_checks(study: dict, path: Path, node) -> None:
    def fail(field_path, msg):
        line = _line_of(node, field_path)
        raise ConfigError(f"{path}:{line}: field {_field(field_path)}: {msg}")

    if study["study"] != path.stem:
        fail(["study"], f"is {study['study']!r} but the file is named {path.name}")
    variants = study["variants"]
    if study["baseline"] not in variants:
        fail(["baseline"], f"unknown variant {study['baseline']!r} (variants: {', '.join(variants)})")
    for name, v in variants.items():
        if "baseline" in v and v["baseline"] not in variants:
            fail(["variants", name, "baseline"], f"unknown variant {v['baseline']!r}")
    # run-time credit1 parameters persist in a boot: a variant that shares one with another
    # must set every parameter any of them sets, or it would run with the previous one's
    set_keys = {k for v in variants.values() for k in ((v.get("xen") or {}).get("sched_credit") or {})}
    for name, v in variants.items():
        missing = sorted(set_keys - set((v.get("xen") or {}).get("sched_credit") or {}))
        if missing:
            fail(
                ["variants", name],
                f"sets no xen.sched_credit {', '.join(missing)} that other variants set at run time "
                "(a shared boot would keep the previous run's value)",
            )
    # a point's id is its values as text: 1 and "1" would be two points with one id (one record name)
    for where, axes in [(["axes"], study["axes"])] + [
        (["testbeds", tb, "axes"], over["axes"]) for tb, over in study["testbeds"].items() if "axes" in over
    ]:
        for axis, values in axes.items():
            seen: dict = {}
            for j, v in enumerate(values):
                if str(v) in seen:
                    fail(
                        [*where, axis, j],
                        f"{v!r} has the point id of {values[seen[str(v)]]!r} (values are unique as text)",
                    )
                seen[str(v)] = j
    for i, m in enumerate(study["metrics"]):
        for axis, want in (m.get("when") or {}).items():
            if axis not in study["axes"]:
                fail(["metrics", i, "when", axis], f"unknown axis (study axes: {', '.join(study['axes'])})")
            bad = [w for w in (want if isinstance(want, list) else [want]) if w not in study["axes"][axis]]
            if bad:
                fail(["metrics", i, "when", axis], f"{bad[0]!r} is not a value of axis {axis}")
        for j, tb in enumerate(m.get("testbeds") or []):
            if tb not in study["testbeds"]:
                fail(
                    ["metrics", i, "testbeds", j],
                    f"testbed {tb!r} is not one of the study's (testbeds: {', '.join(study['testbeds'])})",
                )
    for tb, over in study["testbeds"].items():
        unit = over.get("unit", DEFAULT_UNIT[tb])
        if unit == "boot" and tb == "sim":
            fail(["testbeds", tb, "unit"], "the sim has no boots: its unit is the run (one seed each)")
        if unit != "boot":
            for k in ("boot_plan", "runs_per_boot"):
                if k in over:
                    fail(["testbeds", tb, k], f"applies where the unit is the boot (unit is {unit!r})")
        if over.get("boot_plan") == "variant-round" and over.get("order", "variant-blocks") != "variant-blocks":
            fail(
                ["testbeds", tb, "boot_plan"], "variant-round needs order variant-blocks (a variant's points together)"
            )
        if over.get("runs_per_boot", 1) > 1 and over.get("analysis") == "paired":
            fail(["testbeds", tb, "runs_per_boot"], "a paired analysis pairs one run of each variant per boot")
        if unit == "boot" and over.get("analysis") == "paired":
            # pairs are the variants of one boot: they must boot the same thing
            if over.get("boot_plan") == "variant-round":
                fail(
                    ["testbeds", tb, "analysis"],
                    "paired needs boot_plan round (the variants of a round share its boot)",
                )
            booted = {
                v: json.dumps(
                    [(variants[v].get("xen") or {}).get(k) for k in ("patches", "boot")] + [variants[v].get("kernel")]
                )
                for v in (over.get("variants") or variants)
            }
            if len(set(booted.values())) > 1:
                fail(
                    ["testbeds", tb, "analysis"],
                    "paired needs variants that share a boot (the same xen.patches, xen.boot and kernel); "
                    f"{', '.join(sorted(booted))} differ",
                )
        for axis in over.get("axes", {}):
            if axis not in study["axes"]:
                fail(["testbeds", tb, "axes", axis], f"unknown axis (study axes: {', '.join(study['axes'])})")
        subset = over.get("variants")
        if subset is not None:
            for j, v in enumerate(subset):
                if v not in variants:
                    fail(["testbeds", tb, "variants", j], f"unknown variant {v!r} (variants: {', '.join(variants)})")
            for v in subset:
                base = variants[v].get("baseline", study["baseline"])
                if base not in subset:
                    fail(["testbeds", tb, "variants"], f"{v!r} is compared with {base!r}, which is not in the list")
    claim = study.get("claim") or {}
    for key in ("variant", "reference"):
        v = (claim.get("control") or {}).get(key)
        if v is not None and v not in variants:
            fail(["claim", "control", key], f"unknown variant {v!r} (variants: {', '.join(variants)})")
    for i, part in enumerate(claim.get("parts") or []):
        for key in ("variant", "reference"):
            if key in part and part[key] not in variants:
                fail(["claim", "parts", i, key], f"unknown variant {part[key]!r} (variants: {', '.join(variants)})")
        names = {m["name"] for m in study["metrics"]}
        for j, m in enumerate(part["metrics"]):
            if m not in names:
                fail(["claim", "parts", i, "metrics", j], f"unknown metric {m!r} (metrics: {', '.join(sorted(names))})")
        if part["direction"] == "equivalent" and not (
            part.get("equivalent_within_pct") or study.get("equivalence_margin_pct")
        ):
            fail(["claim", "parts", i], "direction equivalent needs equivalent_within_pct (or equivalence_margin_pct)")
        if part["direction"] != "equivalent" and "equivalent_within_pct" in part:
            fail(["claim", "parts", i, "equivalent_within_pct"], "only a part with direction equivalent has a margin")
        where = part.get("where", "all")
        if isinstance(where, dict):
            for axis in where:
                if axis not in study["axes"]:
                    fail(["claim", "parts", i, "where", axis], f"unknown axis (study axes: {', '.join(study['axes'])})")


def _not_json(obj: Any, path: list) -> tuple[list, str] | None:
    """(path, why) of the first value JSON cannot hold, or None."""
    if isinstance(obj, dict):
        try:
            sorted(obj)
        except TypeError:
            return path, "keys of mixed types"
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool, type(None))):
                return path + [k], f"a {type(k).__name__} key"
            bad = _not_json(v, path + [k])
            if bad:
                return bad
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            bad = _not_json(v, path + [i])
            if bad:
                return bad
    elif not isinstance(obj, (str, int, float, bool, type(None))):
        return path, f"a {type(obj).__name__} value"
    return None


def load_study(name_or_path: str | Path) -> dict:
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = STUDIES_DIR / f"{name_or_path}.yaml"
        # a name, not a path: '../config' must not reach config/config.yaml
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", str(name_or_path)) or not path.is_file():
            known = ", ".join(sorted(p.stem for p in STUDIES_DIR.glob("*.yaml")))
            raise ConfigError(f"{path}: no such study {name_or_path!r} (known: {known})")
    data, node = load_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: empty study file")
    validate(data, "study", path, node)
    _semantic_checks(data, path, node)
    # testbed options and simulator settings, by their own schema (schedlab/core/settings.py)
    validate(data, "settings", path, node)
    for field_path, msg in settings.problems(data, _schema("settings"))[:1]:
        raise ConfigError(f"{path}:{_line_of(node, field_path)}: field {_field(field_path)}: {msg}")
    # run definitions are hashed as JSON: free-form sections must not hold dates, sets, mixed keys
    bad = _not_json(data, [])
    if bad:
        raise ConfigError(f"{path}:{_line_of(node, bad[0])}: field {_field(bad[0])}: {bad[1]} (not JSON data)")
    data["_file"] = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    data["_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return data


def load_config(path: str | Path = ROOT / "config" / "config.yaml") -> dict:
    path = Path(path)
    data, node = load_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: empty configuration file")
    validate(data, "config", path, node)
    for i, s in enumerate(data["studies"]):
        if not (STUDIES_DIR / f"{s}.yaml").exists():
            line = _line_of(node, ["studies", i])
            raise ConfigError(f"{path}:{line}: field studies.{i}: no study file config/studies/{s}.yaml")
    return data


def study_of_kind(kind: str) -> dict:
    """The first study of the study list (config/config.yaml) whose workload is of `kind`
    (workload.kind): code that needs one workload's study names the kind, never a study id."""
    names = load_config()["studies"]
    for name in names:
        study = load_study(name)
        if (study.get("workload") or {}).get("kind") == kind:
            return study
    raise ConfigError(f"config/config.yaml: field studies: no study of workload kind {kind!r} ({', '.join(names)})")


# --- derived views of a study -------------------------------------------------


def testbed_settings(study: dict, testbed: str) -> dict:
    """Axes, runs, warm-ups, retries for one testbed: the study's, overridden per testbed."""
    over = study["testbeds"].get(testbed)
    if over is None:
        raise ConfigError(
            f"{study['_file']}: field testbeds.{testbed}: study {study['study']} does not run on {testbed}"
        )
    return {
        "axes": {**study["axes"], **over.get("axes", {})},
        "runs": over.get("runs", study["runs"]),
        "warmup": over.get("warmup", study["warmup"]),
        "retries": over.get("retries", study.get("retries", 2)),
        "timeout_s": over.get("timeout_s"),
        # Real hosts reboot to change variant: keep a variant's points together within a round.
        "order": over.get("order", "shuffled" if testbed == "sim" else "variant-blocks"),
        # the variants this testbed runs and reports (default: all of the study's)
        "variants": list(over.get("variants") or study["variants"]),
        # declared before measuring: "paired" pairs the variants' runs of one round (one boot)
        "analysis": over.get("analysis", "welch"),
        "options": dict(over.get("options") or {}),
        # the experimental unit and how run-study makes units (docs/statistics.md)
        "unit": over.get("unit", DEFAULT_UNIT[testbed]),
        "boot_plan": over.get("boot_plan", "round"),
        "runs_per_boot": over.get("runs_per_boot", 1),
    }


# Runs inside one boot of a host (emulated or real) share its state, so they are not
# independent: there the boot is the replicate. The sim's runs each have their own seed.
DEFAULT_UNIT = {"sim": "run", "qemu": "boot", "lab": "boot"}
# A comparison on a testbed whose unit is the boot rests on at least this many boots per
# variant, or its cell says it cannot be tested (tables, verdicts).
MIN_BOOTS = 5


def claim_decisions(study: dict) -> dict | None:
    """What of the study's claim decides a verdict (parts with their margins, the testbeds
    that cannot test it), without its prose: part of every testbed's registered design."""
    claim = study.get("claim")
    if not claim:
        return None
    margin = study.get("equivalence_margin_pct")
    parts = []
    for p in claim["parts"]:
        q = {k: v for k, v in p.items() if k != "label"}
        if q["direction"] == "equivalent":
            q.setdefault("equivalent_within_pct", margin)
        parts.append(q)
    out = {"parts": parts, "untestable": sorted(claim.get("untestable") or {})}
    if claim.get("control"):  # only where set, so the designs of claims without one keep their hash
        out["control"] = claim["control"]
    return out


def design(study: dict, testbed: str) -> dict:
    """A study's design on one testbed, as it must be committed before the first
    confirmatory run and never change after (docs/workflow.md, "Registration"): the unit and
    boot plan, runs, warm-ups, run order, analysis, the power analysis, options, axes,
    variants, the claim's decisions. A record carries its hash (`design_hash`); `schedlab
    dataset` uses only records whose design is today's."""
    s = testbed_settings(study, testbed)
    return {
        "unit": s["unit"],
        "boot_plan": s["boot_plan"] if s["unit"] == "boot" else None,
        "runs_per_boot": s["runs_per_boot"] if s["unit"] == "boot" else None,
        "runs": s["runs"],
        "warmup": s["warmup"],
        "order": s["order"],
        "analysis": s["analysis"],
        "power": copy.deepcopy((study["testbeds"].get(testbed) or {}).get("design")),
        "options": copy.deepcopy(s["options"]),
        "axes": copy.deepcopy(s["axes"]),
        "variants": s["variants"],
        "claim": claim_decisions(study),
    }


def design_hash(study: dict, testbed: str) -> str:
    return sha256(design(study, testbed))


def points(study: dict, testbed: str) -> list[dict]:
    axes = testbed_settings(study, testbed)["axes"]
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def claim_points(study: dict, testbed: str, where) -> list[dict]:
    """The points of a claim's part (`where:` in the study file's claim): all, top (the last),
    first, rest (all but the first), or {axis: [values]} (those of them the testbed runs)."""
    pts = points(study, testbed)
    if where == "all":
        return pts
    if where == "top":
        return pts[-1:]
    if where == "first":
        return pts[:1]
    if where == "rest":
        return pts[1:]
    if isinstance(where, dict):
        return [p for p in pts if all(p.get(a) in vals for a, vals in where.items())]
    raise ValueError(f"unknown point selection {where!r}")


def metric_applies(metric: dict, point: dict, testbed: str | None = None) -> bool:
    """A metric with `when: {axis: value(s)}` belongs only to the points that match
    (S2 native: pgbench_tps only where bench=pgbench); one with `testbeds: [...]` only to
    those testbeds (checked when `testbed` is given)."""
    if testbed is not None and testbed not in (metric.get("testbeds") or [testbed]):
        return False
    for axis, want in (metric.get("when") or {}).items():
        values = want if isinstance(want, list) else [want]
        if point.get(axis) not in values and str(point.get(axis)) not in map(str, values):
            return False
    return True


def metrics_for(study: dict, point: dict, testbed: str | None = None) -> list[dict]:
    """The study's metrics that a run at `point` (on `testbed`) must report."""
    return [m for m in study["metrics"] if metric_applies(m, point, testbed)]


def for_testbed(study: dict, testbed: str) -> dict:
    """The study as one testbed sees it: only the metrics that exist there (`testbeds:`)
    and the variants it runs (`testbeds.<tb>.variants`). Tables, comparisons and notebooks
    work on this view."""
    out = dict(study)
    out["metrics"] = [m for m in study["metrics"] if testbed in (m.get("testbeds") or [testbed])]
    keep = testbed_settings(study, testbed)["variants"]
    out["variants"] = {v: d for v, d in study["variants"].items() if v in keep}
    return out


def point_id(point: dict) -> str:
    """File-name-safe id of a point, e.g. {'vms': 3} -> 'vms-3'."""
    return "_".join(f"{k}-{point[k]}" for k in point)


def parse_point_args(study: dict, testbed: str, items: list[str]) -> dict:
    """`--point vms=3` -> {'vms': 3}, typed and checked against the study's axes."""
    axes = testbed_settings(study, testbed)["axes"]
    point: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or key not in axes:
            raise ConfigError(f"--point {item!r}: expected AXIS=VALUE with AXIS one of {', '.join(axes)}")
        if key in point:
            raise ConfigError(f"--point {item!r}: axis {key} given twice")
        match = [v for v in axes[key] if str(v) == raw]
        if not match:
            raise ConfigError(
                f"--point {item!r}: {raw!r} is not a value of axis {key} ({', '.join(map(str, axes[key]))})"
            )
        point[key] = match[0]
    missing = [a for a in axes if a not in point]
    if missing:
        raise ConfigError(f"--point: missing value for axis {', '.join(missing)} of study {study['study']}")
    return {a: point[a] for a in axes}


def definition(study: dict, testbed: str, variant: str, point: dict) -> dict:
    """What a run measures. Its hash is part of the run key: change any of it and
    new runs are made (old records stay); the number of runs is not part of it,
    so adding runs reuses the existing records."""
    if variant not in study["variants"]:
        raise ConfigError(
            f"{study['_file']}: field variants: unknown variant {variant!r} (known: {', '.join(study['variants'])})"
        )
    d = {
        "study": study["study"],
        "testbed": testbed,
        "variant": copy.deepcopy({k: v for k, v in study["variants"][variant].items() if k != "label"}),
        "point": point,
        "metrics": [m["name"] for m in study["metrics"]],
        "workload": study.get("workload", {}),
        "sim_workload": study.get("sim_workload", {}) if testbed == "sim" else {},
    }
    options = (study["testbeds"].get(testbed) or {}).get("options")
    if options:  # only when set, so definitions (and run keys) without options are unchanged
        d["testbed_options"] = copy.deepcopy(options)
    return d


def canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sha256(obj: Any) -> str:
    return hashlib.sha256(canonical(obj)).hexdigest()
