# Paper stage: the methods section and dataset checksum are generated from the
# records' provenance; latexmk builds the PDF and the build fails on undefined
# references or citations.


rule methods:
    input:
        cells=[f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        studies=[f"{STUDIES_DIR}/{s}.yaml" for s in STUDIES],
        code=REPORT_CODE,
    output:
        "paper/generated/methods.tex",
        "paper/generated/testbeds.tex",
        "paper/generated/dataset.tex",
        "paper/generated/provenance.tex",
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


rule paper:
    input:
        "paper/main.tex",
        "paper/refs.bib",
        sorted(glob.glob("paper/sections/*.tex")),
        study_outputs(),
        "paper/generated/methods.tex",
        "paper/generated/testbeds.tex",
        "paper/generated/dataset.tex",
        "paper/generated/provenance.tex",
        rules.verdicts.output,
        "paper/generated/agreement/table.tex",
        "paper/generated/agreement/macros.tex",
        "paper/generated/agreement/testbeds.tex",
        "paper/generated/agreement/testbeds-macros.tex",
        "paper/generated/validation/table.tex",
        "paper/generated/validation/macros.tex",
        "paper/generated/validation/figure.pdf",
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
    shell:
        "cd paper && latexmk -pdf -interaction=nonstopmode -halt-on-error main.tex > ../{log} 2>&1 "
        "|| {{ tail -40 ../{log}; exit 1; }}; "
        "if grep -E 'undefined (references|citations)|Citation .* undefined|Reference .* undefined|Value .* undefined' main.log; "
        "then echo 'paper: undefined references, citations or values (see paper/main.log)'; exit 1; fi"
