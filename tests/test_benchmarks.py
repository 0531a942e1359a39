"""The measurement scripts in benchmarks/ import (and parse their options), so a refactor of
`nmt` that moves a name they use fails here instead of on the day someone re-measures."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    p.stem for p in (ROOT / "benchmarks").glob("*.py") if p.stem not in ("__init__", "machine")
)


def test_every_measurement_script_lives_in_benchmarks():
    assert len(SCRIPTS) == 10
    left = {p.name for p in (ROOT / "scripts").glob("*.py")}
    assert left == {"gpu_check.py", "screenshot_serve.py"}


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_with_what_it_uses_from_nmt(name, monkeypatch):
    """Importing runs each script's module-level imports; the `from nmt... import` lines
    inside its functions run only when measuring, so each name they import is looked up."""
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module(f"benchmarks.{name}")
    assert callable(module.main)
    tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text("utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmt"):
            target = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(target, alias.name), f"{name}: {node.module} has no {alias.name}"


def test_machine_record_names_the_cpu(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks.machine import machine, write_json

    record = machine()
    assert record["cpu"] and record["cores"] >= 1 and len(record["load"]) == 3
    write_json(tmp_path / "m.json", {"machine": record})
    assert json.loads((tmp_path / "m.json").read_text())["machine"] == record


def test_a_script_runs_as_documented():
    """`python benchmarks/NAME.py --help` from the repository root, as the docs show."""
    out = subprocess.run(
        [sys.executable, "benchmarks/benchmark.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "--translate" in out.stdout, out.stderr
