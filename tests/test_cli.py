"""The CLI as people expect it: --version, every command in --help (ministat too), a help text
for every argument, headers on tabular output."""

import argparse

from conftest import schedlab

from schedlab import __version__
from schedlab.commands import _parser


def test_version():
    r = schedlab("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"schedlab {__version__}", r.stdout + r.stderr


def test_help_lists_every_command_with_its_description():
    r = schedlab("--help")
    assert r.returncode == 0, r.stderr
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name in sub.choices:
        assert f"    {name}" in r.stdout, name
    assert "ministat" in sub.choices and "cli.py dispatches" not in r.stdout
    assert "real hosts" not in r.stdout


def test_every_argument_has_help():
    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [
        f"{name} {a.dest}"
        for name, p in sub.choices.items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert not missing, missing
    assert all(c.help for c in sub._choices_actions)


def test_plan_prints_a_header():
    r = schedlab("plan", "s1", "--seed", "1")
    assert r.returncode == 0, r.stderr
    head, first = r.stdout.splitlines()[:2]
    assert head.split() == ["#", "variant", "point", "rep", "warm-up"]
    assert len(first.split()) == 5
