"""The configuration reference (docs/config.md), generated from the schema's dataclasses.

Regenerate with `python -m nmt.config.docs > docs/config.md`; a test fails when they drift.
"""

from __future__ import annotations

import dataclasses
import sys

import yaml

from nmt.config.fields import hints, type_name
from nmt.config.load import model_classes, path_keys
from nmt.config.schema import REQUIRED, Config, ModelConfig

INHERITANCE_DOC = (
    "A config file may start from others: `base: ../multi30k/rnnsearch.yaml` (or a list of "
    "files), relative to the file's folder. The base files are read first, in order, and the "
    "file's own keys win; sections merge key by key, and a base file may have a `base` of its "
    "own. Input paths ({}) resolve against the folder of the file that sets them, `--set` values "
    "against the working directory, and the run stores them resolved in RUN/config.yaml. Output "
    "paths (`train.run_dir`, `data.prepared_dir`) stay relative to the working directory."
)


def docs_markdown() -> str:
    """Markdown reference of every key: type, default, meaning (written to docs/config.md)."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the dataclasses in `nmt/config/schema.py` (and each architecture's "
        "config class beside its model) by `python -m nmt.config.docs > docs/config.md`; "
        "a test fails when they drift.",
        "",
        "Keys marked *required* have no default. Override any key on the command line with "
        "`--set section.key=value` (the value is parsed as YAML).",
        "",
        INHERITANCE_DOC.format(", ".join(f"`{sec}.{key}`" for sec, key in path_keys())),
        "",
    ]

    def section(cls: type, prefix: str, title: str, skip: frozenset = frozenset()) -> None:
        lines.extend(
            [f"## `{title}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        )
        nested = []
        for f in dataclasses.fields(cls):
            if f.name in skip:
                continue
            tp = hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                nested.append((tp, prefix + f.name, f.metadata["doc"]))
                lines.append(f"| `{prefix}{f.name}` | section | see below | {f.metadata['doc']} |")
                continue
            if f.default is not REQUIRED:
                default = f.default
            elif f.default_factory is not REQUIRED:  # type: ignore[misc]
                default = f.default_factory()  # type: ignore[misc]
            else:
                default = "*required*"
            shown = (
                default
                if default == "*required*"
                else f"`{yaml.safe_dump(default, default_flow_style=True).strip().removesuffix('...').strip()}`"
            )
            cells = [f"`{prefix}{f.name}`", type_name(tp), str(shown), f.metadata["doc"]]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
        for tp, name, _ in nested:
            section(tp, name + ".", name)

    shared = frozenset(f.name for f in dataclasses.fields(ModelConfig))
    for f in dataclasses.fields(Config):
        section(hints(Config)[f.name], f.name + ".", f.name)
        if f.name == "model":  # then each architecture's own keys
            for arch, cls in sorted(model_classes().items()):
                section(cls, "model.", f"model` with `arch: {arch}", shared)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(docs_markdown())
