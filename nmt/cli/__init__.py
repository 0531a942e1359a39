"""`nmt` command line (`nmt.cli:main` is the console script); see `nmt.cli.main`."""

from nmt.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
