# Stats and report stage: one notebook per study (= per paper table and its
# figure), run by papermill on the study's manifests: the study's own notebook where it
# has one (for a figure of its own), else the generic one. Each writes its table,
# figure, text macros and the sidecar mapping every cell to its runs.
#
# `snakemake --report report.html` shows every figure (as PNG: browsers do not all
# show a PDF inline, made by REPORT_VIEW right after the notebook, in the same job) with its
# own caption, and every table as HTML: the notebook writes each table's LaTeX and HTML
# from one table model (schedlab.report.table_model).


rule notebook:
    input:
        notebook=study_notebook,
        study=f"{STUDIES_DIR}/{{study}}.yaml",
        runs=f"{DATA}/runs/{{testbed}}/{{study}}/all.json",
        code=REPORT_CODE,
        view=REPORT_VIEW,
    output:
        table="paper/generated/{study}/{testbed}-table.tex",
        cells="paper/generated/{study}/{testbed}-cells.json",
        macros="paper/generated/{study}/{testbed}-macros.tex",
        figure=report(
            "paper/generated/{study}/{testbed}-figure.pdf",
            caption="../report/study-figure.rst",
            category="Figures",
            subcategory="{study}",
            labels={"study": "{study}", "testbed": "{testbed}", "format": "PDF"},
        ),
        setup="paper/generated/{study}/{testbed}-setup.tex",
        figure_png=report(
            "paper/generated/{study}/{testbed}-figure.png",
            caption="../report/study-figure.rst",
            category="Figures",
            subcategory="{study}",
            labels={"study": "{study}", "testbed": "{testbed}", "format": "PNG"},
        ),
        # the figure's caption as the paper prints it, for the report (study-figure.rst)
        figure_caption="paper/generated/{study}/{testbed}-figure-caption.html",
        table_html=report(
            "paper/generated/{study}/{testbed}-table.html",
            caption="../report/study-table.rst",
            category="Tables",
            subcategory="{study}",
            labels={"study": "{study}", "testbed": "{testbed}"},
        ),
        executed=f"{DATA}/derived/notebooks/{{study}}-{{testbed}}.ipynb",
    log:
        f"{DATA}/logs/notebooks/{{study}}-{{testbed}}.log",
    benchmark:
        f"{DATA}/benchmarks/notebooks/{{study}}-{{testbed}}.tsv"
    wildcard_constraints:
        testbed=alternatives(sl_testbeds.NAMES),
        study="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    params:
        # the data dir, from the input: DATA/runs/TESTBED/STUDY/all.json
        data=lambda wc, input: str(Path(input.runs).parents[3]),
        studies_dir=lambda wc, input: str(Path(input.study).parent),
        out_dir=lambda wc, output: str(Path(output.table).parent),
        title=study_title,
    shell:
        "{{ papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p study {wildcards.study} -p testbed {wildcards.testbed} -p data_dir {params.data} "
        "-p studies_dir {params.studies_dir} -p out_dir {params.out_dir} "
        "&& python {input.view} figure {output.figure} {output.figure_png}; "
        "}} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"


# Agreement across testbeds and with the published figures (reads the sidecars).
rule agreement:
    input:
        notebook="notebooks/agreement.ipynb",
        cells=lambda wc: [f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        code=REPORT_CODE,
    output:
        table="paper/generated/agreement/table.tex",
        cells="paper/generated/agreement/cells.json",
        macros="paper/generated/agreement/macros.tex",
        testbeds="paper/generated/agreement/testbeds.tex",
        testbeds_cells="paper/generated/agreement/testbeds-cells.json",
        testbeds_macros="paper/generated/agreement/testbeds-macros.tex",
        table_html=report(
            "paper/generated/agreement/table.html",
            caption="../report/agreement-table.rst",
            category="Tables",
            subcategory="agreement",
            labels={"agreement": "with the published figures"},
        ),
        testbeds_html=report(
            "paper/generated/agreement/testbeds.html",
            caption="../report/agreement-testbeds.rst",
            category="Tables",
            subcategory="agreement",
            labels={"agreement": "across testbeds"},
        ),
        executed=f"{DATA}/derived/notebooks/agreement.ipynb",
    log:
        f"{DATA}/logs/notebooks/agreement.log",
    benchmark:
        f"{DATA}/benchmarks/notebooks/agreement.tsv"
    conda:
        "../../environment.yml"
    params:
        testbeds=",".join(REPORTED),
        pairs=",".join(f"{s}:{tb}" for s, tb in PAIRS),
        studies_dir=STUDIES_DIR,
    shell:
        "{{ papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p testbeds {params.testbeds} -p pairs {params.pairs} -p studies_dir {params.studies_dir}; "
        "}} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"


# A figure of its own (config/config.yaml, figures: NAME -> study): notebooks/NAME.ipynb draws it
# from the study's file with the simulator (e.g. one traced scenario, variants on one timeline).
rule figure:
    input:
        notebook="notebooks/{figure}.ipynb",
        study=lambda wc: f"{STUDIES_DIR}/{FIGURES[wc.figure]}.yaml",
        sim="sim/build/credit1sim",
        code="schedlab/testbeds/sim.py",
        report_code=REPORT_CODE,
        view=REPORT_VIEW,
    output:
        figure=report(
            "paper/generated/{figure}/figure.pdf",
            caption="../report/own-figure.rst",
            category="Figures",
            subcategory="{figure}",
            labels={"figure": "{figure}", "testbed": "sim", "format": "PDF"},
        ),
        macros="paper/generated/{figure}/macros.tex",
        caption="paper/generated/{figure}/caption.tex",
        caption_html="paper/generated/{figure}/caption.html",
        figure_png=report(
            "paper/generated/{figure}/figure.png",
            caption="../report/own-figure.rst",
            category="Figures",
            subcategory="{figure}",
            labels={"figure": "{figure}", "testbed": "sim", "format": "PNG"},
        ),
        executed=f"{DATA}/derived/notebooks/{{figure}}.ipynb",
    log:
        f"{DATA}/logs/notebooks/{{figure}}.log",
    benchmark:
        f"{DATA}/benchmarks/notebooks/{{figure}}.tsv"
    wildcard_constraints:
        figure=alternatives(list(FIGURES)),
    conda:
        "../../environment.yml"
    params:
        study=lambda wc: FIGURES[wc.figure],
        studies_dir=lambda wc, input: str(Path(input.study).parent),
        out_dir=lambda wc, output: str(Path(output.figure).parent),
    shell:
        "{{ papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p study {params.study} -p studies_dir {params.studies_dir} -p out_dir {params.out_dir} "
        "&& python {input.view} figure {output.figure} {output.figure_png} "
        "&& python {input.view} caption {output.caption} {output.caption_html}; "
        "}} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"


# `make report`: every figure and table the report shows, without the PDF (no TeX needed)
rule report_items:
    input:
        rules.agreement.output,
        own_figures(),
        [
            f"paper/generated/{s}/{tb}-{f}"
            for s, tb in PAIRS
            for f in ("figure.png", "table.html")
        ],
        # the validation, sensitivity and verdict outputs (rules defined further on: a
        # function, read once every rule is)
        lambda wc: [
            *rules.validation.output,
            *rules.sensitivity.output,
            *rules.verdicts.output,
        ],
        # tables of the validation written as LaTeX only (a kill matrix), when present; not
        # their macros (kill-macros.tex holds no table)
        lambda wc: [
            str(p.with_suffix(".html"))
            for p in sorted(Path("paper/generated/validation").glob("kill*.tex"))
            if not p.stem.endswith("-macros")
        ],


# The simulator against real credit1 at the scheduler-event level (docs/validation.md):
# config/validation.yaml's scenarios on the sim (the records of validation_runs, read only)
# beside the qemu records with xentrace counts.
rule validation:
    input:
        notebook="notebooks/validation.ipynb",
        scenarios="config/validation.yaml",
        # the folders of the shipped qemu records of the scenarios' studies
        records=lambda wc: validation_records(),
        runs=rules.validation_runs.output,
        code=REPORT_CODE + ["schedlab/mirror.py"],
    output:
        table="paper/generated/validation/table.tex",
        table_full="paper/generated/validation/table-full.tex",
        csv="paper/generated/validation/table.csv",
        cells="paper/generated/validation/cells.json",
        macros="paper/generated/validation/macros.tex",
        scenarios="paper/generated/validation/scenarios.csv",
        effects="paper/generated/validation/effects.tex",
        effects_csv="paper/generated/validation/effects.csv",
        calibrated="paper/generated/validation/calibrated.tex",
        effects_figure=report(
            "paper/generated/validation/effects.pdf",
            caption="../report/validation-effects.rst",
            category="Figures",
            subcategory="validation",
            labels={"validation": "effects, sim vs qemu", "format": "PDF"},
        ),
        effects_png=report(
            "paper/generated/validation/effects.png",
            caption="../report/validation-effects.rst",
            category="Figures",
            subcategory="validation",
            labels={"validation": "effects, sim vs qemu", "format": "PNG"},
        ),
        figure=report(
            "paper/generated/validation/figure.pdf",
            caption="../report/validation-figure.rst",
            category="Figures",
            subcategory="validation",
            labels={"validation": "sim vs qemu, scheduler events", "format": "PDF"},
        ),
        figure_png=report(
            "paper/generated/validation/figure.png",
            caption="../report/validation-figure.rst",
            category="Figures",
            subcategory="validation",
            labels={"validation": "sim vs qemu, scheduler events", "format": "PNG"},
        ),
        # the paper's compact table and the full one (every quantity), each written with its HTML
        table_html=report(
            "paper/generated/validation/table.html",
            caption="../report/validation-paper-table.rst",
            category="Tables",
            subcategory="validation",
            labels={"validation": "the paper's table"},
        ),
        table_full_html=report(
            "paper/generated/validation/table-full.html",
            caption="../report/validation-table.rst",
            category="Tables",
            subcategory="validation",
            labels={"validation": "every quantity"},
        ),
        executed=f"{DATA}/derived/notebooks/validation.ipynb",
    log:
        f"{DATA}/logs/notebooks/validation.log",
    benchmark:
        f"{DATA}/benchmarks/notebooks/validation.tsv"
    conda:
        "../../environment.yml"
    params:
        # the data dir, from the executed notebook's path: DATA/derived/notebooks/validation.ipynb
        data=lambda wc, output: str(Path(output.executed).parents[2]),
        out_dir=lambda wc, output: str(Path(output.table).parent),
    shell:
        # the notebook's stderr (the simulator runs' progress lines) also on the terminal: through a
        # pipe to fd 3, never a file papermill would truncate
        "{{ papermill --no-progress-bar --cwd . --stderr-file >(cat >&3) {input.notebook} {output.executed} "
        "-p config_file {input.scenarios} -p data_dir {params.data} -p runs {input.runs} "
        "-p out_dir {params.out_dir}; "
        "}} 3>&2 > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"


# A table of the validation that its writer leaves as LaTeX only (e.g. a kill matrix of the
# validation's mutants, paper/generated/validation/kill-matrix.tex): its report page, read back
# into the table model. report_items asks for it only when such a file is present.
rule validation_extra_table:
    input:
        tex="paper/generated/validation/{name}.tex",
        code=REPORT_CODE,
        view=REPORT_VIEW,
    output:
        report(
            "paper/generated/validation/{name}.html",
            caption="../report/validation-extra-table.rst",
            category="Tables",
            subcategory="validation",
            labels={"validation": "{name}"},
        ),
    log:
        f"{DATA}/logs/notebooks/validation-{{name}}.log",
    wildcard_constraints:
        name="kill[-_a-z0-9]*",
    conda:
        "../../environment.yml"
    shell:
        "python {input.view} table {input.tex} {output} > {log} 2>&1 || {{ cat {log}; exit 1; }}"


# The validation's power (docs/validation.md, "Mutants"): each mutant validated by the same
# rule, from the same qemu records, as the model (its scenario verdicts only: no swaps), from
# the mutant's runs (validation_runs_mutant; read only).
rule validate_sim_mutant:
    input:
        runs=f"{DATA}/runs/validation/mutants/{{mutant}}.json",
        scenarios="config/validation.yaml",
        records=lambda wc: validation_records(),
        code=REPORT_CODE + ["schedlab/mirror.py"],
    output:
        f"{DATA}/derived/validation/mutants/{{mutant}}/scenarios.csv",
    log:
        f"{DATA}/logs/validation/mutant-{{mutant}}.log",
    benchmark:
        f"{DATA}/benchmarks/validation/mutant-{{mutant}}.tsv"
    wildcard_constraints:
        mutant="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    params:
        out=lambda wc, output: str(Path(output[0]).parent),
        # the data dir, from the output's path: DATA/derived/validation/mutants/NAME/scenarios.csv
        data=lambda wc, output: str(Path(output[0]).parents[4]),
    shell:
        "python -m schedlab.report.validation validate --config {input.scenarios} --runs {input.runs} "
        "--mutant {wildcards.mutant} --data-dir {params.data} --out {params.out} "
        "> {log} 2>&1 || {{ tail -20 {log}; exit 1; }}"


# The kill matrix: mutant x scenario, beside the model and its scenarios' variants swapped.
rule kill_matrix:
    input:
        model=rules.validation.output.scenarios,
        mutants=expand(
            f"{DATA}/derived/validation/mutants/{{mutant}}/scenarios.csv",
            mutant=VALIDATION_MUTANTS,
        ),
        scenarios="config/validation.yaml",
        code=REPORT_CODE,
    output:
        csv="paper/generated/validation/kill-matrix.csv",
        tex="paper/generated/validation/kill-matrix.tex",
        macros="paper/generated/validation/kill-macros.tex",
    log:
        f"{DATA}/logs/validation/kill-matrix.log",
    conda:
        "../../environment.yml"
    params:
        out=lambda wc, output: str(Path(output.csv).parent),
    shell:
        "python -m schedlab.report.validation kill-matrix --config {input.scenarios} --out {params.out} "
        "{input.model} {input.mutants} > {log} 2>&1 || {{ cat {log}; exit 1; }}"
