"""Kernel builds (schedlab/builds/kernel.py): fragments, the option check, the cache.

Fast tests need nothing; the kconfig test unpacks the Kconfig/Makefile part of Debian's
linux-source-6.1 tarball (~20-30 s of CPU; skipped when the package is missing); the
cache-reuse test of a real build runs when that kernel is already cached (a cold build is
~10-25 min on 2 cores, not something the test suite does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from schedlab.builds import kernel as kb

REPO = Path(__file__).resolve().parents[1]


# -- fragments and the option check (no build) --------------------------------------------------
def test_parse_config_reads_set_unset_and_n():
    text = 'CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=n\nCONFIG_D="x y"\nCONFIG_E=8\n# comment\n'
    assert kb.parse_config(text) == {
        "CONFIG_A": "y",
        "CONFIG_B": "n",
        "CONFIG_C": "n",
        "CONFIG_D": '"x y"',
        "CONFIG_E": "8",
    }


def test_committed_fragments_merge_later_overrides_earlier():
    y = kb.merged_fragments(kb.fragment_paths("pvspin-y"))
    n = kb.merged_fragments(kb.fragment_paths("pvspin-n"))
    assert y["CONFIG_PARAVIRT_SPINLOCKS"] == "y" and n["CONFIG_PARAVIRT_SPINLOCKS"] == "n"
    # both kernels are the same PV-capable base; only the PV spinlock code differs
    assert {k for k in set(y) | set(n) if y.get(k) != n.get(k)} == {"CONFIG_PARAVIRT_SPINLOCKS"}
    for opt in (
        "CONFIG_SMP",
        "CONFIG_64BIT",
        "CONFIG_VIRTIO_BLK",
        "CONFIG_VIRTIO_NET",
        "CONFIG_VIRTIO_PCI",
        "CONFIG_EXT4_FS",
        "CONFIG_DEVTMPFS",
        "CONFIG_TMPFS",
        "CONFIG_SERIAL_8250_CONSOLE",
        "CONFIG_SYSVIPC",
        "CONFIG_FUTEX",
        "CONFIG_EPOLL",
        "CONFIG_EVENTFD",
        "CONFIG_SIGNALFD",
        "CONFIG_TIMERFD",
        "CONFIG_BINFMT_ELF",
        "CONFIG_BINFMT_SCRIPT",
        "CONFIG_MULTIUSER",
        "CONFIG_UNIX",
        "CONFIG_INET",
        "CONFIG_PARAVIRT",
        "CONFIG_KVM_GUEST",
        "CONFIG_IKCONFIG_PROC",
    ):
        assert y[opt] == "y", opt
    assert y["CONFIG_MODULES"] == "n"


def test_fragment_override_order(tmp_path):
    (tmp_path / "base.config").write_text("CONFIG_A=y\nCONFIG_B=y\n")
    (tmp_path / "x.config").write_text("# CONFIG_A is not set\nCONFIG_C=y\n")
    assert kb.merged_fragments(kb.fragment_paths("x", tmp_path)) == {"CONFIG_A": "n", "CONFIG_B": "y", "CONFIG_C": "y"}


def test_bad_fragments_and_names_are_errors(tmp_path):
    (tmp_path / "base.config").write_text("CONFIG_A=y\n")
    (tmp_path / "bad.config").write_text("CONFIG_A=y\nPARAVIRT=y\n")
    with pytest.raises(kb.KernelBuildError, match=r"bad.config:2: not a Kconfig line"):
        kb.merged_fragments(kb.fragment_paths("bad", tmp_path))
    with pytest.raises(kb.KernelBuildError, match="no fragment .*nope.config.*known: bad"):
        kb.fragment_paths("nope", tmp_path)
    for name in ("../etc", "Base", "base", ""):
        with pytest.raises(kb.KernelBuildError):
            kb.fragment_paths(name, tmp_path)


def test_check_config_names_the_missing_options():
    want = {
        "CONFIG_SMP": "y",
        "CONFIG_PARAVIRT_SPINLOCKS": "y",
        "CONFIG_MODULES": "n",
        "CONFIG_NR_CPUS": "8",
        "CONFIG_GONE": "n",
    }
    config = "CONFIG_SMP=y\n# CONFIG_PARAVIRT_SPINLOCKS is not set\nCONFIG_MODULES=y\nCONFIG_NR_CPUS=64\n"
    problems = kb.check_config(want, config)
    assert len(problems) == 3
    assert any("CONFIG_PARAVIRT_SPINLOCKS: asked for y" in p for p in problems)
    assert any("CONFIG_MODULES: asked for n, .config has y" in p for p in problems)
    assert any("CONFIG_NR_CPUS: asked for 8, .config has 64" in p for p in problems)
    assert (
        kb.check_config(
            want,
            config.replace("# CONFIG_PARAVIRT_SPINLOCKS is not set", "CONFIG_PARAVIRT_SPINLOCKS=y")
            .replace("MODULES=y", "MODULES=n")
            .replace("=64", "=8"),
        )
        == []
    )


# -- the cache, with a stand-in for the (slow) build ----------------------------------------------
@pytest.fixture
def fake_build(tmp_path, monkeypatch):
    """A kernel 'build' that takes no time: counts calls, can be made to fail."""
    if not kb.TARBALL.is_file():
        pytest.skip(f"{kb.TARBALL} missing (Debian package {kb.PACKAGE})")
    monkeypatch.setenv("SCHEDLAB_CACHE", str(tmp_path / "cache"))
    calls = {"n": 0, "fail": False}

    def build(name, key, tmp, paths, tarball, jobs, log):
        calls["n"] += 1
        (tmp / "build.log").write_text("fake\n")
        if calls["fail"]:
            raise kb.KernelBuildError("boom")
        (tmp / "bzImage").write_bytes(b"kernel " + key.encode())
        (tmp / ".config").write_text("CONFIG_SMP=y\n")
        return {
            "want": kb.merged_fragments(paths),
            "times": {"make": 0.0},
            "release": f"6.1-{key[:8]}",
            "uts_version": "#1 SMP",
            "make_argv": kb.make_argv(tmp, key, "bzImage", jobs=jobs),
        }

    monkeypatch.setattr(kb, "_build", build)
    return calls


def test_second_request_reuses_the_cache(fake_build):
    k1 = kb.build_kernel("pvspin-y", log=None)
    assert fake_build["n"] == 1 and k1.bzimage.is_file() and k1.dir.parent == kb.cache_root()
    meta = k1.meta
    for field in (
        "version",
        "tarball_sha256",
        "config_sha256",
        "bzimage_sha256",
        "build_seconds",
        "make_argv",
        "fragments",
        "kernelrelease",
    ):
        assert field in meta, field
    assert meta["fragments"].keys() == {"base.config", "pvspin-y.config"}
    k2 = kb.build_kernel("pvspin-y", log=None)
    assert fake_build["n"] == 1 and k2.dir == k1.dir  # reused, not rebuilt
    assert kb.build_kernel("pvspin-y", build=False, log=None).dir == k1.dir
    # another config is another entry
    k3 = kb.build_kernel("pvspin-n", log=None)
    assert fake_build["n"] == 2 and k3.dir != k1.dir
    with pytest.raises(FileNotFoundError):
        kb.build_kernel("pvspin-y", build=False, log=None, fragment_dir=_changed_fragments(k1.dir.parent.parent))


def _changed_fragments(where: Path) -> Path:
    d = where / "fragments"
    shutil.copytree(kb.FRAGMENT_DIR, d)
    (d / "pvspin-y.config").write_text((d / "pvspin-y.config").read_text() + "CONFIG_HZ_100=y\n")
    return d


def test_a_failed_build_leaves_no_cache_entry(fake_build):
    fake_build["fail"] = True
    with pytest.raises(kb.KernelBuildError, match="boom"):
        kb.build_kernel("pvspin-y", log=None)
    root = kb.cache_root()
    assert [p.name for p in root.iterdir()] == ["failed-pvspin-y.log"]
    # a build killed half-way leaves its tmp dir; the next build removes it
    stale = root / "tmp-999999999-abc"
    stale.mkdir()
    fake_build["fail"] = False
    kb.build_kernel("pvspin-y", log=None)
    assert not stale.exists()


def test_missing_source_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(kb, "TARBALL", tmp_path / "nope.tar.xz")
    with pytest.raises(kb.KernelBuildError, match="linux-source-6.1"):
        kb.ensure_source(install=False)


# -- kconfig for real, on the Kconfig part of the tree (~20-30 s) ----------------------------------
@pytest.fixture(scope="module")
def kconfig_tree(tmp_path_factory):
    if not kb.TARBALL.is_file():
        pytest.skip(f"{kb.TARBALL} missing (Debian package {kb.PACKAGE})")
    for tool in ("make", "gcc", "flex", "bison"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed")
    d = tmp_path_factory.mktemp("kconfig") / "src"
    d.mkdir()
    top = "linux-source-6.1"
    members = [
        "Makefile",
        "Kconfig",
        "scripts",
        "include",
        "arch/x86",
        "kernel/configs",
        "tools/include",
        "*Kconfig*",
        "*Makefile*",
        "*Kbuild*",
    ]
    subprocess.run(
        ["tar", "-xJf", kb.TARBALL, "-C", d, "--strip-components=1", "--wildcards", *[f"{top}/{m}" for m in members]],
        check=True,
    )
    return d


def test_configure_sets_every_asked_option(kconfig_tree, tmp_path):
    with open(tmp_path / "log", "w") as logf:
        want = kb._configure(kconfig_tree, "0" * 16, kb.fragment_paths("pvspin-y"), logf)
    cfg = kb.parse_config((kconfig_tree / ".config").read_text())
    assert cfg["CONFIG_PARAVIRT_SPINLOCKS"] == "y" and cfg["CONFIG_KVM_GUEST"] == "y"
    assert "CONFIG_MODULES" not in cfg or cfg["CONFIG_MODULES"] == "n"
    assert len(want) > 50


def test_configure_fails_naming_an_option_kconfig_dropped(kconfig_tree, tmp_path):
    frag = tmp_path / "frag"
    shutil.copytree(kb.FRAGMENT_DIR, frag)
    # PARAVIRT_SPINLOCKS depends on PARAVIRT: asking for it without PARAVIRT (and KVM_GUEST,
    # which needs PARAVIRT) cannot work, and olddefconfig silently drops it
    (frag / "base.config").write_text(
        (frag / "base.config")
        .read_text()
        .replace("CONFIG_PARAVIRT=y", "CONFIG_PARAVIRT=n")
        .replace("CONFIG_KVM_GUEST=y", "CONFIG_KVM_GUEST=n")
    )
    (frag / "broken.config").write_text("CONFIG_PARAVIRT_SPINLOCKS=y\n")
    with open(tmp_path / "log", "w") as logf, pytest.raises(kb.KernelBuildError) as e:
        kb._configure(kconfig_tree, "0" * 16, kb.fragment_paths("broken", frag), logf)
    assert "CONFIG_PARAVIRT_SPINLOCKS: asked for y" in str(e.value)


# -- the real cache ---------------------------------------------------------------------------------
def _cached(name):
    try:
        return kb.build_kernel(name, build=False, log=None)
    except (FileNotFoundError, kb.KernelBuildError):
        return None


@pytest.mark.skipif(
    os.environ.get("SCHEDLAB_QEMU_TESTS") != "all",
    reason="a real kernel build (10-25 min): set SCHEDLAB_QEMU_TESTS=all",
)
def test_cached_kernel_second_request_reuses_the_build():
    k = _cached("pvspin-y") or kb.build_kernel("pvspin-y", build=True)
    before = k.bzimage.stat().st_mtime_ns
    r = subprocess.run(
        [sys.executable, "-m", "schedlab.builds.kernel", "pvspin-y", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr
    ptr = json.loads(r.stdout)
    assert ptr["hash"] == k.key and Path(ptr["path"]).is_file() and ptr["build_seconds"] > 60
    assert Path(ptr["path"]).stat().st_mtime_ns == before  # served from the cache, not rebuilt
    cfg = kb.parse_config(k.config.read_text())
    assert kb.check_config(kb.merged_fragments(kb.fragment_paths("pvspin-y")), k.config.read_text()) == []
    assert cfg["CONFIG_PARAVIRT_SPINLOCKS"] == "y"


def test_recipe_code_key_ignores_layout_and_comments(tmp_path, monkeypatch):
    """Build keys hash the recipe's syntax tree: `ruff format` or a new comment must not
    rebuild a kernel (10-25 min); a changed statement must."""
    import importlib

    from schedlab.core.recipes import code_sha256

    variants = {
        "a": "def f(x):\n    return [x, 'y']\n",
        "b": 'def f(x):  # a comment\n    return [\n        x,\n        "y",\n    ]\n',
        "c": "def f(x):\n    return [x, 'z']\n",
    }
    monkeypatch.syspath_prepend(str(tmp_path))
    keys = {}
    for name, src in variants.items():
        (tmp_path / f"recipe_{name}.py").write_text(src)
        keys[name] = code_sha256(importlib.import_module(f"recipe_{name}").f)
    assert keys["a"] == keys["b"] != keys["c"]
