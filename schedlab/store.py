"""Raw data: one JSON record per run, written atomically and once.

A record is written to a temporary file in the destination folder, fsynced,
then hard-linked to its final name (link(2) fails if the name exists, so a
record can never be overwritten) and the temporary name removed. A killed
writer leaves at most a `.tmp-*` file, which is never read as data and is
swept on the next write to that folder.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

from schedlab.config import SCHEMAS, canonical

FORMAT = "schedlab-run/1"


class RecordError(Exception):
    pass


def checksum(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "checksum"}
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def _validator():
    from jsonschema import Draft202012Validator
    return Draft202012Validator(json.loads((SCHEMAS / "record.schema.json").read_text()),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def raw_dir(data_dir: Path, testbed: str, study: str) -> Path:
    return Path(data_dir) / "raw" / testbed / study


def sweep_partial(folder: Path) -> list[Path]:
    """Remove temporary files a killed writer left behind (never complete records)."""
    gone = []
    for tmp in Path(folder).glob(".tmp-*"):
        tmp.unlink(missing_ok=True)
        gone.append(tmp)
    return gone


def write_record(folder: Path, record: dict) -> Path:
    record = dict(record)
    record["checksum"] = checksum(record)
    errors = list(_validator().iter_errors(record))
    if errors:
        e = errors[0]
        raise RecordError(f"record {record.get('run_id')}: field {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{record['run_id']}.json"
    data = json.dumps(record, indent=1, sort_keys=True).encode() + b"\n"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise RecordError(f"{final}: exists; raw records are never overwritten") from None
    finally:
        os.unlink(tmp)
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def read_record(path: Path) -> dict:
    path = Path(path)
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RecordError(f"{path}: unreadable: {e}") from None
    if not isinstance(rec, dict):
        raise RecordError(f"{path}: not a JSON object")
    return rec


def check_record(path: Path, rec: dict, validator=None) -> list[str]:
    """Problems with one record (empty list: fine)."""
    problems = []
    validator = validator or _validator()
    for e in sorted(validator.iter_errors(rec), key=lambda e: list(map(str, e.absolute_path)))[:5]:
        problems.append(f"field {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}")
    if "checksum" in rec and rec["checksum"] != checksum(rec):
        problems.append(f"checksum mismatch: record says {rec['checksum']}, content is {checksum(rec)}")
    if rec.get("run_id") and path.name not in (f"{rec['run_id']}.json",):
        problems.append(f"file name does not match run_id {rec['run_id']!r}")
    return problems


def iter_records(folder: Path) -> Iterator[Path]:
    yield from sorted(p for p in Path(folder).rglob("*.json") if not p.name.startswith("."))


def verify(data_dir: Path) -> dict[str, list[str]]:
    """Check every raw record under DATA_DIR/raw: schema, checksum, no duplicates.
    Returns {file: [problems]} for files with problems."""
    root = Path(data_dir) / "raw"
    if not root.is_dir():
        return {str(root): ["no raw data folder"]}
    validator = _validator()
    problems: dict[str, list[str]] = {}
    seen: dict[tuple, Path] = {}
    for path in iter_records(root):
        try:
            rec = read_record(path)
        except RecordError as e:
            problems[str(path)] = [str(e).split(": ", 1)[1]]
            continue
        p = check_record(path, rec, validator)
        if rec.get("status") == "ok" and "run_key" in rec:
            key = (rec["run_key"],)
            if key in seen:
                p.append(f"duplicate of {seen[key]} (same run key)")
            else:
                seen[key] = path
        if p:
            problems[str(path)] = p
    for tmp in root.rglob(".tmp-*"):
        problems[str(tmp)] = ["partial write left by a killed run (not data; removed by the next run)"]
    return problems
