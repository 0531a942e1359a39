"""House rules that tooling can check: no function in nmt/ longer than a screen."""

from __future__ import annotations

import ast

from conftest import REPO

MAX_LINES = 60


def function_lengths() -> dict[str, int]:
    """'path:function' -> lines from its `def` (decorators excluded) to its last line."""
    out = {}
    for path in sorted((REPO / "nmt").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{path.relative_to(REPO)}:{node.name}"
                out[name] = max(out.get(name, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_function_in_nmt_is_longer_than_60_lines():
    lengths = function_lengths()
    assert len(lengths) > 100  # the walk found the package
    long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not long, f"functions over {MAX_LINES} lines (split them): {long}"


def test_no_module_is_named_for_no_job_in_particular():
    """Modules are named for what they hold: no pipeline, utils, helpers, common or misc."""
    vague = {"pipeline", "utils", "helpers", "common", "misc"}
    found = [
        str(p.relative_to(REPO))
        for top in ("nmt", "benchmarks", "scripts")
        for p in (REPO / top).rglob("*.py")
        if p.stem in vague
    ]
    assert not found, f"modules named for no job: {found}"
