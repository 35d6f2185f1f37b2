# Kernel builds and the native image: what S2's native side boots on the qemu testbed
# (docs/kernel-builds.md). Included from the Snakefile after qemu.smk.
#
# Kernels and images are cached outside the repository, in $SCHEDLAB_CACHE (default
# ~/.cache/schedlab): kernel/<hash>/ and qemu/native/<hash>/, named by a hash of their
# recipe. The JSON files below (under build/, git-ignored) point at the cached build the
# pipeline used, so the run stage can depend on them; a second request only finds the
# cache entry (seconds).

KERNEL_INPUTS = ["schedlab/builds/kernel.py", "config/kernel/base.config"]
NATIVE_IMAGE_INPUTS = [
    "schedlab/builds/native.py",
    "schedlab/builds/rootfs.py",
    "guest/native-init.sh",
    "guest/init-common.sh",
]


rule kernel_build:
    """Linux from Debian's linux-source-6.1: tinyconfig + config/kernel/base.config +
    config/kernel/{config}.config (checked after olddefconfig), bzImage. ~10-25 min on 2 cores.
    """
    input:
        KERNEL_INPUTS,
        "config/kernel/{config}.config",
    output:
        "build/kernel/{config}.json",
    log:
        "build/kernel/{config}.log",
    wildcard_constraints:
        config="[a-z0-9][a-z0-9_.-]*",
    conda:
        "../../environment.yml"
    threads: 64  # capped at --cores by Snakemake
    shell:
        "python -m schedlab.builds.kernel {wildcards.config} --json -j {threads} > {output} 2> {log}"


rule qemu_native_image:
    """debootstrap'ed bookworm with sshd and the packs' Debian packages, as an ext4 image, plus
    ssh keys and the prepared kernbench tree (root: debootstrap chroots)."""
    input:
        NATIVE_IMAGE_INPUTS,
    output:
        "build/qemu/native-image.json",
    log:
        "build/qemu/native-image.log",
    conda:
        "../../environment.yml"
    shell:
        "python -m schedlab.builds.native image > {output} 2> {log}"
