"""The paper's study sections, in the order of the study list: a study's own text
(paper/sections/STUDY.tex) where it has one, else its section made from the template
paper/templates/study-section.tex. Writes generated/sections.tex (what main.tex inputs) and
generated/STUDY/section.tex for each study without text of its own; so a new study needs no
edit of main.tex.

    python -m schedlab.report.sections --paper-dir paper --studies-dir config/studies --study S ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from schedlab import config
from schedlab.core.files import atomic_write
from schedlab.report.tables import latex_escape

TEMPLATE = Path("templates") / "study-section.tex"  # in the paper folder


def own_text(paper_dir: Path, study: str) -> Path:
    return Path(paper_dir) / "sections" / f"{study}.tex"


def render(template: str, study: dict) -> str:
    """The template with the study's id, its title (escaped) and, where it has a claim, the
    verdict sentences of its testbeds (only where the verdict table made them: \\IfValue)."""
    sid = study["study"]
    verdicts = ""
    if study.get("claim"):
        verdicts = "".join(
            f" \\IfValue{{verdicts/{sid}/{tb}}}{{On the {tb} testbed the claim's verdict is "
            f"\\emph{{\\sv{{verdicts/{sid}/{tb}}}}}: \\sv{{verdicts/{sid}/{tb}/why}} "
            f"(Table~\\ref{{tab:verdicts}}).}}{{}}"
            for tb in study["testbeds"]
        )
    return (
        template.replace("@@STUDY@@", sid)
        .replace("@@TITLE@@", latex_escape(study["title"]))
        .replace("@@VERDICTS@@", verdicts)
    )


def write(paper_dir: Path, studies_dir: Path, studies: list[str]) -> list[Path]:
    """generated/sections.tex and the template's sections; returns the files written."""
    paper_dir = Path(paper_dir)
    template = (paper_dir / TEMPLATE).read_text()
    lines = ["% The study sections, in the order of config/config.yaml's study list (schedlab.report.sections)"]
    written = []
    for sid in studies:
        if own_text(paper_dir, sid).exists():
            lines.append(f"\\input{{sections/{sid}.tex}}")
            continue
        study = config.load_study(Path(studies_dir) / f"{sid}.yaml")
        out = paper_dir / "generated" / sid / "section.tex"
        written.append(atomic_write(out, render(template, study)))
        lines.append(f"\\input{{generated/{sid}/section.tex}}")
    written.append(atomic_write(paper_dir / "generated" / "sections.tex", "\n".join(lines) + "\n"))
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paper-dir", default="paper")
    p.add_argument("--studies-dir", default="config/studies")
    p.add_argument("--study", action="append", required=True, help="a study, in the paper's order (repeat)")
    a = p.parse_args(argv)
    for path in write(Path(a.paper_dir), Path(a.studies_dir), a.study):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
