# Configuration, validated before anything runs: a bad study file stops the
# workflow here with the file, line and field named.
import glob
import sys
from pathlib import Path

from snakemake.utils import validate

from schedlab import config as sl_config

validate(config, "../schemas/config.schema.json")

STUDIES_DIR = config.get("studies_dir", "config/studies")
try:
    STUDIES = {}
    for i, name in enumerate(config["studies"]):
        path = Path(STUDIES_DIR) / f"{name}.yaml"
        if not path.exists():
            raise sl_config.ConfigError(f"config: field studies.{i}: no study file {path}")
        STUDIES[name] = sl_config.load_study(path)
except sl_config.ConfigError as e:
    sys.exit(f"schedlab: configuration error:\n{e}")

TESTBED = config["testbed"]
REPORTED = config.get("testbeds", [TESTBED])
DATA = config.get("data_dir", "data")
SEED = config["seed"]


def study_points(study, testbed):
    """{point_id: point} of a study on a testbed."""
    s = STUDIES[study]
    return {sl_config.point_id(p): p for p in sl_config.points(s, testbed)}


def point_manifests(study, testbed):
    s = STUDIES[study]
    return [f"{DATA}/runs/{testbed}/{study}/{v}/{pid}.json"
            for v in s["variants"] for pid in study_points(study, testbed)]


def definition_hash(study, testbed, variant, pid):
    return sl_config.sha256(sl_config.definition(STUDIES[study], testbed, variant, study_points(study, testbed)[pid]))


def studies_on(testbed):
    return [s for s in STUDIES if testbed in STUDIES[s]["testbeds"]]


def point_args(study, testbed, pid):
    return " ".join(f"--point {k}={v}" for k, v in study_points(study, testbed)[pid].items())


def run_inputs(wc):
    inputs = [f"{STUDIES_DIR}/{wc.study}.yaml"]
    if wc.testbed == "sim":
        inputs += ["sim/build/credit1sim", "schedlab/testbeds/sim.py"]
    elif wc.testbed == "qemu":
        inputs += ["build/qemu/images.json", "schedlab/testbeds/qemu.py"]
    return inputs


def study_outputs(wc=None):
    return [f"paper/generated/{s}/{tb}-{f}" for tb in REPORTED for s in studies_on(tb) for f in NB_OUT]


# what each study notebook writes, per testbed
NB_OUT = ["table.tex", "cells.json", "macros.tex", "figure.pdf", "setup.tex"]


# the package code a derived file depends on: a change re-derives it
REPORT_CODE = sorted(glob.glob("schedlab/report/*.py") + glob.glob("schedlab/stats/*.py"))
