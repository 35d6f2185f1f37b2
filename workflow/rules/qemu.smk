# qemu testbed: image builds (draft; included from the Snakefile by the lead).
#
# The images live outside the repo, in $SCHEDLAB_CACHE/qemu (default ~/.cache/schedlab/qemu),
# in directories named by a hash of their recipe; `python -m schedlab.builds.images`
# only builds what is missing. The files below (under build/, git-ignored) record which
# cached build the pipeline used, so rules downstream can depend on them.
#
# Building the dom0 image needs root (debootstrap chroots) and the Debian mirror; host
# packages: qemu-system-x86 qemu-utils debootstrap e2fsprogs cpio openssh-client.

import glob

QEMU_IMAGE_INPUTS = [
    "schedlab/builds/images.py",
    "guest/dom0-init.sh",
    "guest/init-common.sh",
    "schedlab/builds/rootfs.py",
    "guest/dom0-initramfs-init.sh",
    "guest/guest-init.sh",
    *sorted(glob.glob("guest/lockmod/*")),
]


rule qemu_xen_stock:
    """Debian's prebuilt xen-hypervisor-4.17-amd64 (same version as dom0's xen-utils)."""
    input:
        QEMU_IMAGE_INPUTS,
    output:
        "build/qemu/xen-stock.path",
    log:
        "build/qemu/xen-stock.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.images xen > {output} 2> {log}"


rule qemu_dom0:
    """debootstrap'ed dom0 (ext4 disk image), its kernel/initramfs, the PV guest, ssh keys."""
    input:
        QEMU_IMAGE_INPUTS,
    output:
        "build/qemu/dom0.path",
    log:
        "build/qemu/dom0.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.images dom0 > {output} 2> {log}"


rule qemu_images:
    """Everything the qemu testbed boots; the JSON holds the paths and the build_id."""
    input:
        rules.qemu_xen_stock.output,
        rules.qemu_dom0.output,
    output:
        "build/qemu/images.json",
    log:
        "build/qemu/images.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.images all > {output} 2> {log}"


rule qemu_xen_src:
    """Xen 4.17 built from Debian's source package plus the patch series xen-patches/<series>/
    ("a+b": series a then b; cache keyed by the patch contents). Needs deb-src and the
    hypervisor's build deps.
    """
    input:
        QEMU_IMAGE_INPUTS,
        lambda wc: [
            p
            for part in wc.series.split("+")
            for p in sorted(glob.glob(f"xen-patches/{part}/*.patch"))
        ],
    output:
        "build/qemu/xen-src-{series}.path",
    log:
        "build/qemu/xen-src-{series}.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.images xen-src --patches {wildcards.series} > {output} 2> {log}"


rule qemu_test:
    """Boot the virtual host and run one short S1 point (tests/test_qemu_testbed.py, ~5-10 min)."""
    input:
        rules.qemu_images.output,
    output:
        touch("build/qemu/test.ok"),
    log:
        "build/qemu/test.log",
    conda:
        "../../environment.yml"
    shell:
        "SCHEDLAB_QEMU_TESTS=1 python -m pytest -m qemu -q tests/test_qemu_testbed.py > {log} 2>&1"
