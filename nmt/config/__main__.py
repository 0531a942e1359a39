"""`python -m nmt.config --docs`: the older spelling of `python -m nmt.config.docs`."""

import sys

from nmt.config.docs import docs_markdown

if sys.argv[1:] != ["--docs"]:
    sys.exit("usage: python -m nmt.config.docs > docs/config.md")
sys.stdout.write(docs_markdown())
