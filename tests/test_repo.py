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
