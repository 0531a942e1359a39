"""House rules that tooling can check: no function in nmt/ longer than a screen, no module over
450 lines, and imports that follow the data flow with no circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

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


# ---------------------------------------------------------------------------- import layers

# The data flow, earliest first. A module may import its own stage or an earlier one, never a
# later one. The longest matching prefix places a module; a new module must be placed here.
STAGES = [
    (
        "foundation",
        ["nmt.errors", "nmt.files", "nmt.version", "nmt.precision", "nmt.training.distributed"],
    ),
    ("config", ["nmt.config", "nmt.config.schema", "nmt.config.fields", "nmt.config.yaml_file"]),
    ("data", ["nmt.data"]),
    ("models", ["nmt.models"]),
    # the loader checks `model:` sections against the registry, so it and all that reads a run's
    # config sit above the models; the checkpoint is the trainer's save/resume collaborator; the
    # training package's modules sit here, but for the loop and fine-tuning (the next stage)
    (
        "train helpers",
        ["nmt.config.load", "nmt.config.docs", "nmt.config.__main__", "nmt.run_dir"]
        + ["nmt.checkpoint", "nmt.logs", "nmt.training"],
    ),
    ("train", ["nmt.training.trainer", "nmt.training.finetune"]),
    # translate turns sentences into translations for validation, evaluation and serving alike
    (
        "decode",
        ["nmt.decode", "nmt.search", "nmt.inference", "nmt.pieces", "nmt.unknown_words"]
        + ["nmt.text_translation"],
    ),
    (
        "evaluate",
        ["nmt.scoring.metrics", "nmt.scoring.bootstrap", "nmt.scoring.comet", "nmt.alignment"]
        + ["nmt.scoring.loss_by_length", "nmt.scoring.output_length"],
    ),
    (
        "report",
        ["nmt.scoring.report", "nmt.scoring.compare", "nmt.scoring.curves"]
        + ["nmt.scoring.length_figures", "nmt.scoring.tables"],
    ),
    # the study and the package's lazy `nmt.Translator` run whole jobs: they sit on top
    (
        "jobs",
        ["nmt", "nmt.__main__", "nmt.study", "nmt.jobs", "nmt.api", "nmt.serve"]
        + ["nmt.export", "nmt.importers", "nmt.cli"],
    ),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """nmt module -> the nmt modules it imports anywhere in it (lazy imports in functions too).
    `from pkg import name` is an import of pkg.name when that is a module, else of pkg itself
    (its __init__ runs)."""
    paths = {module_name(p): p for p in (REPO / "nmt").rglob("*.py")}

    def owner(name: str) -> str:
        while name not in paths and "." in name:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found |= {owner(a.name) for a in node.names if a.name.split(".")[0] == "nmt"}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from .x import y
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] == "nmt":
                    found |= {owner(f"{base}.{a.name}") for a in node.names}
        graph[name] = found - {name}
    return graph


def stage_of(module: str) -> int:
    matches = [
        (len(prefix), i)
        for i, (_, prefixes) in enumerate(STAGES)
        for prefix in prefixes
        # "nmt" places the package's own __init__, not everything under it
        if module == prefix or (module.startswith(prefix + ".") and prefix != "nmt")
    ]
    assert matches, f"{module} has no stage: place it in STAGES in {Path(__file__).name}"
    return max(matches)[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), if any."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_of_nmt_has_no_cycle():
    graph = import_graph()
    assert "nmt.config.schema" in graph["nmt.config"]  # the walk sees package re-exports
    assert "nmt.models.registry" in graph["nmt.config.load"]  # ... and lazy imports
    assert not cycles(graph), f"import cycles (modules in each): {cycles(graph)}"


def test_the_cycle_finder_sees_a_circle_through_a_lazy_package_import():
    # the shape the old config -> registry -> ... -> run_dir -> config circle had
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_a_later_stage_of_the_data_flow():
    graph = import_graph()
    upward = [
        f"{m} ({STAGES[stage_of(m)][0]}) imports {d} ({STAGES[stage_of(d)][0]})"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if stage_of(d) > stage_of(m)
    ]
    assert not upward, "imports running back up the data flow:\n" + "\n".join(upward)


def test_the_generic_trainer_knows_no_particular_architecture():
    # it sees models through the interface and the registry alone
    generic = {"nmt.models", "nmt.models.base", "nmt.models.registry"}
    train = [i for i, (name, _) in enumerate(STAGES) if name == "train"][0]
    reached = {
        (m, d)
        for m, deps in import_graph().items()
        for d in deps
        if stage_of(m) == train and d.startswith("nmt.models.") and d not in generic
    }
    assert not reached, f"the trainer reaches into an architecture: {reached}"


# Modules of other parts of issue 30, split on their own branches; empty this when they land.
NOT_YET_SPLIT: set[str] = set()  # every module is split; a new one over the bound fails
MAX_MODULE_LINES = 450


def test_no_module_in_nmt_is_longer_than_450_lines():
    sizes = {
        str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines())
        for p in (REPO / "nmt").rglob("*.py")
    }
    long = {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES and p not in NOT_YET_SPLIT}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {long}"


def test_the_trainer_is_a_loop_of_at_most_250_lines():
    tree = ast.parse((REPO / "nmt" / "training" / "trainer.py").read_text(encoding="utf-8"))
    (trainer,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Trainer"]
    assert trainer.end_lineno - trainer.lineno + 1 <= 250


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


TRACKER_WORDS = re.compile(r"\b(issue|task|ticket|PR)s? #?\d+|(?<![\w/&])#\d+\b", re.IGNORECASE)


def test_the_manual_speaks_without_the_trackers_numbers():
    # A reader knows "the faster step of December 2026", not what "issue 58" was.
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = [
        f"{p.relative_to(REPO)}:{i}: {m.group(0)}"
        for p in pages
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        for m in [TRACKER_WORDS.search(line)]
        if m
    ]
    assert not found, found
