"""Rules of the repository itself."""

import json
import subprocess
from pathlib import Path

from conftest import BIN, ROOT


def test_notebooks_are_committed_without_outputs():
    nbs = sorted((ROOT / "notebooks").glob("*.ipynb"))
    # one per study with a figure of its own (S2 has two), the generic study notebook, agreement,
    # validation, sensitivity, two mechanism figures
    assert len(nbs) == 12
    for nb in nbs:
        data = json.loads(nb.read_text())
        assert all(
            not c.get("outputs") and c.get("execution_count") is None for c in data["cells"] if c["cell_type"] == "code"
        ), nb
        params = [c for c in data["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(params) == 1, f"{nb}: papermill needs one cell tagged 'parameters'"


def test_dockerfile_lints_clean():
    r = subprocess.run([str(BIN / "hadolint"), str(ROOT / "containers" / "Dockerfile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_snakefile_lints(env_path):
    r = subprocess.run(
        [str(BIN / "snakemake"), "--lint", "text"], cwd=ROOT, capture_output=True, text=True, env=env_path
    )
    # lint findings are advice; the workflow must parse and validate its config
    assert "configuration error" not in r.stderr + r.stdout
    assert "SyntaxError" not in r.stderr


def _imports(pkg_root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (module- and function-level)."""
    import ast

    mods = {}
    for f in pkg_root.rglob("*.py"):
        rel = f.relative_to(pkg_root.parent).with_suffix("")
        mods[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = f
    graph = {m: set() for m in mods}
    for m, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in names:
                # a module importing its own package's face is no cycle
                if t in mods and t != m and not m.startswith(t + "."):
                    graph[m].add(t)
    return graph


def test_no_import_cycles():
    """Imports run one way, downward: no cycle among schedlab's modules."""
    graph = _imports(ROOT / "schedlab")
    cycles, state = [], {}

    def visit(m, path):
        state[m] = "open"
        for t in sorted(graph[m]):
            if state.get(t) == "open":
                cycles.append(path[path.index(t) :] + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_ground_floor_imports_nothing_above_it():
    """config, host and schedlab.core (the vocabulary) import no stage above them."""
    graph = _imports(ROOT / "schedlab")
    ground = {
        m for m in graph if m in ("schedlab", "schedlab.config", "schedlab.host") or m.startswith("schedlab.core")
    }
    for m in sorted(ground):
        assert graph[m] <= ground, f"{m} imports {sorted(graph[m] - ground)}"


# A string that is a study id, or an error label that starts with one ("S0: ..."), is code keyed by
# study id. These few are not: each is a constant of a workload kind whose value happens to spell
# the id of the study that first had the workload, frozen because every sim run's seed derives
# from it (another value would change every run).
STUDY_ID_ALLOWED = {
    ("schedlab/workloads/lockwork.py", "SIM_SEED_TAG"),
    ("schedlab/workloads/lockstorm.py", "SIM_SEED_TAG"),
    ("schedlab/workloads/bursts.py", "SIM_SEED_TAG"),
}


def study_id_strings(path: Path, ids: set[str]) -> list[tuple[int, str]]:
    """(line, string) of each string in a Python file that is a study id (any case) or begins
    with one followed by ':' or ' ' (an error's label); docstrings and the names in
    STUDY_ID_ALLOWED aside."""
    import ast
    import re

    tree = ast.parse(path.read_text())
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            skip.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and (rel, t.id) in STUDY_ID_ALLOWED for t in node.targets
        ):
            skip.add(id(node.value))
    label = re.compile(r"(?i)^(%s)(:| |$)" % "|".join(map(re.escape, sorted(ids, key=len, reverse=True))))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            if label.match(node.value):
                hits.append((node.lineno, node.value))
    return hits


def test_no_code_names_a_study():
    """Code is keyed by workload kind, never by study id: no string of the package, the workflow's
    Python, the benchmarks or a notebook that serves any study is a study id or a label made of one.
    A study's own notebook (notebooks/ID.py) may name its study: its file name does."""
    ids = {p.stem for p in (ROOT / "config" / "studies").glob("*.yaml")}
    assert {"s0", "s1"} <= ids
    files = [
        *sorted((ROOT / "schedlab").rglob("*.py")),
        *sorted((ROOT / "benchmarks").glob("*.py")),
        *sorted((ROOT / "workflow" / "scripts").glob("*.py")),
        *(p for p in sorted((ROOT / "notebooks").glob("*.py")) if p.stem not in ids),
    ]
    found = [f"{f.relative_to(ROOT)}:{ln}: {s[:60]!r}" for f in files for ln, s in study_id_strings(f, ids)]
    assert not found, "code names a study id:\n" + "\n".join(found)
    # the rules of the workflow (Snakemake, not Python): a quoted study id
    import re

    quoted = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, sorted(ids, key=len, reverse=True))), re.I)
    smk = [
        f"{p.relative_to(ROOT)}:{i}: {ln.strip()[:60]}"
        for p in sorted((ROOT / "workflow").rglob("*.smk")) + [ROOT / "workflow" / "Snakefile"]
        for i, ln in enumerate(p.read_text().splitlines(), 1)
        if quoted.search(ln.split("#", 1)[0])
    ]
    assert not smk, "a workflow rule names a study id:\n" + "\n".join(smk)


def test_the_study_id_check_can_fail(tmp_path):
    """The check above finds what it looks for: a study id as a key, an argument and a label (not
    in a docstring)."""
    f = tmp_path / "probe.py"
    f.write_text(
        '"""S0: a docstring, prose."""\nif study["study"] == "s0":\n    x = {"S2": 1}\n    raise ValueError(f"S4: {x}")\n'
    )
    got = [s for _, s in study_id_strings(f, {"s0", "s2", "s4"})]
    assert got == ["s0", "S2", "S4: "], got


def record_writer_uses(path: Path) -> list[int]:
    """Lines of a Python file that reach the store's record writer (schedlab.store.write_record)
    by any name: `store.write_record`, `schedlab.store.write_record`, or the function imported
    from schedlab.store under any alias."""
    import ast

    tree = ast.parse(path.read_text())
    modules, names = set(), set()  # what names the store module, what names its writer
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "schedlab":
            modules |= {a.asname or a.name for a in node.names if a.name == "store"}
        elif isinstance(node, ast.ImportFrom) and node.module == "schedlab.store":
            names |= {a.asname or a.name for a in node.names if a.name == "write_record"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "schedlab.store" and a.asname}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "write_record":
            v = node.value
            if (isinstance(v, ast.Name) and v.id in modules) or (
                isinstance(v, ast.Attribute)
                and v.attr == "store"
                and isinstance(v.value, ast.Name)
                and v.value.id == "schedlab"
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in names and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return sorted(lines)


def test_one_record_writer():
    """Every raw record is written by the run stage's one writer (schedlab.run.write_record: the
    study runs, the sensitivity sweep, the validation's mirror runs, the benchmark packs): no
    other module of the package reaches the store's writer."""
    uses = {
        p.relative_to(ROOT).as_posix(): record_writer_uses(p)
        for p in sorted((ROOT / "schedlab").rglob("*.py"))
        if record_writer_uses(p)
    }
    assert list(uses) == ["schedlab/run.py"] and len(uses["schedlab/run.py"]) == 1, uses
    import ast

    run = ast.parse((ROOT / "schedlab" / "run.py").read_text())
    (writer,) = [n for n in run.body if isinstance(n, ast.FunctionDef) and n.name == "write_record"]
    assert writer.lineno <= uses["schedlab/run.py"][0] <= writer.end_lineno  # inside run.write_record
    for mod in ("run.py", "packrun.py"):  # the runners and the packs call it
        assert "write_record(" in (ROOT / "schedlab" / mod).read_text().split("def write_record", 1)[-1]


def test_the_record_writer_check_can_fail(tmp_path):
    """The check above finds a second writer by each way of naming the store's."""
    f = tmp_path / "probe.py"
    f.write_text(
        "from schedlab import store as st\n"
        "st.write_record(f, r)\n"
        "from schedlab.store import write_record as w\n"
        "w(f, r)\n"
        "import schedlab.store\n"
        "schedlab.store.write_record(f, r)\n"
        "from schedlab import run\n"
        "run.write_record(f, r)\n"
        "keep = st.write_record\n"
    )
    assert record_writer_uses(f) == [2, 4, 6, 9]


# what runs a simulator or a testbed, or writes records: the report stage imports none of them
MEASURING = {"run", "run_sim_case", "run_scenario", "MirrorTestbed", "SnapshotSim", "PointRunner", "sweep",
             "check_binary", "write_record", "run_study"}  # fmt: skip


def measuring_imports(path: Path) -> list[str]:
    """What a Python file imports that measures: a testbed or the testing hosts, the run stage's
    runner (schedlab.run), a process runner (subprocess), or a name in MEASURING."""
    import ast

    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""]
            out += [f"{node.lineno}: {a.name}" for a in node.names if a.name in MEASURING]
            if node.module == "schedlab":
                mods += [f"schedlab.{a.name}" for a in node.names]
        for m in mods:
            if m == "subprocess" or m == "schedlab.run" or m.startswith(("schedlab.testbeds", "schedlab.testing")):
                out.append(f"{node.lineno}: {m}")
    return out


def test_the_report_stage_does_not_measure():
    """The report stage reads records: no module of schedlab/report runs the simulator, a
    testbed or a process, or writes a record (the validation's and the sensitivity sweep's sim
    runs are the run stage's: schedlab.mirror, schedlab.sweep)."""
    found = {
        p.relative_to(ROOT).as_posix(): measuring_imports(p)
        for p in sorted((ROOT / "schedlab" / "report").rglob("*.py"))
        if measuring_imports(p)
    }
    assert not found, found


def test_the_report_stage_check_can_fail(tmp_path):
    f = tmp_path / "probe.py"
    f.write_text(
        "import subprocess\n"
        "from schedlab.mirror import load, run_sim_case\n"
        "from schedlab import run, store\n"
        "from schedlab.testbeds.sim import ensure_binary\n"
    )
    assert measuring_imports(f) == [
        "1: subprocess",
        "2: run_sim_case",
        "3: run",
        "3: schedlab.run",
        "4: schedlab.testbeds.sim",
    ]
