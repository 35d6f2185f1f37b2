"""Reading what a user hands the package: the one place for it.

Every study file, config/config.yaml, lab inventory, raw record and ministat input is read
here (docs/inputs.md):

- `read_input`: a regular file of bounded size. A FIFO, a device, a socket or a folder is
  refused without reading (a FIFO would hang, /dev/zero would never end), and so is a
  symbolic link that leads out of the folder it is in (or out of the folder the caller names).
- `load_yaml`: YAML 1.2 numbers (`012`, `0755`, `10:00`, `1_0`, `0b1010`, `yes` are refused:
  YAML 1.1 readers give them other values), no duplicate keys, finite floats, and limits on
  nesting and on what aliases expand to (nine levels of nine aliases would be 387 million
  nodes for whatever walks the data next).
- `load_json`: strict JSON (no duplicate keys) with the same nesting limit.
- `one_line`: an error message as one line of readable length.

Problems are InputError: one line naming the file (and line, and field where there is one).
The stages turn it into their own error (config.ConfigError, store.RecordError)."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_YAML_BYTES = 4 << 20  # study files, config, inventories: tens of KB
MAX_RECORD_BYTES = 64 << 20  # a raw record: a few KB to a few MB (samples)
MAX_DEPTH = 100  # nesting of mappings and lists; the study files need under 10
MAX_NODES = 200_000  # values after expanding aliases; a study file has about a thousand
MAX_LINE = 300  # characters of an error line before it is cut


class InputError(Exception):
    """Bad input: the message (one line) names the file, and the line or field where known."""


def one_line(text: Any, limit: int = MAX_LINE) -> str:
    """`text` as one line (its lines joined by ' | '), cut to `limit` characters: a 1 MB
    value in an error message would bury the message."""
    s = " | ".join(l.strip() for l in str(text).splitlines() if l.strip())
    if len(s) <= limit:
        return s
    return f"{s[:limit]}... ({len(s) - limit} more characters)"


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_in_folder(path: Path | str, folder: Path | str | None = None) -> None:
    """Refuse a symbolic link (anywhere below `folder`) that leads out of `folder`
    (default: the folder `path` is in)."""
    path = Path(path)
    base = Path(folder) if folder is not None else path.parent
    real, real_base = os.path.realpath(path), os.path.realpath(base)
    if not _inside(real, real_base):
        raise InputError(f"{path}: a symbolic link out of {base} (to {real}); not read")


def read_input(
    path: Path | str, limit: int = MAX_YAML_BYTES, folder: Path | str | None = None, stream_ok: bool = False
) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. `folder`: the file must be in it
    (after following links; default: the folder the path names). `stream_ok`: a pipe or FIFO
    is read too (ministat's `<(command)`), without blocking when no one writes to it."""
    path = Path(path)
    check_in_folder(path, folder)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) and not (stream_ok and stat.S_ISFIFO(st.st_mode)):
            raise InputError(f"{path}: cannot read: {_kind(st.st_mode)}, not a regular file")
        # O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOCTTY: never a terminal
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)  # what was opened, not what the name pointed to a moment ago
        if stat.S_ISFIFO(st.st_mode) and stream_ok:
            return _read_stream(fd, path, limit)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: cannot read: {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise InputError(f"{path}: cannot read: {st.st_size} bytes, more than the {limit} allowed")
        chunks, n = [], 0
        while True:
            c = os.read(fd, min(1 << 20, limit + 1 - n))
            if not c:
                break
            chunks.append(c)
            n += len(c)
            if n > limit:  # it grew while being read
                raise InputError(f"{path}: cannot read: more than the {limit} bytes allowed")
        return b"".join(chunks)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _read_stream(fd: int, path: Path, limit: int) -> bytes:
    """A FIFO opened without blocking: read until its writers close it (no writer: empty)."""
    import select

    chunks, n = [], 0
    while True:
        try:
            c = os.read(fd, 1 << 20)
        except BlockingIOError:
            select.select([fd], [], [])
            continue
        if not c:
            return b"".join(chunks)
        chunks.append(c)
        n += len(c)
        if n > limit:
            raise InputError(f"{path}: cannot read: more than the {limit} bytes allowed")


# --------------------------------------------------------------------------- YAML

# YAML 1.2's core schema, the forms a reader of either version reads the same way
_INT = r"[-+]?(?:0|[1-9][0-9]*)"
_FLOAT = r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
_BOOL = r"true|True|TRUE|false|False|FALSE"
# forms YAML 1.1 (PyYAML, libyaml's bindings, Snakemake) reads as numbers or booleans and
# YAML 1.2 as other numbers or strings: `012` is 10 or 12, `10:00` 600 or "10:00"
_AMBIGUOUS = (
    r"[-+]?0[0-9_]+(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"  # a leading zero: octal in 1.1
    r"|[-+]?0[bBoOxX][0-9a-fA-F_]*"  # binary, octal, hex
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"  # base 60
    r"|[-+]?[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"  # digit separators
    r"|[-+]?[0-9]*\.[0-9]*_[0-9_]*(?:[eE][-+]?[0-9]+)?"
    r"|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF"
)
AMBIGUOUS_TAG = "tag:schedlab,2024:ambiguous"
_STRICT = {
    "tag:yaml.org,2002:int": re.compile(_INT),
    "tag:yaml.org,2002:float": re.compile(_FLOAT),
    "tag:yaml.org,2002:bool": re.compile(_BOOL),
}


class Loader(yaml.SafeLoader):
    """The one YAML loader of the study files, config/config.yaml and the lab inventory:
    PyYAML's SafeLoader with YAML 1.2's numbers and booleans (a YAML 1.1-only form is
    refused), and a duplicate key or a non-finite number is an error with its line instead
    of the last key silently winning or a NaN axis value. load_yaml parses with libyaml first
    (FastLoader: every Snakemake start reads the study files) and with this one only to word
    an error (libyaml's messages say less)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<:` merges may override
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                    seen.setdefault(key, key_node.start_mark.line + 1)
                except TypeError:
                    continue  # unhashable: SafeLoader says so
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first on line {first})", key_node.start_mark
                    )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node):
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a finite number", node.start_mark
            )
        return value

    def construct_ambiguous(self, node):
        raise yaml.constructor.ConstructorError(None, None, _ambiguous_why(node.value), node.start_mark)


# YAML 1.1's implicit int, float and bool forms out, YAML 1.2's in
Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in rs if tag not in _STRICT]
    for ch, rs in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(AMBIGUOUS_TAG, re.compile(f"^(?:{_AMBIGUOUS})$"), list("-+0123456789.yYnNoO"))
Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(f"^(?:{_BOOL})$"), list("tTfF"))
Loader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(f"^(?:{_INT})$"), list("-+0123456789"))
Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(f"^(?:{_FLOAT})$"), list("-+0123456789."))
Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
Loader.add_constructor(AMBIGUOUS_TAG, Loader.construct_ambiguous)

if getattr(yaml, "__with_libyaml__", False):

    class FastLoader(yaml.cyaml.CParser, Loader):
        """Loader's checks on libyaml's parser (CParser first in the MRO)."""

        def __init__(self, stream):
            yaml.cyaml.CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

else:  # PyYAML without libyaml
    FastLoader = Loader


def _ambiguous_why(value: str) -> str:
    return (
        f"{value!r} is not a YAML 1.2 number or boolean (YAML 1.1 readers give it another value): "
        "write decimal digits (12, 1.5, 1e3), true/false, or quote it as text"
    )


def _field(path: list) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def check_tree(node: yaml.Node | None, where: str) -> None:
    """The limits of a composed YAML document, before anything walks its data: nesting,
    values after expanding aliases (a cycle is refused too), and numbers and booleans in
    YAML 1.2's forms, also when tagged (`!!int 012`). Iterative: the tree may be deeper
    than the stack; each node is visited once, however many aliases name it."""
    if node is None:
        return
    info: dict[int, tuple[int, int]] = {}  # id -> (depth, nodes) of a finished node
    on_path: set[int] = set()

    def fail(n, path, msg, line=True):
        at = f":{n.start_mark.line + 1}" if line and n.start_mark is not None else ""
        raise InputError(f"{where}{at}: field {_field(path)}: {msg}")

    todo: list = [(node, [], False)]
    while todo:
        n, path, done = todo.pop()
        key = id(n)
        if done:
            on_path.discard(key)
            kids = _children(n)
            depth = 1 + max((info[id(k)][0] for _, k in kids), default=0)
            size = 1 + sum(info[id(k)][1] for _, k in kids)
            if depth > MAX_DEPTH:
                raise InputError(f"{where}: not valid YAML: nested too deeply (more than {MAX_DEPTH} levels)")
            if size > MAX_NODES:
                fail(n, path, f"more than {MAX_NODES} values once its aliases are expanded (an alias bomb?)")
            info[key] = (depth, size)
            continue
        if key in info:
            continue
        if key in on_path:
            fail(n, path, "an alias that contains itself (a recursive structure)")
        if len(on_path) >= MAX_DEPTH:
            raise InputError(f"{where}: not valid YAML: nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(n, yaml.ScalarNode):
            if n.tag == AMBIGUOUS_TAG:
                fail(n, path, _ambiguous_why(n.value))
            strict = _STRICT.get(n.tag)
            if strict is not None and not strict.fullmatch(n.value.strip()):
                fail(n, path, f"{n.value!r} is not a YAML 1.2 {n.tag.rsplit(':', 1)[-1]}")
            info[key] = (1, 1)
            continue
        on_path.add(key)
        todo.append((n, path, True))
        for label, k in reversed(_children(n)):
            if id(k) not in info:
                todo.append((k, path + [label], False))


def _children(n) -> list:
    if isinstance(n, yaml.MappingNode):
        out = []
        for k, v in n.value:
            label = k.value if isinstance(k, yaml.ScalarNode) else "?"
            out += [(f"{label} (key)", k), (label, v)]
        return out
    if isinstance(n, yaml.SequenceNode):
        return list(enumerate(n.value))
    return []


def _check_nesting(text: str, path: Path) -> None:
    """Refuse a document nested deeper than MAX_DEPTH from its events, before a composer
    recurses into it (libyaml's recursion has no limit: 100,000 `[` overflow the C stack)."""
    parser = (yaml.cyaml.CParser if FastLoader is not Loader else yaml.SafeLoader)(text)
    depth = 0
    try:
        while True:
            ev = parser.get_event()
            if ev is None or isinstance(ev, yaml.StreamEndEvent):
                return
            if isinstance(ev, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    line = ev.start_mark.line + 1 if ev.start_mark is not None else 0
                    raise InputError(f"{path}:{line}: not valid YAML: nested too deeply (more than {MAX_DEPTH} levels)")
            elif isinstance(ev, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return  # the loader below words it
    finally:
        parser.dispose()


def load_yaml(path: Path | str, limit: int = MAX_YAML_BYTES) -> tuple[Any, yaml.Node | None]:
    """(data, root node) of a YAML file; every problem is a one-line InputError naming the
    file and, where there is one, the line."""
    path = Path(path)
    raw = read_input(path, limit)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte 0x{raw[e.start]:02x})") from None
    _check_nesting(text, path)
    if FastLoader is not Loader:
        fast = None
        try:
            fast = FastLoader(text)
            node = fast.get_single_node()
            check_tree(node, str(path))
            return (fast.construct_document(node) if node is not None else None), node
        except (yaml.YAMLError, RecursionError):
            pass  # parsed again below, for PyYAML's wording of the problem
        finally:
            if fast is not None:
                fast.dispose()
    loader = None
    try:
        loader = Loader(text)
        node = loader.get_single_node()
        check_tree(node, str(path))
        return (loader.construct_document(node) if node is not None else None), node
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        ch = e.character if isinstance(e.character, int) else ord(e.character)
        raise InputError(f"{path}:{line}: not valid YAML: {e.reason} (character U+{ch:04X})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = ", ".join(str(x) for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x)
        problem = " ".join((problem or str(e)).split())
        raise InputError(f"{path}{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{path}: not valid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


# --------------------------------------------------------------------------- JSON


def _no_duplicates(pairs: list) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def json_depth(obj: Any) -> int:
    """How deeply lists and objects nest in `obj` (iteratively; stops past MAX_DEPTH)."""
    deepest, todo = 0, [(obj, 1)]
    while todo:
        o, d = todo.pop()
        if isinstance(o, (dict, list)):
            deepest = max(deepest, d)
            if deepest > MAX_DEPTH:
                break
            todo += [(x, d + 1) for x in (o.values() if isinstance(o, dict) else o)]
    return deepest


def load_json(raw: bytes | str, where: str) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, nested at most MAX_DEPTH deep. InputError
    ('WHERE: unreadable: why') otherwise."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise InputError(f"{where}: unreadable: nested too deeply") from None
    except (ValueError, MemoryError) as e:
        raise InputError(f"{where}: unreadable: {one_line(e, 200)}") from None
    if json_depth(data) > MAX_DEPTH:
        raise InputError(f"{where}: unreadable: nested too deeply (more than {MAX_DEPTH} levels)")
    return data
