"""The command line's shape: each command is one module of nmt/cli that registers its own parser,
and `nmt.cli.main` lists them by name, so a new command is one file and one name."""

from __future__ import annotations

import argparse
from importlib import import_module
from pathlib import Path

import pytest

import nmt.cli
from nmt.cli import build_parser, main
from nmt.cli.main import COMMANDS

SHARED = {"__init__", "main", "options"}  # the entry point and the shared argument types


def test_every_command_module_is_registered_once():
    modules = {p.stem for p in Path(nmt.cli.__file__).parent.glob("*.py")} - SHARED
    assert sorted(COMMANDS) == sorted(modules)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_runs_its_own_modules_run(name):
    sub = subcommands(build_parser())
    assert name in sub
    module = import_module(f"nmt.cli.{name}")
    assert sub[name].get_default("func") is module.run


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS)


def test_a_user_mistake_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["translate", str(tmp_path / "no-such-run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nmt: error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, command, message",
    [
        (["trian"], "nmt", "argument COMMAND: invalid choice: 'trian'"),
        (["train", "x.yaml", "--bogus"], "nmt train", "unrecognized arguments: --bogus"),
        (["evaluate"], "nmt evaluate", "the following arguments are required: checkpoint"),
        (["translate", "run", "--beam", "x"], "nmt translate", "argument --beam: expected"),
        (["data", "synth", "--out", "d", "--nope"], "nmt data synth", "unrecognized arguments"),
    ],
)
def test_an_argument_mistake_is_one_line_naming_the_commands_help(capsys, argv, command, message):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"nmt: error: {message}")
    assert captured.err.rstrip().endswith(f"(see '{command} --help')")
