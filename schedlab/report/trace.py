"""`schedlab trace TABLE CELL`: from one number of the paper to the runs, builds
and hosts behind it, read from the table's sidecar and the raw records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from schedlab import store


def _sidecar(table: str, paper_dir: Path) -> dict:
    study, _, testbed = table.partition("-")
    path = paper_dir / "generated" / study / f"{testbed}-cells.json"
    if not testbed or not path.exists():
        known = sorted(
            f"{p.parent.name}-{p.name.removesuffix('-cells.json')}"
            for p in (paper_dir / "generated").glob("*/*-cells.json")
        )
        raise KeyError(f"no table {table!r} (tables: {', '.join(known) or 'none yet: run make paper'})")
    return json.loads(path.read_text())


def _find_cell(side: dict, cell: str) -> tuple[str, dict]:
    if cell in side["cells"]:
        return cell, side["cells"][cell]
    # comparisons outside the table (the notebooks' checks): `checks/NAME/VARIANT/POINT/METRIC`
    checks = side.get("checks") or {}
    if cell.removeprefix("checks/") in checks:
        return cell, checks[cell.removeprefix("checks/")]
    if "," in cell:
        r, c = (int(x) for x in cell.split(","))
        for k, v in side["cells"].items():
            if v["row"] == r and v["col"] == c:
                return k, v
    raise KeyError(f"no cell {cell!r} in table {side['table']} (run `schedlab trace {side['table']}` for the list)")


def trace(table: str, cell: str | None, paper_dir: Path, data_dir: Path, as_json: bool = False, out=sys.stdout) -> int:
    side = _sidecar(table, paper_dir)
    if cell is None:
        print(f"table {side['table']} (raw data sha256:{side['data_hash']}); cells:", file=out)
        for k, v in sorted(side["cells"].items(), key=lambda kv: (kv[1]["row"], kv[1]["col"])):
            print(f"  {k:<40} {v['row']},{v['col']}  {v['text']}", file=out)
        return 0
    key, c = _find_cell(side, cell)
    folder = store.raw_dir(data_dir, side["testbed"], side["study"])
    groups = [("runs", c["runs"])] + ([("baseline runs", c["baseline_runs"])] if "baseline_runs" in c else [])
    metric = c.get("metric") or key.split("/")[2]
    report = {
        "table": side["table"],
        "cell": key,
        "row": c.get("row"),
        "col": c.get("col"),
        "text": c["text"],
        "value": c["value"],
        "how": c["stat"],
        "data_hash": side["data_hash"],
        "groups": {},
    }
    for name, ids in groups:
        rows = []
        for rid in ids:
            rec = store.read_record(folder / f"{rid}.json")
            problems = store.check_record(folder / f"{rid}.json", rec)
            p = rec["provenance"]
            rows.append(
                {
                    "run_id": rid,
                    "file": str(folder / f"{rid}.json"),
                    "variant": rec["variant"],
                    "point": rec["point"],
                    "repetition": rec["repetition"],
                    "seed": rec["seed"],
                    "value": rec["metrics"].get(metric),
                    "started": rec["started"],
                    "run_order": rec["run_order"]["index"],
                    "build_id": p["build_id"],
                    "testbed": p["testbed"],
                    "host": p["host"].get("hostname"),
                    "repo_commit": p["repo_commit"],
                    "checksum_ok": not problems,
                }
            )
        report["groups"][name] = rows
    if as_json:
        json.dump(report, out, indent=1, sort_keys=True)
        print(file=out)
        return 0
    where = f"row {c['row']}, col {c['col']}" if "row" in c else f"check {c.get('check')}, not a table cell"
    print(f"{side['table']} cell {key} ({where}): {c['text']}", file=out)
    print(f"  value {c['value']}: {c['stat']}", file=out)
    print(f"  raw data behind the table: sha256:{side['data_hash']}", file=out)
    for name, rows in report["groups"].items():
        print(f"  {name} ({len(rows)}):", file=out)
        for r in rows:
            print(
                f"    {r['run_id']}  {metric}={r['value']}  seed={r['seed']}  order={r['run_order']}  "
                f"build={r['build_id'][:16]}  host={r['host']}  commit={r['repo_commit'][:12]}"
                f"{'' if r['checksum_ok'] else '  CHECKSUM MISMATCH'}",
                file=out,
            )
    tbs = {json.dumps(r["testbed"], sort_keys=True) for rows in report["groups"].values() for r in rows}
    for t in sorted(tbs):
        print(f"  testbed: {t}", file=out)
    return 0
