# lab testbed: the builds the lab driver installs on a host, and the virtual lab host.
#
# Included from the Snakefile after qemu.smk (it uses its rules' outputs):
#     include: "workflow/rules/lab.smk"
#
# A lab build is a folder <builds dir>/<build name>/ (xen.gz, vmlinuz, initrd.img,
# build.json with what `xl info` must report once it booted), made by
# `python -m schedlab.builds.lab` from the qemu testbed's cached Xen builds (Debian's
# prebuilt hypervisor for `patches: stock`, the source build of xen-patches/<series>
# otherwise) and its dom0 kernel. The builds dir is $SCHEDLAB_LAB_BUILDS, default
# $SCHEDLAB_CACHE/builds/lab (outside the repository, like the qemu images); the
# manifest below (git-ignored build/) records which builds the pipeline made, so run
# jobs can depend on it.
#
# The virtual lab host's disk image (GRUB + Xen + dom0, `python -m schedlab.testing.vhost
# build`) needs root and the Debian mirror; see docs/lab-testbed.md.

LAB_BUILD_INPUTS = [
    "schedlab/builds/lab.py",
    "schedlab/lab/driver.py",
]


rule lab_builds:
    """The lab builds of one study's variants (one folder per variant build) and their manifest:
    {variant: {name, build_id, expect, source}}."""
    input:
        LAB_BUILD_INPUTS,
        "build/qemu/images.json",
        lambda wc: [f"build/qemu/xen-src-{s}.path" for s in lab_xen_series(wc.study)],
        study=f"{STUDIES_DIR}/{{study}}.yaml",
    output:
        "build/lab/builds-{study}.json",
    log:
        "build/lab/builds-{study}.log",
    wildcard_constraints:
        study="[a-z][a-z0-9_]*",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.lab make --study {input.study} "
        "--manifest {output} > {log} 2>&1 || {{ cat {log}; exit 1; }}"


rule lab_vhost_image:
    """The virtual lab host's disk image (root: loop mount + chroot apt-get; ~2-4 min).
    The file holds the image folder ($SCHEDLAB_CACHE/lab/vhost0/images/<recipe key>)."""
    input:
        "schedlab/testing/vhost.py",
        "build/qemu/images.json",
    output:
        "build/lab/vhost0-image.path",
    log:
        "build/lab/vhost0-image.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.testing.vhost build > {output} 2> {log} || {{ cat {log}; exit 1; }}"


rule lab_vhost_test:
    """Power the virtual lab host on through its BMC and run the network pair's study (S1) on it
    end to end, both variants (tests/test_lab_vhost.py; 15-40 min under TCG)."""
    input:
        rules.lab_vhost_image.output,
        # (a function: asked only when the rule runs, not of every study list)
        lambda wc: f"build/lab/builds-{study_of_kind('netperf-pair')}.json",
    output:
        touch("build/lab/vhost-test.ok"),
    log:
        "build/lab/vhost-test.log",
    conda:
        "../../environment.yml"
    shell:
        "SCHEDLAB_LAB_VHOST_TESTS=1 python -m pytest -q -m slow tests/test_lab_vhost.py > {log} 2>&1"
