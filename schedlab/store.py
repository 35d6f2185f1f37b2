"""Raw data: one JSON record per run, written atomically and once.

A record is written to a temporary file in the destination folder, fsynced,
then hard-linked to its final name (link(2) fails if the name exists, so a
record can never be overwritten) and the temporary name removed. The writer
holds an flock on its temporary file, named `.tmp-HOST-PID-*`, until then; a
killed writer leaves at most that file, which is never read as data and is
swept by the next run in that folder. The sweep removes only files whose
writer is gone (no lock held, and not a live process of this host), so
concurrent runs in one study folder never lose each other's records.

Records are strict JSON (no NaN or infinities), get the mode the umask allows,
and a failed write (a full disk) leaves no file behind and raises RecordError.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import math
import os
import re
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from schedlab import integrity
from schedlab.config import SCHEMAS, canonical, sha256
from schedlab.core import inputs

FORMAT = "schedlab-run/1"
TMP_PREFIX = ".tmp-"


class RecordError(Exception):
    pass


class RecordExists(RecordError):
    """The record's name is taken: raw records are never overwritten."""


def checksum(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "checksum"}
    return "sha256:" + hashlib.sha256(canonical(body)).hexdigest()


def _validator():
    from jsonschema import Draft202012Validator

    return Draft202012Validator(
        json.loads((SCHEMAS / "record.schema.json").read_text()), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def raw_dir(data_dir: Path, testbed: str, study: str) -> Path:
    return Path(data_dir) / "raw" / testbed / study


def run_key_of(
    definition_hash: str,
    build_id: str,
    repetition: int,
    base_seed: int,
    design_hash: str | None = None,
    exploratory: bool = False,
) -> str:
    """A run's key: the point's definition, the build, the repetition and the base seed; for a
    registered design (a testbed whose unit is the boot) also the design's hash, so a run of a
    new design never reuses a record of an old one, and whether the run is exploratory."""
    body = {"definition": definition_hash, "build": build_id, "repetition": repetition, "base_seed": base_seed}
    if design_hash is not None:
        body["design"] = design_hash
    if exploratory:
        body["exploratory"] = True
    return sha256(body)


def run_key_matches(rec: dict, base_seed: int) -> bool:
    """Was this record's run key made from its own fields and `base_seed` (by either form)?"""
    try:
        return rec["run_key"] == run_key_of(
            rec["definition_hash"],
            rec["provenance"]["build_id"],
            rec["repetition"],
            base_seed,
            rec.get("design_hash") if rec.get("registered") else None,
            bool(rec.get("exploratory")),
        )
    except (KeyError, TypeError):
        return False


def run_id_of(variant: str, point_id: str, repetition: int, run_key: str) -> str:
    """A run's id (its record is RUN_ID.json; failures RUN_ID.failedN.json)."""
    return f"{variant}_{point_id}_r{repetition:02d}_{run_key[:10]}"


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "localhost"


def _writer_alive(name: str) -> bool:
    """Whether temporary file NAME is this host's and its writer process still runs."""
    prefix = f"{TMP_PREFIX}{_host()}-"
    if not name.startswith(prefix):
        return False
    pid = name[len(prefix) :].split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    except (OSError, OverflowError):
        return False
    return True


def _stale(tmp: Path, remove: bool = False) -> bool:
    """Whether TMP is what a gone writer left (and remove it if asked): its writer's
    lock is free and, if it names this host, its process is gone."""
    if _writer_alive(tmp.name):
        return False  # it may not hold its lock yet
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer holds it
        if remove:
            # remove only the file locked here, not one made under the same name since
            try:
                now = os.stat(tmp, follow_symlinks=False)
            except OSError:
                return False
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return False
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                return False
        return True
    finally:
        os.close(fd)


def sweep_partial(folder: Path) -> list[Path]:
    """Remove temporary files that killed writers left behind (never complete
    records, never the file of a writer still at work)."""
    return [tmp for tmp in sorted(Path(folder).glob(f"{TMP_PREFIX}*")) if _stale(tmp, remove=True)]


def _temp(folder: Path) -> tuple[int, str]:
    """A new temporary file in FOLDER, flock-ed while its descriptor is open."""
    prefix = f"{TMP_PREFIX}{_host()}-{os.getpid()}-"
    while True:
        fd, tmp = tempfile.mkstemp(prefix=prefix, dir=folder)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            return fd, tmp  # no locks on this file system: the name's host and pid still guard it
        # a sweeper that cannot see this process (another host or pid namespace)
        # may have removed the file before the lock: then start again
        try:
            st, now = os.fstat(fd), os.stat(tmp, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                return fd, tmp
        except FileNotFoundError:
            pass
        except OSError:
            os.close(fd)
            raise
        os.close(fd)


def _umask() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: reading the umask means setting it
    os.umask(mask)
    return mask


def _non_finite(obj, path: tuple = ()) -> tuple[str, float] | None:
    """The first float in OBJ that is NaN or infinite: (dotted field, value)."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (".".join(path) or "(top level)", obj)
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        return None
    for k, v in items:
        found = _non_finite(v, (*path, str(k)))
        if found:
            return found
    return None


def _not_finite_message(found: tuple[str, float]) -> str:
    return f"field {found[0]}: {found[1]!r} is not a finite number (records are strict JSON)"


def _write_error(final: Path, e: OSError, what: str = "not written") -> RecordError:
    reason = os.strerror(e.errno).lower() if e.errno else str(e)
    return RecordError(f"{final}: {what}: {reason}")


def write_record(folder: Path, record: dict) -> Path:
    record = dict(record)
    bad = _non_finite(record)
    if bad:
        raise RecordError(f"record {record.get('run_id')}: {_not_finite_message(bad)}")
    record["checksum"] = checksum(record)
    errors = list(_validator().iter_errors(record))
    if errors:
        e = errors[0]
        raise RecordError(
            f"record {record.get('run_id')}: field {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        )
    folder = Path(folder)
    final = folder / f"{record['run_id']}.json"
    data = json.dumps(record, indent=1, sort_keys=True, allow_nan=False).encode() + b"\n"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = _temp(folder)
    except OSError as e:
        raise _write_error(final, e) from None
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            try:
                os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600
            except OSError:
                pass  # a file system without modes: the record matters more
            os.fsync(fd)
            os.link(tmp, final)
        except FileExistsError:
            raise RecordExists(f"{final}: exists; raw records are never overwritten") from None
        except OSError as e:
            raise _write_error(final, e) from None
        finally:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # left over, it is swept once this process is gone
    finally:
        os.close(fd)  # releases the lock once the temporary name is gone
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        raise _write_error(final, e, "written, but its folder could not be synced") from None
    return final


def read_record(path: Path) -> dict:
    """A record through the one input reader: a regular file in its folder (no link out of
    it, no FIFO), bounded, strict JSON without duplicate keys, not nested too deeply."""
    path = Path(path)
    try:
        rec = inputs.load_json(inputs.read_input(path, inputs.MAX_RECORD_BYTES), str(path))
    except inputs.InputError as e:
        raise RecordError(str(e)) from None
    if not isinstance(rec, dict):
        raise RecordError(f"{path}: not a JSON object")
    return rec


def last_attempt(folder: Path, run_id: str) -> int:
    """The highest N of the RUN_ID.failedN.json records in FOLDER (0: none), so a
    resumed run numbers its attempts on from those of earlier processes."""
    name = re.compile(re.escape(run_id) + r"\.failed([0-9]+)\.json")
    found = (name.fullmatch(p.name) for p in Path(folder).glob(f"{glob.escape(run_id)}.failed*.json"))
    return max((int(m[1]) for m in found if m), default=0)


def _run_id_problems(rec: dict) -> list[str]:
    """The run_id must be what schedlab.run derives from the run's names (plus
    .failedN, N the attempt, for a failure record)."""
    rid = rec.get("run_id")
    try:
        expected = run_id_of(rec["variant"], rec["point_id"], rec["repetition"], rec["run_key"])
    except (KeyError, TypeError, ValueError):
        return []  # the schema check names what is missing
    if not isinstance(rid, str):
        return []
    if rec.get("status") == "failed":
        m = re.fullmatch(re.escape(expected) + r"\.failed([1-9][0-9]*)", rid)
        if not m:
            return [
                f"field run_id: {rid!r} is not {expected + '.failedN'!r}, which the run's variant, "
                "point_id, repetition and run_key give"
            ]
        if "attempt" in rec and rec["attempt"] != int(m[1]):
            return [f"field run_id: {rid!r} says attempt {m[1]}, field attempt says {rec['attempt']!r}"]
        return []
    if rid != expected:
        return [
            f"field run_id: {rid!r} is not {expected!r}, which the run's variant, point_id, repetition and run_key give"
        ]
    return []


def check_record(path: Path, rec: dict, validator=None) -> list[str]:
    """Problems with one record (empty list: fine)."""
    problems = []
    validator = validator or _validator()
    for e in sorted(validator.iter_errors(rec), key=lambda e: list(map(str, e.absolute_path)))[:5]:
        problems.append(f"field {'.'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message}")
    bad = _non_finite(rec)
    if bad:
        problems.append(_not_finite_message(bad))
    if "checksum" in rec and rec["checksum"] != checksum(rec):
        problems.append(f"checksum mismatch: record says {rec['checksum']}, content is {checksum(rec)}")
    if rec.get("run_id") and path.name not in (f"{rec['run_id']}.json",):
        problems.append(f"file name does not match run_id {rec['run_id']!r}")
    problems += _run_id_problems(rec)
    problems += integrity.problems(rec, run_key_of)  # the record against itself, its plan and its study
    return [inputs.one_line(p) for p in problems]


SENSITIVITY_DIR = "sensitivity"  # raw/sensitivity/STUDY/: sim runs of the sensitivity sweep
VALIDATION_DIR = integrity.MIRROR  # raw/validation/STUDY/: the validation's mirror runs (schedlab.mirror)
PURPOSE_DIRS = (SENSITIVITY_DIR, VALIDATION_DIR)  # sim runs made for another question than a study's


def _location_problems(root: Path, path: Path, rec: dict) -> list[str]:
    """A record lives in ROOT/TESTBED/STUDY/ of its own testbed and study; the sim's
    sensitivity sweep (docs/sensitivity.md) in ROOT/sensitivity/STUDY/, the validation's mirror
    runs (docs/validation.md) in ROOT/validation/STUDY/."""
    where = path.parent.relative_to(root).parts
    if len(where) != 2:
        return [f"not in a raw/TESTBED/STUDY/ folder (it is in {path.parent})"]
    problems = []
    testbed = "sim" if where[0] in PURPOSE_DIRS else where[0]
    for field, folder in (("testbed", testbed), ("study", where[1])):
        if field in rec and rec[field] != folder:
            problems.append(f"field {field}: {rec[field]!r}, but the record is in raw/{where[0]}/{where[1]}/")
    return problems


def iter_records(folder: Path) -> Iterator[Path]:
    yield from sorted(p for p in Path(folder).rglob("*.json") if not p.name.startswith("."))


def verify(data_dir: Path) -> dict[str, list[str]]:
    """Check every raw record under DATA_DIR/raw: schema, finite values, checksum,
    run id, folder, no duplicates. Returns {file: [problems]} for files with problems."""
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
        p = check_record(path, rec, validator) + _location_problems(root, path, rec)
        if rec.get("status") == "ok" and isinstance(rec.get("run_key"), str):
            # the sweep's shipped setting repeats the study's own sim runs, by design
            folder = path.relative_to(root).parts[0]
            key = (folder if folder in PURPOSE_DIRS else "", rec["run_key"])
            if key in seen:
                p.append(f"duplicate of {seen[key]} (same run key)")
            else:
                seen[key] = path
        if p:
            problems[str(path)] = p
    for tmp in sorted(root.rglob(f"{TMP_PREFIX}*")):
        if _stale(tmp):
            problems[str(tmp)] = ["partial write left by a killed run (not data; removed by the next run)"]
    return problems
