# schedlab: builds -> testbed runs -> raw data -> notebooks -> tables/figures -> paper/main.pdf
#   snakemake                          the paper on the default testbed (config/config.yaml)
#   snakemake --config testbed=qemu    the same studies on another testbed
#   snakemake --report report.html     every figure and table, browsable without LaTeX
# Flags live in the profile workflow/profiles/default (Snakemake reads it by itself).
# Each stage lives in one file under workflow/rules/, in pipeline order.
import shlex


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


# Jobs import schedlab from this checkout, so an environment without `pip install -e .`
# (a per-rule conda env) runs it too; set -euo pipefail is Snakemake's own default prefix.
# (shell.prefix formats its argument: braces doubled)
shell.prefix(
    "set -euo pipefail; export PYTHONPATH="
    + shlex.quote(workflow.basedir).replace("{", "{{").replace("}", "}}")
    + "${{PYTHONPATH:+:$PYTHONPATH}}; "
)


include: "workflow/rules/common.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/qemu.smk"
include: "workflow/rules/kernel.smk"
include: "workflow/rules/lab.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/sensitivity.smk"
include: "workflow/rules/verdicts.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        "paper/main.pdf",
