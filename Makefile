# The two commands of the README: `make paper` and `make test`. Each installs
# what it needs: Debian packages (apt-get when root, otherwise a message naming
# them) and a .venv from the pinned PyPI packages in requirements.lock.
# The researcher's desk: `make lab` (JupyterLab on notebooks/), `make report`
# (Snakemake's HTML report), `make lint`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
# JupyterLab has its own venv: installed into .venv it would slow every notebook job
# (docs/workflow.md)
LAB_VENV := .venv-lab
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

DEBS_BASE := python3 python3-venv make gcc libc6-dev git
DEBS_PAPER := $(DEBS_BASE) ministat latexmk texlive-latex-base texlive-latex-recommended \
	texlive-latex-extra texlive-science texlive-fonts-recommended texlive-pictures lmodern
# the lab testbed's tests drive a real sshd and a real IPMI endpoint (ipmi_sim)
DEBS_LAB := openipmi ipmitool openssh-server openssh-client grub2-common grub-pc-bin fdisk util-linux socat
# the benchmark packs' tools (schedlab pack debs)
DEBS_PACKS := bc bison flex libelf-dev linux-source-6.1 pbzip2 postgresql-15 postgresql-client-15 \
	sysbench xz-utils
# the qemu testbed: QEMU, and what builds its dom0 image
# (and what builds Xen from Debian's source package: dpkg-dev for apt-get source, patch)
DEBS_QEMU := qemu-system-x86 qemu-utils debootstrap e2fsprogs cpio openssh-client gcc-12 make libelf1 \
	debian-archive-keyring dpkg-dev patch
# a real browser for the report's test (tests/test_desk.py drives it through chromedriver)
DEBS_BROWSER := chromium chromium-driver
DEBS_TEST := $(DEBS_PAPER) $(DEBS_LAB) $(DEBS_PACKS) $(DEBS_QEMU) $(DEBS_BROWSER)
# The flags (cores, testbed_host=1, ...) live in the workflow profile, which Snakemake finds
# by itself beside the Snakefile (workflow/Snakefile, workflow/profiles/default).
SNAKEMAKE := snakemake
# JOBS=N: at most N jobs at once (default: all cores)
ifneq ($(JOBS),)
SNAKEMAKE += --cores $(JOBS)
endif
# MEASURE=sim,qemu: also measure on qemu (root, QEMU, hours) instead of re-deriving its tables
# from the raw records shipped in data/raw/qemu
ifneq ($(MEASURE),)
SNAKEMAKE += --config 'measure=[$(MEASURE)]'
endif

.PHONY: paper test test-all lint report lab deps-base deps-paper deps-test venv container clean-derived
.DEFAULT_GOAL := paper

paper: deps-paper $(VENV)/.installed
	@# a killed run leaves Snakemake's lock behind; clear it when no other run is active
	@if [ -n "$$(ls -A .snakemake/locks 2>/dev/null)" ] && ! pgrep -f '$(VENV)/bin/snakemake' >/dev/null; then \
	  snakemake --unlock --quiet >/dev/null 2>&1 || true; fi
	$(SNAKEMAKE)
	@echo "paper: $(CURDIR)/paper/main.pdf"

# SCHEDLAB_QEMU_TESTS=1: the suite boots the virtual host for one S1 run (building its cached images if
# absent); =all adds the long ones (S0, S2, killing QEMU, native boots: ~30 min more); =0 none
test: deps-test $(VENV)/.installed lint
	SCHEDLAB_QEMU_TESTS=$${SCHEDLAB_QEMU_TESTS:-1} pytest --durations=15

# Every opt-in suite too: the long qemu boots (S0, S2, S3, S4, killing QEMU, native boots with
# a kernel built from source), the virtual lab host end to end, the one-node SLURM cluster.
# Each installs its Debian packages and builds what it boots (root); a few hours on 2 cores.
test-all: deps-test $(VENV)/.installed
	SCHEDLAB_QEMU_TESTS=all SCHEDLAB_LAB_VHOST_TESTS=1 SCHEDLAB_SLURM_TESTS=1 pytest

# ruff (lint and format, configured in pyproject.toml), the workflow's format and lints.
lint: deps-base $(VENV)/.installed
	ruff check schedlab tests benchmarks notebooks
	ruff format --check schedlab tests benchmarks notebooks
	snakefmt --check .
	$(SNAKEMAKE) --lint

# Every figure and table with its caption in one HTML file (report.html), browsable
# without LaTeX; builds what it shows first (not the PDF: no TeX needed).
report: deps-base $(VENV)/.installed
	@# manifests `schedlab run-study --manifest` wrote (the notebooks' hint) join Snakemake's records
	@workflow/scripts/adopt-manifests $$(sed -n 's/^data_dir: *\([^ #]*\).*/\1/p' config/config.yaml) $(SNAKEMAKE)
	$(SNAKEMAKE) report_items
	$(SNAKEMAKE) --report report.html report_items
	@echo "report: $(CURDIR)/report.html"

# JupyterLab on notebooks/ with the project's .venv as kernel ("schedlab (.venv)"); kernels
# start in the repository's root, where papermill runs the notebooks (root: --allow-root, e.g. in
# the container). LAB_FLAGS: more server flags, e.g. LAB_FLAGS="--no-browser --port=8899".
lab: deps-base $(VENV)/.installed $(LAB_VENV)/.installed
	$(LAB_VENV)/bin/jupyter-lab --ServerApp.root_dir="$(CURDIR)/notebooks" --MappingKernelManager.root_dir="$(CURDIR)" \
	  --KernelSpecManager.ensure_native_kernel=False \
	  $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_FLAGS)

$(LAB_VENV)/.installed: requirements-lab.lock workflow/lab/overrides.json $(VENV)/.installed
	test -x $(LAB_VENV)/bin/python || $(PYTHON) -m venv $(LAB_VENV)
	$(LAB_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-lab.lock
	@# .venv's kernel takes the name the notebooks ask for (python3, as papermill runs them), in
	@# place of the lab venv's own, which lacks the project's packages: saving a notebook in the
	@# lab keeps its kernelspec. No news fetched (overrides.json).
	$(VENV)/bin/python -m ipykernel install --prefix $(LAB_VENV) --name python3 --display-name "schedlab (.venv)"
	install -D -m 644 workflow/lab/overrides.json $(LAB_VENV)/share/jupyter/lab/settings/overrides.json
	touch $@

deps-base:
	@workflow/scripts/ensure-debs $(DEBS_BASE)

deps-paper:
	@workflow/scripts/ensure-debs $(DEBS_PAPER)

deps-test:
	@workflow/scripts/ensure-debs $(DEBS_TEST)

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "schedlab needs Python >= 3.11 (Snakemake 9); found " + sys.version.split()[0])'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

# The analysis and paper toolchain as a container image (podman, no Docker engine needed).
container:
	workflow/scripts/build-container

clean-derived:
	rm -rf data/runs data/derived paper/generated paper/main.pdf
