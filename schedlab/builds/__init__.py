"""The build stage: what the testbeds boot, built from Debian's packages and sources and
cached by recipe hash under $SCHEDLAB_CACHE (never in the git tree).

    schedlab.builds.images   Xen (Debian's and patched source builds), dom0 and guest images
    schedlab.builds.kernel   Linux kernels from Debian's linux-source with config fragments
    schedlab.builds.native   the root filesystem for kernels booted without Xen
    schedlab.builds.lab      what the lab driver installs on a host, one folder per build
    schedlab.builds.rootfs   what every booted image shares: ssh keys, sshd, init

The qemu and the lab testbed both use these; nothing here imports a testbed.
"""
