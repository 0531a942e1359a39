"""The README and the manual (docs/*.md) stay true to the CLI: every `nmt` command in their shell
blocks parses, every flag `--help` lists has a row in docs/cli.md, every relative link and image
points to a file, every page is in the site's nav, and the README stays a front door.
tests/test_docs_run.py goes further: it runs every command of every page, in reading order."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from nmt.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGS = {"bash", "sh", "shell", "console"}
OPERATORS = {"&&", "||", "|", ";", "&"}
REDIRECTS = {">", ">>", "<", "2>", "2>&1"}
WRAPPERS = {"time", "taskset", "nohup", "env", "sudo"}


def _fences(text: str) -> list[tuple[str, int, list[str]]]:
    """(language, first line number, lines) of each fenced code block."""
    blocks, lang, start, body = [], None, 0, []
    for n, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"^\s*```(\w*)", line)
        if fence and lang is None:
            lang, start, body = fence.group(1).lower(), n + 1, []
        elif fence:
            blocks.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return blocks


def _shell_lines(lang: str, start: int, body: list[str]) -> list[tuple[int, str]]:
    """Logical shell lines (backslash continuations joined) of a block: every line of a shell
    block, and the `$ `-prompted lines of any other block."""
    lines, pending, first = [], "", 0
    for n, line in enumerate(body, start):
        if lang not in SHELL_LANGS:
            if line.startswith("$ "):
                lines.append((n, line[2:]))
            continue
        if not pending:
            first = n
        stripped = line.strip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append((first, pending + stripped))
        pending = ""
    return lines


def _nmt_argv(segment: list[str]) -> list[str] | None:
    """The arguments after `nmt` in one simple command, or None when it does not run nmt:
    `nmt ...`, `python -m nmt ...`, `torchrun ... -m nmt ...`, `time nmt ...`."""
    while segment and re.match(r"^[A-Z_][A-Z0-9_]*=", segment[0]):
        segment = segment[1:]  # VAR=value prefixes
    if not segment:
        return None
    for i, word in enumerate(segment):
        if word != "nmt":
            continue
        if i == 0 or segment[i - 1] == "-m" or segment[0] in WRAPPERS:
            return segment[i + 1 :]
    return None


def _commands(path: Path) -> list[tuple[str, list[str]]]:
    """(`FILE:LINE`, argv) for every nmt command in the page's code blocks."""
    found = []
    for lang, start, body in _fences(path.read_text(encoding="utf-8")):
        for n, line in _shell_lines(lang, start, body):
            if "nmt" not in line:
                continue
            lexer = shlex.shlex(line.split(" #")[0], posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words, segment = list(lexer), []
            for word in [*words, ";"]:
                if word in OPERATORS:
                    argv = _nmt_argv(segment)
                    if argv is not None:
                        found.append((f"{path.relative_to(ROOT)}:{n}", argv))
                    segment = []
                elif segment and segment[-1] in REDIRECTS:
                    segment.pop()  # a redirection and its target are not arguments
                else:
                    segment.append(word)
    return found


COMMANDS = [cmd for page in PAGES for cmd in _commands(page)]


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "nmt") -> dict:
    """`nmt train` -> its parser, for every leaf command (`nmt data synth` for nested ones)."""
    leaves = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                leaves.update(_subcommands(sub, f"{prefix} {name}"))
    return leaves or {prefix: parser}


def test_the_docs_show_commands_to_check():
    places = {where.split(":")[0] for where, _ in COMMANDS}
    assert "README.md" in places and len(COMMANDS) >= 30, sorted(places)


@pytest.mark.parametrize("where, argv", COMMANDS, ids=[where for where, _ in COMMANDS])
def test_every_documented_command_parses(where, argv, capsys):
    parser = build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as exit:  # argparse exits 0 after --help or --version, 2 on a bad command
        if exit.code != 0:
            err = capsys.readouterr().err.strip().splitlines()
            pytest.fail(f"{where}: `nmt {shlex.join(argv)}` does not parse: {err[-1:]}")


def test_a_documented_command_the_cli_lacks_fails_the_check(monkeypatch, capsys):
    """No command is exempt: were `nmt import` gone from the CLI, its documented commands fail."""
    imports = [(where, argv) for where, argv in COMMANDS if argv[:1] == ["import"]]
    places = {where.split(":")[0] for where, _ in imports}
    assert {"README.md", "docs/pretrained.md"} <= places, imports

    def without_import(full=build_parser) -> argparse.ArgumentParser:
        parser = full()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                del action.choices["import"]
        return parser

    monkeypatch.setattr(sys.modules[__name__], "build_parser", without_import)
    for where, argv in imports:
        with pytest.raises(BaseException) as outcome:  # a skip would be a BaseException too
            test_every_documented_command_parses(where, argv, capsys)
        assert outcome.type is pytest.fail.Exception, (where, outcome.value)
        assert "does not parse" in str(outcome.value)


def _documented_options(page: str) -> dict[str, set[str]]:
    """`## \\`nmt train\\`` section -> the flags in the first column of its table."""
    options, current = {}, None
    for line in page.splitlines():
        heading = re.match(r"^## `(nmt [a-z0-9 -]+)`", line)
        if heading:
            current = heading.group(1)
            options[current] = set()
        elif current and line.startswith("| `"):
            first_cell = line.split("|")[1]
            options[current] |= set(re.findall(r"(?<![\w-])--?[a-z][a-z0-9-]*", first_cell))
    return options


def test_the_cli_page_lists_every_flag_of_every_command_and_no_other():
    documented = _documented_options((ROOT / "docs" / "cli.md").read_text(encoding="utf-8"))
    actual = {
        name: {opt for a in sub._actions for opt in a.option_strings if opt not in ("-h", "--help")}
        for name, sub in _subcommands(build_parser()).items()
    }
    for name, flags in actual.items():
        assert name in documented, f"docs/cli.md has no section '## `{name}`'"
        assert documented[name] == flags, (
            f"docs/cli.md, {name}: missing {sorted(flags - documented[name])}, "
            f"not in --help {sorted(documented[name] - flags)}"
        )
    extra = {n for n in documented if n not in actual}
    assert not extra, f"docs/cli.md documents commands the CLI does not have: {sorted(extra)}"


def _links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link, image and <img src> outside code blocks."""
    links, in_code = [], False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        line = re.sub(r"`[^`]*`", "", line)  # code spans are not links
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            links.append((n, target))
        links += [(n, t) for t in re.findall(r"<img [^>]*src=\"([^\"]+)\"", line)]
    return links


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_and_image_points_to_a_file(page):
    broken = []
    for n, target in _links(page):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # http(s), mailto, and anchors within the page
        if not (page.parent / target.split("#")[0]).exists():
            broken.append(f"{page.relative_to(ROOT)}:{n}: {target}")
    assert not broken, broken


def test_every_docs_page_is_in_the_site_nav_and_every_nav_entry_exists():
    def pages(nav) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        items = nav.values() if isinstance(nav, dict) else nav
        return [page for item in items for page in pages(item)]

    nav = pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    on_disk = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert set(nav) == on_disk, {"not in nav": on_disk - set(nav), "missing": set(nav) - on_disk}


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines"
