"""`schedlab new-study NAME --like STUDY`: a new study file scaffolded from an existing one.

The new file is the existing one with its `study:` id replaced, its titles (the study's and its
claim's) and its first comment marked TODO, and everything else copied: variants, points,
metrics, testbeds and their designs, the claim, the simulator model. It must validate as any
study file does, or it is not written. The study is then appended to the study list of
config/config.yaml (unless --no-list), the one other file a new study needs: its table and
figure come from the generic notebook, its section in the paper from the template
(paper/templates/study-section.tex) until paper/sections/NAME.tex is written.

Nothing is overwritten: a study file that exists is an error.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from schedlab import config
from schedlab.core.files import atomic_write

NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


def project_root(start: Path | None = None) -> Path:
    """The project a command run from `start` (default: the working directory) means: the
    nearest folder from there up holding config/config.yaml and config/studies/, else the
    package's own (config.ROOT)."""
    p = Path(start or Path.cwd()).resolve()
    for d in (p, *p.parents):
        if (d / "config" / "config.yaml").is_file() and (d / "config" / "studies").is_dir():
            return d
    return config.ROOT


def scaffold(text: str, name: str, like: str) -> str:
    """The study file `text` of study `like` as study `name`: the id replaced, the titles and
    the first comment marked TODO, the rest as it is."""
    out, n_id, in_claim = [], 0, False
    for i, line in enumerate(text.splitlines(keepends=True)):
        if re.match(rf"^study:\s*{re.escape(like)}\s*(#.*)?$", line):
            line, n_id = f"study: {name}\n", n_id + 1
        elif m := re.match(r"^title:\s*(.*?)\s*$", line):
            old = _scalar(m.group(1))
            line = f"title: {json.dumps(f'TODO: the title of {name} (scaffolded from {like}: {old})')}\n"
        elif re.match(r"^claim:\s*$", line):
            in_claim = True
        elif in_claim and (m := re.match(r"^(\s+)title:\s*(.*?)\s*$", line)):
            line = f"{m.group(1)}title: {json.dumps(f'TODO: {name}: ' + _scalar(m.group(2)))}\n"
            in_claim = False
        elif in_claim and re.match(r"^\S", line):
            in_claim = False
        elif i == 0 and line.startswith("#"):
            line = f"# {name}: TODO, what this study tests (scaffolded from {like}: {line[1:].strip()})\n"
        out.append(line)
    if n_id != 1:
        raise config.ConfigError(f"study file of {like}: no line `study: {like}` to replace")
    return "".join(out)


def _scalar(yaml_text: str) -> str:
    """A one-line YAML scalar as its text (quotes off)."""
    s = yaml_text.split(" #", 1)[0].strip() if not yaml_text.startswith(("'", '"')) else yaml_text
    if s[:1] == '"':
        return json.loads(s)
    if s[:1] == "'":
        return s[1:-1].replace("''", "'")
    return s


def add_to_list(config_path: Path, name: str) -> bool:
    """Append `name` to config/config.yaml's `studies: [...]` (a one-line list, as shipped);
    False if it is there already. The rest of the file is kept as it is."""
    text = config_path.read_text()
    data, _ = config.load_yaml(config_path)
    studies = list((data or {}).get("studies") or [])
    if name in studies:
        return False
    pattern = re.compile(r"^studies:\s*\[([^\]\n]*)\]", re.M)
    if not pattern.search(text):
        raise config.ConfigError(f"{config_path}: field studies: not a one-line list [...]; add {name} to it by hand")
    new = pattern.sub(lambda m: f"studies: [{', '.join([*studies, name])}]", text, count=1)
    data2 = {**data, "studies": [*studies, name]}
    config.validate(data2, "config", config_path)
    atomic_write(config_path, new)
    return True


def new_study(name: str, like: str, root: Path, add: bool = True) -> list[Path]:
    """Write config/studies/NAME.yaml from LIKE's (validated), and add NAME to the study list.
    Returns the files written."""
    if not NAME.fullmatch(name):
        raise config.ConfigError(f"new-study {name!r}: a study name is a lower-case letter, then letters, digits, _")
    studies = root / "config" / "studies"
    src, dst = studies / f"{like}.yaml", studies / f"{name}.yaml"
    if not NAME.fullmatch(like) or not src.is_file():
        known = ", ".join(sorted(p.stem for p in studies.glob("*.yaml")))
        raise config.ConfigError(f"--like {like!r}: no study file {src} (known: {known})")
    config.load_study(src)  # the model must itself be a valid study
    if dst.exists():
        raise config.ConfigError(f"{dst}: exists; a new study needs a name of its own")
    text = scaffold(src.read_text(), name, like)
    with tempfile.TemporaryDirectory() as d:  # validated before it exists in config/studies/
        check = Path(d) / dst.name
        check.write_text(text)
        try:
            config.load_study(check)
        except config.ConfigError as e:
            raise config.ConfigError(f"the scaffold of {name} from {like} does not validate: {e}") from None
    with open(dst, "x") as f:  # never over a file that appeared meanwhile
        f.write(text)
    written = [dst]
    if add and add_to_list(root / "config" / "config.yaml", name):
        written.append(root / "config" / "config.yaml")
    return written
