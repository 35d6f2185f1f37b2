import glob

# Build stage: what the testbeds run. The sim testbed runs the credit1
# simulator, built here from sim/src; the qemu and lab testbeds' Xen and kernel
# builds are rules in workflow/rules/qemu.smk (content-hash cached).


# The validation's mutants: the simulator with one credit1 mechanism knocked out (a KO_
# switch in sim/src, docs/validation.md "Mutants")
rule build_sim_mutant:
    input:
        "sim/Makefile",
        sorted(glob.glob("sim/src/*")),
    output:
        "sim/build/mutants/credit1sim-{mutant}",
    log:
        "data/logs/build_sim_mutant/{mutant}.log",
    wildcard_constraints:
        mutant="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    shell:
        "make -C sim build/mutants/credit1sim-{wildcards.mutant} > {log} 2>&1 || {{ cat {log}; exit 1; }}"


rule build_sim:
    input:
        "sim/Makefile",
        sorted(glob.glob("sim/src/*")),
    output:
        "sim/build/credit1sim",
    log:
        "data/logs/build_sim.log",
    conda:
        "../../environment.yml"
    shell:
        "make -C sim > {log} 2>&1 || {{ cat {log}; exit 1; }}"
