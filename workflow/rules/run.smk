# Run stage. On the sim, one job per (study, variant, point), in parallel; on
# real hosts (qemu, lab), one job per round of the study's interleaved plan (a
# round is a boot), in the plan's order within it. Either way the notebooks read data/runs/TESTBED/STUDY/all.json.
#
# Sim: one job per (testbed, study, variant, point). `schedlab run`
# writes one raw record per run under data/raw/ (append-only, never a declared
# output, so Snakemake never deletes one) and the point's manifest, which is
# the job's output. Records that already exist for the current definition and
# build are reused, so a killed or extended sweep only runs what is missing.


rule run_point:
    input:
        run_inputs,
    output:
        f"{DATA}/runs/{{testbed}}/{{study}}/{{variant}}/{{point}}.json",
    log:
        f"{DATA}/logs/{{testbed}}/{{study}}/{{variant}}/{{point}}.log",
    benchmark:
        f"{DATA}/benchmarks/{{testbed}}/{{study}}/{{variant}}/{{point}}.tsv"
    wildcard_constraints:
        testbed="sim",
        study="[a-z][a-z0-9_]*",
        variant="[a-z][a-z0-9_]*",
        point="[A-Za-z0-9_.=-]+",
    retries: 1
    conda:
        "../../environment.yml"
    resources:
        # one virtual host / lab host at a time per testbed; sim jobs are free
        testbed_host=lambda wc: 0 if wc.testbed == "sim" else 1,
    params:
        # part of the job's identity: a changed definition re-runs the job
        definition=lambda wc: definition_hash(
            wc.study, wc.testbed, wc.variant, wc.point
        ),
        point_args=lambda wc: point_args(wc.study, wc.testbed, wc.point),
        study_file=lambda wc: f"{STUDIES_DIR}/{wc.study}.yaml",
        seed=SEED,
        # the data dir, from the output: DATA/runs/TESTBED/STUDY/VARIANT/POINT.json
        data=lambda wc, output: str(Path(output[0]).parents[4]),
    shell:
        # the runs' lines go to the log only: the terminal shows Snakemake's progress (and,
        # with the profile's show-failed-logs, the log of a job that failed)
        "python -m schedlab.cli run {params.study_file} --testbed {wildcards.testbed} --variant {wildcards.variant} "
        "{params.point_args} --seed {params.seed} --out {params.data} --manifest {output} > {log} 2>&1"


rule gather_points:
    input:
        lambda wc: point_manifests(wc.study, wc.testbed),
    output:
        f"{DATA}/runs/{{testbed}}/{{study}}/all.json",
    log:
        f"{DATA}/logs/{{testbed}}/{{study}}/gather.log",
    wildcard_constraints:
        testbed="sim",
    conda:
        "../../environment.yml"
    # a script, not a `run:` block: Snakemake runs a `run:` job in a new Snakemake process
    # that parses the whole workflow again (3 s a job; a script starts in 0.2 s)
    script:
        "../scripts/gather_points.py"


# Real hosts: one job per round of the study's plan. There a round is one fresh boot (or one per
# variant), the experimental unit, and boots are independent, so rounds may run side by side:
# each job takes one `testbed_host`, and --resources testbed_host=N runs N at once (qemu: two
# boots side by side measure what one alone does, docs/qemu-measurements.md; lab: a pool's size).
# Records already on disk are reused, so a killed job resumes.
rule run_round:
    input:
        run_inputs,
    output:
        f"{DATA}/runs/{{testbed}}/{{study}}/rounds/{{round}}.json",
    log:
        f"{DATA}/logs/{{testbed}}/{{study}}/round-{{round}}.log",
    benchmark:
        f"{DATA}/benchmarks/{{testbed}}/{{study}}/round-{{round}}.tsv"
    wildcard_constraints:
        testbed=alternatives([tb for tb in MEASURE if tb != "sim"]),
        study="[a-z][a-z0-9_]*",
        round="[0-9]+",
    retries: 1
    conda:
        "../../environment.yml"
    resources:
        testbed_host=1,
    params:
        definition=lambda wc: [
            definition_hash(wc.study, wc.testbed, v, pid)
            for v in sl_config.testbed_settings(STUDIES[wc.study], wc.testbed)[
                "variants"
            ]
            for pid in study_points(wc.study, wc.testbed)
        ],
        study_file=lambda wc: f"{STUDIES_DIR}/{wc.study}.yaml",
        seed=SEED,
        # DATA/runs/TESTBED/STUDY/rounds/ROUND.json
        data=lambda wc, output: str(Path(output[0]).parents[4]),
        host=lambda wc: (
            f"--host {config['lab_host']}"
            if wc.testbed == "lab" and config.get("lab_host")
            else ""
        ),
    shell:
        "python -m schedlab.cli run-study {params.study_file} --testbed {wildcards.testbed} {params.host} "
        "--round {wildcards.round} --seed {params.seed} --out {params.data} --manifest {output} > {log} 2>&1"


# The study manifest once every round ran: the records of all rounds, selected as the paper
# selects them (registered, clean, today's design).
rule run_study:
    input:
        lambda wc: [
            f"{DATA}/runs/{wc.testbed}/{wc.study}/rounds/{r}.json"
            for r in study_rounds(wc.study, wc.testbed)
        ],
        study=f"{STUDIES_DIR}/{{study}}.yaml",
    output:
        f"{DATA}/runs/{{testbed}}/{{study}}/all.json",
    log:
        f"{DATA}/logs/{{testbed}}/{{study}}.log",
    wildcard_constraints:
        testbed=alternatives([tb for tb in MEASURE if tb != "sim"]),
        study="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    params:
        seed=SEED,
        data=lambda wc, output: str(Path(output[0]).parents[3]),
    shell:
        "python -m schedlab.cli dataset {input.study} --testbed {wildcards.testbed} --seed {params.seed} "
        "--out {params.data} --manifest {output} > {log} 2>&1"


# Reported but not measured in this build: the study manifest from the raw records
# shipped in data/raw/<testbed> (nothing runs; the records are only read).
rule dataset_study:
    input:
        study=f"{STUDIES_DIR}/{{study}}.yaml",
        records=lambda wc: shipped_folder(wc.study, wc.testbed),
    output:
        f"{DATA}/runs/{{testbed}}/{{study}}/all.json",
    log:
        f"{DATA}/logs/{{testbed}}/{{study}}-dataset.log",
    benchmark:
        f"{DATA}/benchmarks/{{testbed}}/{{study}}-dataset.tsv"
    wildcard_constraints:
        testbed=alternatives([tb for tb in SHIPPED if tb != "sim"]),
        study="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    params:
        seed=SEED,
        # DATA/runs/TESTBED/STUDY/all.json
        data=lambda wc, output: str(Path(output[0]).parents[3]),
    shell:
        "python -m schedlab.cli dataset {input.study} --testbed {wildcards.testbed} --seed {params.seed} "
        "--out {params.data} --manifest {output} > {log} 2>&1"


# The validation's simulator runs (docs/validation.md; schedlab.mirror): each scenario of
# config/validation.yaml mirrored on the simulator, every case at each of the file's seeds, as
# raw records under data/raw/validation/STUDY/ (the run stage's record writer; append-only,
# never a declared output). The manifest listing them is the job's output; the report rules
# read only those records. A run's build is its binary's sha256, so the model and each mutant
# have records of their own, reused on a rerun.
rule validation_runs:
    input:
        scenarios="config/validation.yaml",
        # the qemu records: a trace window's span is part of a mirror's definition
        records=lambda wc: validation_records(),
        sim="sim/build/credit1sim",
        code=["schedlab/mirror.py", "schedlab/run.py", "schedlab/testbeds/sim.py"],
    output:
        f"{DATA}/runs/validation/model.json",
    log:
        f"{DATA}/logs/validation/runs-model.log",
    benchmark:
        f"{DATA}/benchmarks/validation/runs-model.tsv"
    conda:
        "../../environment.yml"
    threads: 4  # capped at --cores by Snakemake
    params:
        seed=SEED,
        # the data dir, from the output: DATA/runs/validation/model.json
        data=lambda wc, output: str(Path(output[0]).parents[2]),
    shell:
        "python -m schedlab.mirror run --config {input.scenarios} --data {params.data} --seed {params.seed} "
        "--jobs {threads} --out {output} > {log} 2>&1 || {{ tail -20 {log}; exit 1; }}"


# A mutant's runs (docs/validation.md, "Mutants"): the same, on the mutant's binary
rule validation_runs_mutant:
    input:
        scenarios="config/validation.yaml",
        records=lambda wc: validation_records(),
        sim="sim/build/mutants/credit1sim-{mutant}",
        code=["schedlab/mirror.py", "schedlab/run.py", "schedlab/testbeds/sim.py"],
    output:
        f"{DATA}/runs/validation/mutants/{{mutant}}.json",
    log:
        f"{DATA}/logs/validation/runs-{{mutant}}.log",
    benchmark:
        f"{DATA}/benchmarks/validation/runs-{{mutant}}.tsv"
    wildcard_constraints:
        mutant="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    threads: 4
    params:
        seed=SEED,
        # the data dir, from the output: DATA/runs/validation/mutants/NAME.json
        data=lambda wc, output: str(Path(output[0]).parents[3]),
    shell:
        "python -m schedlab.mirror run --config {input.scenarios} --sim {input.sim} --mutant {wildcards.mutant} "
        "--data {params.data} --seed {params.seed} --jobs {threads} --out {output} "
        "> {log} 2>&1 || {{ tail -20 {log}; exit 1; }}"
