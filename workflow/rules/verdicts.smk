# Verdict stage: the seeds' claims against every reported testbed, decided by the fixed rules of
# schedlab.report.verdicts from the study tables' sidecars (never typed); with the published
# figures of the study files as macros, the coverage of every study on every testbed, and the
# appendix's list of setups.


rule verdicts:
    input:
        cells=[f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in STUDIES],
        code=REPORT_CODE,
    output:
        table="paper/generated/verdicts/table.tex",
        cells="paper/generated/verdicts/cells.json",
        macros="paper/generated/verdicts/macros.tex",
        seeds="paper/generated/verdicts/seeds.tex",
        coverage="paper/generated/verdicts/coverage.tex",
        setups="paper/generated/verdicts/setups.tex",
        # the report's pages of the two tables (LaTeX and HTML from one table model)
        table_html=report(
            "paper/generated/verdicts/table.html",
            caption="../report/verdicts-table.rst",
            category="Tables",
            subcategory="verdicts",
            labels={"verdicts": "each seed's claim on each testbed"},
        ),
        coverage_html=report(
            "paper/generated/verdicts/coverage.html",
            caption="../report/verdicts-coverage.rst",
            category="Tables",
            subcategory="verdicts",
            labels={"verdicts": "every study on every testbed"},
        ),
    log:
        f"{DATA}/logs/verdicts.log",
    conda:
        "../../environment.yml"
    params:
        # the paper directory, from the output: PAPER/generated/verdicts/table.tex
        paper=lambda wc, output: str(Path(output.table).parents[2]),
        # the study files' directory, from the input: STUDIES_DIR/STUDY.yaml
        studies_dir=lambda wc, input: str(Path(input.studies[0]).parent),
        args=" ".join(
            [f"--study {s}" for s in STUDIES]
            + [f"--pair {s}:{tb}" for s, tb in PAIRS]
            + [f"--testbed {tb}" for tb in REPORTED]
            + [f"--measured {tb}" for tb in MEASURE]
        ),
    shell:
        "python -m schedlab.report.verdicts --paper-dir {params.paper} --studies-dir {params.studies_dir} "
        "{params.args} > {log} 2>&1 || {{ cat {log}; exit 1; }}"


# The paper's verdict table: the same verdicts with the robustness column (the share of the
# sensitivity sweep's settings at which each sim verdict holds), so it needs every sweep; the
# plain table above does not (a new study's verdict row builds without the sweep).
rule verdicts_sweep:
    input:
        cells=[f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in STUDIES],
        sensitivity="paper/generated/sensitivity/cells.json",
        sensitivity_config="config/sensitivity.yaml",
        code=REPORT_CODE,
    output:
        table="paper/generated/verdicts/sweep/table.tex",
        # the sidecar the paper's verdict table and its text cite
        cells="paper/generated/verdicts/sweep/cells.json",
        macros="paper/generated/verdicts/sweep/macros.tex",
        evidence=[
            f"paper/generated/verdicts/sweep/evidence-{tb}.tex" for tb in REPORTED
        ],
    log:
        f"{DATA}/logs/verdicts-sweep.log",
    conda:
        "../../environment.yml"
    params:
        paper=lambda wc, output: str(Path(output.table).parents[3]),
        studies_dir=lambda wc, input: str(Path(input.studies[0]).parent),
        out=lambda wc, output: str(Path(output.table).parent),
        args=" ".join(
            [f"--study {s}" for s in STUDIES]
            + [f"--pair {s}:{tb}" for s, tb in PAIRS]
            + [f"--testbed {tb}" for tb in REPORTED]
            + [f"--measured {tb}" for tb in MEASURE]
        ),
    shell:
        "python -m schedlab.report.verdicts --paper-dir {params.paper} --studies-dir {params.studies_dir} "
        "--sensitivity {input.sensitivity} --sensitivity-config {input.sensitivity_config} "
        "--out-dir {params.out} {params.args} > {log} 2>&1 || {{ cat {log}; exit 1; }}"
