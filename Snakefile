# schedlab: builds -> testbed runs -> raw data -> notebooks -> tables/figures -> paper/main.pdf
#   snakemake -c2                      the paper on the default testbed (config/config.yaml)
#   snakemake -c2 --config testbed=qemu  the same studies on another testbed
# Each stage lives in one file under workflow/rules/, in pipeline order.

configfile: "config/config.yaml"

include: "workflow/rules/common.smk"
include: "workflow/rules/build.smk"
include: "workflow/rules/qemu.smk"
include: "workflow/rules/kernel.smk"
include: "workflow/rules/lab.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        "paper/main.pdf",
