"""`nmt` command line: one module per command, each registering its own parser.

A new command is one module with `register(sub)` (its parser, `set_defaults(func=run)`) and
`run(args) -> int`, and its name in `COMMANDS`. User mistakes (NmtError) and failures of the machine
(OSError: disk full, permission denied) print one line `nmt: error: ...` and exit with code 2;
only bugs show a traceback. A training run stopped by SIGINT/SIGTERM exits 128 + the signal
number (130, 143), never 0: it is checkpointed, not done.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from typing import NoReturn, Optional

from nmt import __version__
from nmt.data.heap import keep_freed_memory
from nmt.errors import NmtError

# The command modules (nmt/cli/NAME.py), in the order `nmt --help` lists them: a new command is
# its module and one name here.
COMMANDS = (
    "train",
    "evaluate",
    "translate",
    "average",
    "score",
    "compare",
    "curves",
    "study",
    "export",
    "import",
    "prepare",
    "data",
    "serve",
)


class Parser(argparse.ArgumentParser):
    """A parser whose mistakes are one line, as every other user mistake is: `nmt: error: ...`
    and exit 2, naming the command's --help instead of printing its usage block. The command
    parsers (`sub.add_parser`) inherit this class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"nmt: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None) -> argparse.Namespace:  # type: ignore[override]
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:  # name the command that refused them, not the top-level parser
            self._command(parsed).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def _command(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost command parser that `parsed` went through (`nmt data synth`)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
                if isinstance(chosen, Parser):
                    return chosen._command(parsed)
        return self


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="nmt",
        description="Neural machine translation from YAML configs: seq2seq, RNNsearch "
        "(Bahdanau attention) and Transformer, with BLEU by sentence length.",
        epilog="Run 'nmt COMMAND --help' for the options of each command.",
    )
    ap.add_argument("--version", action="version", version=f"nmt {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        import_module(f"nmt.cli.{name}").register(sub)
    return ap


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    if a.command is None:
        parser.print_help()
        return 2
    keep_freed_memory()  # steps and decoding batches reuse freed memory (nmt.data.heap)
    try:
        code = a.func(a)
        sys.stdout.flush()  # a reader that went away is found here, not at exit
        return code
    except BrokenPipeError:  # `nmt ... | head`: the reader has what it wanted; the work is done
        _quiet_stdout()
        return 0
    except NmtError as err:
        print(f"nmt: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the machine, not a bug: disk full, permission denied, read-only fs
        where = f": {err.filename}" if err.filename else ""
        print(f"nmt: error: {err.strerror or err}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nmt: interrupted", file=sys.stderr)
        return 130


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit cannot fail again
    (Python's documented recipe for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    raise SystemExit(main())
