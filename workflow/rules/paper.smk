# Paper stage: the methods section and dataset checksum are generated from the
# records' provenance; latexmk builds the PDF and the build fails on undefined
# references or citations.


rule methods:
    input:
        cells=[f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in STUDIES],
        measured=sorted(glob.glob(f"{DATA}/measured/*.out")),
        code=REPORT_CODE,
    output:
        "paper/generated/methods.tex",
        "paper/generated/measured.tex",
        "paper/generated/testbeds.tex",
        "paper/generated/dataset.tex",
        "paper/generated/provenance.tex",
        "paper/generated/variants.tex",
        "paper/generated/calibrated.tex",
        "paper/generated/records.tex",
        "paper/generated/resources.tex",
    log:
        "data/logs/methods.log",
    conda:
        "../../environment.yml"
    params:
        args=" ".join(
            [
                f"--data-dir {DATA} --paper-dir paper --studies-dir {STUDIES_DIR} --seed {SEED}"
            ]
            + [f"--study {s}" for s in STUDIES]
            + [f"--pair {s}:{tb}" for s, tb in PAIRS]
            + [f"--measured {tb}" for tb in MEASURE]
        ),
    shell:
        "python -m schedlab.report.methods {params.args} > {log} 2>&1 || {{ cat {log}; exit 1; }}"


# The study sections in the study list's order: a study's own text, else the template's
# (a new study needs no edit of main.tex).
rule sections:
    input:
        template="paper/templates/study-section.tex",
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in STUDIES],
        code=REPORT_CODE,
    output:
        "paper/generated/sections.tex",
        [
            f"paper/generated/{s}/section.tex"
            for s in STUDIES
            if not Path(f"paper/sections/{s}.tex").exists()
        ],
    log:
        "data/logs/sections.log",
    conda:
        "../../environment.yml"
    params:
        # the study files' directory and the paper's, from the input and output
        studies_dir=lambda wc, input: str(Path(input.studies[0]).parent),
        paper=lambda wc, output: str(Path(output[0]).parents[1]),
        args=" ".join(f"--study {s}" for s in STUDIES),
    shell:
        "python -m schedlab.report.sections --paper-dir {params.paper} --studies-dir {params.studies_dir} {params.args} "
        "> {log} 2>&1 || {{ cat {log}; exit 1; }}"


rule paper:
    input:
        "paper/main.tex",
        "paper/refs.bib",
        sorted(glob.glob("paper/sections/*.tex")),
        study_outputs(),
        "paper/generated/methods.tex",
        "paper/generated/measured.tex",
        "paper/generated/testbeds.tex",
        "paper/generated/dataset.tex",
        "paper/generated/provenance.tex",
        "paper/generated/variants.tex",
        "paper/generated/calibrated.tex",
        "paper/generated/records.tex",
        "paper/generated/resources.tex",
        rules.sections.output,
        rules.verdicts.output,
        rules.verdicts_sweep.output,
        "paper/generated/agreement/table.tex",
        "paper/generated/agreement/macros.tex",
        "paper/generated/agreement/testbeds.tex",
        "paper/generated/agreement/testbeds-macros.tex",
        "paper/generated/validation/table.tex",
        "paper/generated/validation/macros.tex",
        "paper/generated/validation/figure.pdf",
        "paper/generated/validation/effects.tex",
        "paper/generated/validation/calibrated.tex",
        "paper/generated/validation/effects.pdf",
        "paper/generated/validation/kill-matrix.tex",
        "paper/generated/validation/kill-macros.tex",
        "paper/generated/sensitivity/table.tex",
        "paper/generated/sensitivity/macros.tex",
        [f"paper/generated/sensitivity/{s}-tornado.pdf" for s in SENS_STUDIES],
        own_figures(("figure.pdf", "macros.tex", "caption.tex")),
    output:
        "paper/main.pdf",
    log:
        "data/logs/latexmk.log",
    conda:
        "../../environment.yml"
    # TeX wraps a warning after 79 characters: match where each warning starts
    shell:
        "cd paper && latexmk -pdf -interaction=nonstopmode -halt-on-error main.tex > ../{log} 2>&1 "
        "|| {{ tail -40 ../{log}; exit 1; }}; "
        "if grep -E 'undefined (references|citations)|LaTeX Warning: (Citation|Reference) |Package schedlab Warning: Value ' main.log; "
        "then echo 'paper: undefined references, citations or values (see paper/main.log)'; exit 1; fi"
