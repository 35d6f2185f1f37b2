"""Builds of things the testbeds boot: kernels (schedlab.build.kernel)."""
