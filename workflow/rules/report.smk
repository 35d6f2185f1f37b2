# Stats and report stage: one notebook per study (= per paper table and its
# figure), run by papermill on the study's manifests. Each writes its table,
# figure, text macros and the sidecar mapping every cell to its runs.

rule notebook:
    input:
        notebook="notebooks/{study}.ipynb",
        study=f"{STUDIES_DIR}/{{study}}.yaml",
        runs=f"{DATA}/runs/{{testbed}}/{{study}}/all.json",
        code=REPORT_CODE,
    output:
        [f"paper/generated/{{study}}/{{testbed}}-{f}" for f in NB_OUT],
        executed=f"{DATA}/derived/notebooks/{{study}}-{{testbed}}.ipynb",
    wildcard_constraints:
        testbed="sim|qemu|lab",
        study="[a-z][a-z0-9_]*",
    params:
        data=DATA,
        studies_dir=STUDIES_DIR,
    conda:
        "../../environment.yml"
    log:
        f"{DATA}/logs/notebooks/{{study}}-{{testbed}}.log",
    shell:
        "papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p study {wildcards.study} -p testbed {wildcards.testbed} -p data_dir {params.data} "
        "-p studies_dir {params.studies_dir} -p out_dir paper/generated/{wildcards.study} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"


# Agreement across testbeds and with the published figures (reads the sidecars).
rule agreement:
    input:
        notebook="notebooks/agreement.ipynb",
        cells=lambda wc: [f"paper/generated/{s}/{tb}-cells.json" for s, tb in PAIRS],
        code=REPORT_CODE,
    output:
        "paper/generated/agreement/table.tex",
        "paper/generated/agreement/cells.json",
        "paper/generated/agreement/macros.tex",
        "paper/generated/agreement/testbeds.tex",
        "paper/generated/agreement/testbeds-cells.json",
        "paper/generated/agreement/testbeds-macros.tex",
        executed=f"{DATA}/derived/notebooks/agreement.ipynb",
    params:
        testbeds=",".join(REPORTED),
        pairs=",".join(f"{s}:{tb}" for s, tb in PAIRS),
        studies_dir=STUDIES_DIR,
    conda:
        "../../environment.yml"
    log:
        f"{DATA}/logs/notebooks/agreement.log",
    shell:
        "papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p testbeds {params.testbeds} -p pairs {params.pairs} -p studies_dir {params.studies_dir} > {log} 2>&1 "
        "|| {{ tail -40 {log}; exit 1; }}"


# The mechanism figure: one traced sim scenario, three lock/yield variants on one timeline.
rule mechanism:
    input:
        notebook="notebooks/mechanism.ipynb",
        study=f"{STUDIES_DIR}/s0.yaml",
        sim="sim/build/credit1sim",
        code="schedlab/testbeds/sim.py",
    output:
        "paper/generated/mechanism/figure.pdf",
        "paper/generated/mechanism/macros.tex",
        "paper/generated/mechanism/caption.tex",
        executed=f"{DATA}/derived/notebooks/mechanism.ipynb",
    params:
        studies_dir=STUDIES_DIR,
    conda:
        "../../environment.yml"
    log:
        f"{DATA}/logs/notebooks/mechanism.log",
    shell:
        "papermill --no-progress-bar --cwd . {input.notebook} {output.executed} "
        "-p studies_dir {params.studies_dir} > {log} 2>&1 || {{ tail -40 {log}; exit 1; }}"
