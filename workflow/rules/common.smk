# Configuration, validated before anything runs: a bad study file stops the
# workflow here with the file, line and field named.
import functools
import glob
import sys
from pathlib import Path

from snakemake.utils import validate

from schedlab import config as sl_config
from schedlab import records as sl_records
from schedlab import plan as sl_plan
from schedlab import testbeds as sl_testbeds

# Snakemake's own YAML loader lets a duplicate key win silently and reads YAML 1.1 numbers
# (012 is 10): read the file again with the project's loader, which names the file and line,
# and holds the alias and depth limits, before anything walks the data
try:
    for _cf in workflow.configfiles:
        sl_config.load_yaml(Path(_cf))
except sl_config.ConfigError as e:
    sys.exit(f"schedlab: configuration error: {e}")
validate(config, "../schemas/config.schema.json")

STUDIES_DIR = config.get("studies_dir", "config/studies")
try:
    STUDIES = {}
    for i, name in enumerate(config["studies"]):
        path = Path(STUDIES_DIR) / f"{name}.yaml"
        if not path.exists():
            raise sl_config.ConfigError(
                f"config: field studies.{i}: no study file {path}"
            )
        STUDIES[name] = sl_config.load_study(path)
except sl_config.ConfigError as e:
    sys.exit(f"schedlab: configuration error:\n{e}")

TESTBED = config["testbed"]
REPORTED = config.get("testbeds", [TESTBED])
# testbeds this build measures; a reported testbed that is not measured is re-derived
# from the raw records shipped in data/raw/<testbed> (`make paper MEASURE=sim,qemu` measures it);
# sim: always (cheap)
MEASURE = list(dict.fromkeys(["sim", *config.get("measure", [TESTBED])]))
DATA = config.get("data_dir", "data")
SEED = config["seed"]


def study_points(study, testbed):
    """{point_id: point} of a study on a testbed."""
    s = STUDIES[study]
    return {sl_config.point_id(p): p for p in sl_config.points(s, testbed)}


def point_manifests(study, testbed):
    s = STUDIES[study]
    return [
        f"{DATA}/runs/{testbed}/{study}/{v}/{pid}.json"
        for v in sl_config.testbed_settings(s, testbed)["variants"]
        for pid in study_points(study, testbed)
    ]


def study_rounds(study, testbed):
    """The rounds of a study's plan on a testbed (on qemu and lab: its boots)."""
    settings = sl_config.testbed_settings(STUDIES[study], testbed)
    return sorted({r["round"] for r in sl_plan.repetitions(settings)})


def definition_hash(study, testbed, variant, pid):
    return sl_config.sha256(
        sl_config.definition(
            STUDIES[study], testbed, variant, study_points(study, testbed)[pid]
        )
    )


def studies_on(testbed):
    return [s for s in STUDIES if testbed in STUDIES[s]["testbeds"]]


def point_args(study, testbed, pid):
    return " ".join(
        f"--point {k}={v}" for k, v in study_points(study, testbed)[pid].items()
    )


def run_inputs(wc):
    inputs = [f"{STUDIES_DIR}/{wc.study}.yaml"]
    if wc.testbed == "sim":
        inputs += ["sim/build/credit1sim", "schedlab/testbeds/sim.py"]
    elif wc.testbed == "qemu":
        inputs += ["build/qemu/images.json", "schedlab/testbeds/qemu.py"]
        # kernels named by the variants (kernel.config), and the native image for studies run
        # on a natively booted kernel (workflow/rules/kernel.smk)
        kconfigs = sorted(
            {
                (v.get("kernel") or {}).get("config")
                for v in STUDIES[wc.study]["variants"].values()
            }
            - {None}
        )
        inputs += [f"build/kernel/{c}.json" for c in kconfigs]
        if (STUDIES[wc.study].get("workload") or {}).get("where") == "native":
            inputs += [
                "build/qemu/native-image.json",
                "schedlab/testbeds/qemu_native.py",
            ]
    elif wc.testbed == "lab":
        inputs += [f"build/lab/builds-{wc.study}.json", "schedlab/testbeds/lab.py"]
    return inputs


def shipped_folder(study, testbed):
    """The folder of a study's raw records on a testbed, as one input standing for all of them
    (`snakemake -n` lists one path, not every record): records are only ever added, each by an
    atomic rename, which changes the folder's time, so a new record re-derives what reads it.
    """
    return f"{DATA}/raw/{testbed}/{study}"


def validation_records():
    """The folders of the shipped qemu records of config/validation.yaml's studies (read only)."""
    scs = sl_config.load_yaml(Path("config/validation.yaml"))[0]["scenarios"]
    return [
        shipped_folder(s, "qemu") for s in sorted({sc["qemu"]["study"] for sc in scs})
    ]


def shipped_records(study, testbed):
    """Raw records on disk for the study's current definition on `testbed` (read only)."""
    return list(_shipped_records(study, testbed))


# read once per Snakemake run (_pairs and dataset_study's input both ask)
@functools.cache
def _shipped_records(study, testbed):
    return tuple(str(p) for p in sl_records.on_disk(DATA, STUDIES[study], testbed))


def shipped_complete(study, testbed):
    """Whether the records on disk give every (variant, point) of the study at least
    two measured runs (what a comparison needs); names the first cell that lacks them.
    """
    short = sl_records.first_short_point(DATA, STUDIES[study], testbed)
    return (short is None, short or "")


def _pairs():
    pairs = []
    for tb in REPORTED:
        for s in studies_on(tb):
            if tb in MEASURE:
                pairs.append((s, tb))
                continue
            ok, short = (
                shipped_complete(s, tb) if shipped_records(s, tb) else (False, "")
            )
            if ok:
                pairs.append((s, tb))
            else:
                why = (
                    f"{short} has fewer than 2 measured units"
                    if short
                    else "no records"
                )
                print(
                    f"schedlab: {s} on {tb}: not measured in this build and the shipped records of "
                    f"data/raw/{tb} are incomplete for the current study definition and registered "
                    f"design ({why}); the paper omits it",
                    file=sys.stderr,
                )
    return pairs


# the (study, testbed) results the paper reports
PAIRS = _pairs()
SHIPPED = [tb for tb in REPORTED if tb not in MEASURE]


def alternatives(names):
    """A wildcard constraint matching exactly these names (none: matches nothing)."""
    return "|".join(names) if names else "(?!)"


def study_outputs(wc=None):
    return [f"paper/generated/{s}/{tb}-{f}" for s, tb in PAIRS for f in NB_OUT]


# what each study notebook writes, per testbed
NB_OUT = ["table.tex", "cells.json", "macros.tex", "figure.pdf", "setup.tex"]


# the package code a derived file depends on: a change re-derives it
REPORT_CODE = sorted(
    glob.glob("schedlab/report/*.py") + glob.glob("schedlab/stats/*.py")
)

# what turns a figure into a PNG and a LaTeX table into HTML for `snakemake --report`
REPORT_VIEW = "workflow/scripts/report-view"

# the validation's mutants (config/validation.yaml, docs/validation.md "Mutants")
VALIDATION_MUTANTS = [
    m["name"]
    for m in sl_config.load_yaml(Path("config/validation.yaml"))[0].get("mutants") or []
]


def study_title(wc):
    return STUDIES[wc.study]["title"]


# The notebook that writes a study's table and figure: its own where it has one (for a figure of
# its own), else the generic one, which draws any study's
GENERIC_NOTEBOOK = "notebooks/generic-study.ipynb"


def study_notebook(wc):
    own = Path(f"notebooks/{wc.study}.ipynb")
    return str(own) if own.exists() else GENERIC_NOTEBOOK


# Figures of their own (config/config.yaml, figures: NAME -> the study whose file its notebook
# reads); one whose study is not in the study list is left out
FIGURES = {f: s for f, s in (config.get("figures") or {}).items() if s in STUDIES}
for _f, _s in (config.get("figures") or {}).items():
    if _s not in STUDIES:
        print(
            f"schedlab: figure {_f}: its study {_s} is not in the study list; the paper omits it",
            file=sys.stderr,
        )


def lab_xen_series(study):
    """Patch series of a study's variants that need a source build of Xen (workflow/rules/lab.smk)."""
    return sorted(
        {
            (v.get("xen") or {}).get("patches", "stock")
            for v in STUDIES[study]["variants"].values()
        }
        - {"stock"}
    )


def own_figures(
    names=("figure.pdf", "figure.png", "macros.tex", "caption.tex", "caption.html")
):
    """The files of the figures of their own (workflow/rules/report.smk, rule figure)."""
    return [f"paper/generated/{f}/{n}" for f in FIGURES for n in names]


def study_of_kind(kind):
    """The first study of the list whose workload is of `kind` (workload.kind): a rule that
    needs one workload's study names the kind, never a study id."""
    for s, st in STUDIES.items():
        if (st.get("workload") or {}).get("kind") == kind:
            return s
    raise ValueError(f"no study of workload kind {kind!r} in the study list")
