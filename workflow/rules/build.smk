import glob

# Build stage: what the testbeds run. The sim testbed runs the credit1
# simulator, built here from sim/src; the qemu and lab testbeds' Xen and kernel
# builds are rules in workflow/rules/qemu.smk (content-hash cached).


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
