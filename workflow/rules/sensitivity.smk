# Sensitivity stage (docs/sensitivity.md): how the sim's conclusions move over the ranges of
# its uncalibrated workload parameters (config/sensitivity.yaml).
#
# sensitivity_sweep (the run stage: schedlab.sweep): per study, the runs of every setting
# (shipped, one at a time, joint) not yet on disk, as raw records under
# data/raw/sensitivity/STUDY/ (written by the run stage's record writer; append-only, never a
# declared output); its output is the manifest of the runs of each setting. Records of an unchanged
# setting, study file and simulator are reused, so a rerun only reads them.
# sensitivity: the notebook, from the manifests and their records (it never runs the sim):
# a tornado chart per study, the robustness table (LaTeX and HTML from one table model), its
# sidecar and macros; the charts and the table are in `snakemake --report`.


SENS_CONFIG = "config/sensitivity.yaml"
SENS_STUDIES = list(sl_config.load_yaml(Path(SENS_CONFIG))[0]["studies"])


rule sensitivity_sweep:
    input:
        config=SENS_CONFIG,
        study=f"{STUDIES_DIR}/{{study}}.yaml",
        sim="sim/build/credit1sim",
        code=["schedlab/testbeds/sim.py", "schedlab/sweep.py", "schedlab/run.py"],
    output:
        f"{DATA}/runs/sensitivity/{{study}}.json",
    log:
        f"{DATA}/logs/sensitivity/{{study}}.log",
    benchmark:
        f"{DATA}/benchmarks/sensitivity/{{study}}.tsv"
    wildcard_constraints:
        study=alternatives(SENS_STUDIES),
    conda:
        "../../environment.yml"
    # runs at once (each a simulator process): a study's sweep is the longest job of a build
    threads: 64  # capped at --cores by Snakemake
    params:
        seed=SEED,
        # the data dir, from the output: DATA/runs/sensitivity/STUDY.json
        data=lambda wc, output: str(Path(output[0]).parents[2]),
        studies_dir=lambda wc, input: str(Path(input.study).parent),
    shell:
        "python -m schedlab.sweep run --config {input.config} --studies-dir {params.studies_dir} "
        "--study {wildcards.study} --seed {params.seed} --data {params.data} --jobs {threads} > {log}"


rule sensitivity:
    input:
        notebook="notebooks/sensitivity.ipynb",
        config=SENS_CONFIG,
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in SENS_STUDIES],
        manifests=[f"{DATA}/runs/sensitivity/{s}.json" for s in SENS_STUDIES],
        code=REPORT_CODE,
    output:
        table="paper/generated/sensitivity/table.tex",
        cells="paper/generated/sensitivity/cells.json",
        macros="paper/generated/sensitivity/macros.tex",
        figures=[
            report(
                f"paper/generated/sensitivity/{s}-tornado.{ext}",
                caption="../report/sensitivity-figure.rst",
                category="Figures",
                subcategory="sensitivity",
                labels={"study": s, "testbed": "sim", "format": ext.upper()},
            )
            for s in SENS_STUDIES
            for ext in ("pdf", "png")
        ],
        table_html=report(
            "paper/generated/sensitivity/table.html",
            caption="../report/sensitivity-table.rst",
            category="Tables",
            subcategory="sensitivity",
            labels={"sensitivity": "robustness of the sim's conclusions"},
        ),
        executed=f"{DATA}/derived/notebooks/sensitivity.ipynb",
    log:
        f"{DATA}/logs/notebooks/sensitivity.log",
    benchmark:
        f"{DATA}/benchmarks/notebooks/sensitivity.tsv"
    conda:
        "../../environment.yml"
    params:
        # the data dir, from the input: DATA/runs/sensitivity/STUDY.json
        data=lambda wc, input: str(Path(input.manifests[0]).parents[2]),
        studies_dir=lambda wc, input: str(Path(input.studies[0]).parent),
        out_dir=lambda wc, output: str(Path(output.table).parent),
    shell:
        "{{ papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p config_path {input.config} -p data_dir {params.data} -p studies_dir {params.studies_dir} "
        "-p out_dir {params.out_dir}; "
        "}} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"
