"""Every shell command of the README and of each docs page runs, in the order a reader meets it.

The pages come in reading order (README.md, then mkdocs.yml's nav), each in a fresh working
directory that holds what the page assumes: a copy of configs/, links to scripts/ and
benchmarks/, a `../shared` whose corpora are cut to their first lines (only the corpora present
here: a command that reads an absent one is skipped, and so is what reads its output, each skip
naming the corpus), and the runs and files the page says an earlier page made (PAGE_ASSUMES).
`nmt` runs in-process (an import of torch per command would cost more than all the commands);
every other command runs in bash.

Three rules keep the whole walk to about a minute of CPU:

- Training is cut, never skipped: `nmt train` and `nmt study` get the `--set` of CUT appended
  (two steps with a validation after each, on five sentences, fp32, one thread), the synthetic
  corpus shrinks (CUT_SYNTHETIC), the Multi30k recipes' models narrow (CUT_MODEL) and
  `../shared`'s files are their first lines (SHARED_LINES).
- A training command met again, on a later page or as what a page assumes, runs once: its
  outputs are linked into the later page's directory.
- DRY_RUN names, with the reason, each command that would install, download, serve, need a GPU
  or several processes, or measure for minutes. It is checked, not run: an `nmt` command parses
  and the runs and configs it reads exist, a study builds every model's config, a benchmark
  script exists and takes every flag given, a `pip install` names extras pyproject.toml has.
  Every entry must match a documented command, so the list cannot go stale either.

A command that fails fails its page's test with the page, the line and the tail of its output;
`pytest -s` prints each page's commands with what happened to each and its CPU seconds.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from nmt.cli import build_parser
from nmt.cli import main as nmt_main
from test_docs_commands import _fences, _shell_lines

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"


def _nav(entry) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    items = entry.values() if isinstance(entry, dict) else entry
    return [page for item in items for page in _nav(item)]


PAGES = ["README.md"] + [
    f"docs/{page}" for page in _nav(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
]

# Appended to every `nmt train` and `nmt study` that trains: two steps with a validation (and a
# checkpoint) after each, so `nmt average --last 2` has two to average.
CUT = [
    "train.max_steps=2",
    "train.valid_every=1",
    "train.valid_max_sentences=5",
    "train.max_minutes=0",
    "train.precision=fp32",
    "train.threads=1",
    "train.progress=false",
]
# ... where the config's corpus is the built-in synthetic one, a smaller corpus ...
CUT_SYNTHETIC = ["data.synthetic.train=300", "data.synthetic.valid=10", "data.synthetic.test=20"]
# ... and the Multi30k recipes' models (6-10M parameters) narrowed: an untrained model decodes
# to the length limit, and evaluations of the recipes' runs are most of the commands.
CUT_MODEL = {
    "transformer": ["model.d_model=64", "model.ff=128", "model.layers=1"],
    "rnnsearch": ["model.emb_size=32", "model.enc_hidden_size=32", "model.hidden_size=64"],
    "seq2seq": ["model.emb_size=32", "model.hidden_size=64"],
}
# The lines kept of each file of ../shared/data (the first pattern that matches CORPUS/FILE):
# 400 of a training file, 20 of others, but 60 of Multi30k's val (decoding.md quotes its line
# 56) and 520 of WMT news' valid (training.md holds its lines 501-1,500 out as a test set).
SHARED_LINES = {
    r"/train\.": 400,
    r"^multi30k/val\.": 60,
    r"^wmt-news-de-en/valid\.": 520,
    r"": 20,
}

# What a page says it starts from, made by commands of earlier pages (run once, then reused).
PAGE_ASSUMES = {
    "docs/decoding.md": [
        "nmt train configs/toy/rnnsearch.yaml",  # "After Getting started, which trains ..."
        "nmt train configs/multi30k/multi/transformer_local.yaml",  # Training's four directions
        "nmt train configs/multi30k/de-en/rnnsearch_local.yaml",  # the recipe it names
    ],
    "docs/terminology.md": [
        "nmt train configs/toy/rnnsearch.yaml",
        "nmt data synth --out toy-data --lexicon 100 --train 10 --valid 10 --test 5",
    ],
    "docs/serving.md": ["nmt train configs/multi30k/de-en/transformer_local.yaml"],
    "docs/deployment.md": [
        "nmt train configs/multi30k/de-en/transformer_local.yaml",
        "nmt train configs/multi30k/multi/transformer_local.yaml",
    ],
    "docs/results.md": [  # "likewise de-en/{rnnsearch,...}_local.yaml, en-de/{transformer,...}"
        "nmt train configs/multi30k/de-en/rnnsearch_local.yaml",
        "nmt train configs/multi30k/en-de/transformer_local.yaml",
    ],
}

# Commands checked instead of run (a regular expression on one command of a line: the parts of
# `a && b` are commands of their own), and why.
DRY_RUN = {
    r"^python3 -m venv ": "creates a virtual environment: the tests run in one",
    r"^\. \.venv/bin/activate$": "activates that environment",
    r"^pip install ": "installs from the network: the extras it names must be in pyproject.toml",
    r"^pytest$": "the whole test suite, this test among it",
    r"^ruff |^mkdocs build": "the linter and the site build: CI runs them",
    r"^mkdocs serve": "serves this site until stopped",
    r"^torchrun ": "several training processes (or machines with GPUs): "
    "tests/test_distributed.py runs torchrun on a tiny run",
    r"^nmt serve ": "an HTTP server that runs until stopped: tests/test_serve_http.py starts one",
    r"^curl ": "asks a running server",
    r"^nmt import hf Helsinki-NLP/": "downloads a model from the Hugging Face hub",
    r"runs/opus-": "reads the model the line above downloads",
    r"^nmt study configs/study/(wmt-news|europarl|europarl_bahdanau(_gpu)?)\.yaml": "several "
    "models for hours on a real corpus (or on a GPU): each model's config is built and its data "
    "found",
    r"--set train.run_dir=runs/base-d512 ": "its point is the model its --set make (d_model 512, "
    "6 layers), which CUT_MODEL would narrow away, for a benchmark that is not run: "
    "nmt train --dry-run checks that config and loads its data",
    r"^scripts/gpu_check\.sh": "needs a CUDA GPU (CI runs it with --cpu)",
    r"python benchmarks/": "a measurement of minutes: the script must exist and take every flag",
    r"^taskset -c 0 bash -c ": "an endless loop that keeps core 0 busy",
    r"^git worktree add ": "checks out an old commit beside the repository",
}
WRAPPERS = re.compile(r"^(time |taskset -c \d+ )+")


class Skip(Exception):
    """A command not run: a corpus or an optional package it needs is not on this machine, or
    it reads what such a command would have made (the message says which)."""


@dataclass
class Command:
    page: str
    line: int
    text: str  # one command: a line's `a && b` is two

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Outcome:
    command: Command
    how: str  # ran, cut, reused, dry-run, skipped, failed
    detail: str = ""
    cpu: float = 0.0  # CPU seconds, its child processes' included


def page_commands(page: str) -> list[Command]:
    """The commands of a page's shell blocks (and `$ ` lines), in order, comments dropped."""
    commands = []
    for lang, start, body in _fences((ROOT / page).read_text(encoding="utf-8")):
        for n, line in _shell_lines(lang, start, body):
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands += [Command(page, n, part.strip()) for part in line.split(" && ")]
    return commands


def dry_run_reason(text: str) -> str | None:
    for pattern, reason in DRY_RUN.items():
        if re.search(pattern, text):
            return reason
    return None


# ------------------------------------------------------------------------ the working directory


def _slice_shared(base: Path) -> None:
    """base/shared/data: the first lines of every file of ../shared/data that is here."""
    if not SHARED.is_dir():
        return
    for src in SHARED.glob("*/*"):
        name = f"{src.parent.name}/{src.name}"
        keep = next(n for pattern, n in SHARED_LINES.items() if re.search(pattern, name))
        dst = base / "shared" / "data" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            for _, line in zip(range(keep), fin):
                fout.write(line)


def _page_dir(base: Path, page: str) -> Path:
    """A fresh directory beside base/shared (so `../shared` is the cut copy) with configs/."""
    cwd = base / page.replace("/", "_").removesuffix(".md")
    cwd.mkdir()
    shutil.copytree(ROOT / "configs", cwd / "configs")  # a copy: its ../../../../shared is ours
    for name in ("scripts", "benchmarks"):
        (cwd / name).symlink_to(ROOT / name)
    return cwd


def _files(cwd: Path) -> dict[str, tuple[int, int]]:
    seen = {}
    for dirpath, dirs, names in os.walk(cwd):
        dirs[:] = [d for d in dirs if not (Path(dirpath) == cwd and d == "configs")]
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            seen[os.path.relpath(os.path.join(dirpath, name), cwd)] = (st.st_mtime_ns, st.st_size)
    return seen


def _copy(src: Path, dst: Path) -> None:
    """Checkpoints are linked (never written in place); small files are copied."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    if src.stat().st_size > 1 << 20:
        os.link(src, dst)
    else:
        shutil.copy2(src, dst)


# ------------------------------------------------------------------------------------ running


def _shared_corpora(words: list[str], cwd: Path) -> set[str]:
    """The ../shared/data corpora a command reads: named in it, or in its config and bases."""
    text = " ".join(words)
    for word in words:
        if word.endswith(".yaml") and (cwd / word).is_file():
            text += _config_text(cwd / word)
    return set(re.findall(r"shared/data/([\w.-]+)", text))


def _config_text(path: Path) -> str:
    """A config's text and its `base` files' (a study's `base` is a mapping: its own text)."""
    text = path.read_text(encoding="utf-8")
    bases = (yaml.safe_load(text) or {}).get("base") or []
    for base in [bases] if isinstance(bases, str) else bases if isinstance(bases, list) else []:
        text += _config_text(path.parent / base)
    return text


def cut(config: str, cwd: Path) -> list[str]:
    """The `--set` that cut the training of a config (or a study) to a few seconds."""
    text = _config_text(cwd / config)
    sets = CUT + (CUT_SYNTHETIC if "source: synthetic" in text else [])
    arch = re.search(r"^\s*arch: (\w+)", text, re.M)  # its own first, then its bases'
    if config.startswith("configs/multi30k/") and arch:
        sets += CUT_MODEL[arch.group(1)]
    return [word for s in sets for word in ("--set", s)]


def run_nmt(argv: list[str], cwd: Path, stdin: bytes = b"") -> tuple[int, str]:
    """`nmt ARGV` in-process in `cwd`: (exit code, stdout and stderr)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    old_in, old_cwd, rc = sys.stdin, os.getcwd(), 1
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                rc = nmt_main(argv)
            except SystemExit as stop:
                rc = stop.code if isinstance(stop.code, int) else 1
            except Exception:
                traceback.print_exc()
    finally:
        sys.stdin = old_in
        os.chdir(old_cwd)
        logger = logging.getLogger("nmt")
        for handler in [h for h in logger.handlers if getattr(h, "_nmt", False)]:
            logger.removeHandler(handler)  # closes RUN/train.log
            handler.close()
    return rc, out.buffer.getvalue().decode("utf-8", "replace")


def run_shell(text: str, cwd: Path) -> tuple[int, str, bytes]:
    done = subprocess.run(["bash", "-c", text], cwd=cwd, capture_output=True, timeout=120)
    return done.returncode, done.stderr.decode("utf-8", "replace"), done.stdout


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (a study's workers)."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


@dataclass
class Walk:
    """The state of the walk through the pages: where it is, what ran, what it can reuse."""

    base: Path
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    memo: dict[tuple, tuple[Outcome, Path, list[str]]] = field(default_factory=dict)
    cwd: Path = Path(".")
    virtual: set[str] = field(default_factory=set)  # outputs of dry-run commands
    absent: list[str] = field(default_factory=list)  # why commands of this page were skipped

    def page(self, page: str) -> list[Outcome]:
        self.cwd, self.virtual, self.absent = _page_dir(self.base, page), set(), []
        done = self.outcomes[page] = []
        steps = [Command(page, 0, text) for text in PAGE_ASSUMES.get(page, [])]
        for command in steps + page_commands(page):
            start = _cpu()
            done.append(self.one(command))
            done[-1].cpu = _cpu() - start
            if done[-1].how == "failed":
                break  # what follows reads what it would have made
        return done

    def one(self, command: Command) -> Outcome:
        """Run, cut, reuse, dry-run or skip one command."""
        pipe = command.text.rsplit(" | ", 1)
        words = shlex.split(WRAPPERS.sub("", pipe[-1]).removesuffix(" &"))
        try:
            missing = sorted(
                c for c in _shared_corpora(words, self.cwd) if not (SHARED / c).is_dir()
            )
            if missing:
                self.absent.append(f"../shared/data/{missing[0]} is absent")
                raise Skip(self.absent[-1])
            reason = dry_run_reason(command.text)
            if reason:
                error = dry_run(words, self)
                return Outcome(command, "failed" if error else "dry-run", error or reason)
            if words[0] != "nmt":
                rc, err, _ = run_shell(command.text, self.cwd)
                return Outcome(command, "failed" if rc else "ran", _tail(err) if rc else "")
            if any(self.unmade(w) for w in words[1:]):
                raise Skip(f"it reads what a skipped command makes ({self.absent[0]})")
            if words[1] in ("train", "study"):
                return self.train(command, words[1:])
            stdin = run_shell(pipe[0], self.cwd)[2] if len(pipe) == 2 else b""
            rc, out = run_nmt(words[1:], self.cwd, stdin)
            extra = re.search(r"the ([\w-]+) package is not installed", out) if rc else None
            if extra:  # the optional parts' commands skip without their extra, as their tests do
                raise Skip(extra.group(0))
            return Outcome(command, "failed" if rc else "ran", _tail(out) if rc else "")
        except Skip as skip:
            return Outcome(command, "skipped", str(skip))

    def unmade(self, path: str) -> bool:
        """A path that is not here, after a command of this page was skipped for absent data."""
        return (
            bool(self.absent)
            and "/" in path
            and not path.startswith("-")
            and not ((self.cwd / path).exists() or path in self.virtual)
        )

    def train(self, command: Command, argv: list[str]) -> Outcome:
        """Train with the cut budget, or link in the outputs of the same command met before."""
        key = tuple(argv)
        if key in self.memo:
            first, store, files = self.memo[key]
            for name in files:
                _copy(store / name, self.cwd / name)
            how = "failed" if first.how == "failed" else "reused"
            return Outcome(command, how, f"as run at {first.command.where}")
        before = _files(self.cwd)
        rc, out = run_nmt(argv + cut(argv[1], self.cwd), self.cwd)
        after = _files(self.cwd)
        made = [name for name, stat in after.items() if before.get(name) != stat]
        store = self.base / "store" / str(len(self.memo))
        for name in made:
            _copy(self.cwd / name, store / name)
        outcome = Outcome(command, "failed" if rc else "cut", _tail(out) if rc else "")
        self.memo[key] = (outcome, store, made)
        return outcome


# ------------------------------------------------------------------------------------ dry runs


def dry_run(words: list[str], walk: Walk) -> str | None:
    """Check a command that is not run; the error, or None."""
    if words[:2] == ["pip", "install"]:
        wanted = {e for w in words for e in re.findall(r"\.\[([\w,-]+)\]", w)}
        unknown = {e for group in wanted for e in group.split(",")} - _extras()
        return f"no extra {sorted(unknown)} in pyproject.toml" if unknown else None
    if any(w.startswith(("benchmarks/", "scripts/")) for w in words):
        script = next(w for w in words if w.startswith(("benchmarks/", "scripts/")))
        if not (walk.cwd / script).is_file():
            return f"{script} does not exist"
        source = (walk.cwd / script).read_text(encoding="utf-8")
        unknown = [w for w in words if w.startswith("--") and f'"{w}"' not in source]
        return f"{script} takes no {unknown}" if unknown else None
    if words[0] == "nmt" or words[0] == "torchrun" and "nmt" in words:  # torchrun -m nmt ...
        return _dry_run_nmt(words[words.index("nmt") + 1 :], walk, launch=words[0] == "nmt")
    return None


def _extras() -> set[str]:
    """The optional-dependency groups of pyproject.toml."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split("[project.optional-dependencies]")[1].split("\n[")[0]
    return set(re.findall(r"^([\w-]+) = \[", block, re.M))


def _dry_run_nmt(argv: list[str], walk: Walk, launch: bool) -> str | None:
    """It parses, and every run, study and config it reads exists (or a dry run made it);
    a study builds every model's config; a training loads its data (`nmt train --dry-run`)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = build_parser().parse_args(argv)
    except SystemExit:
        return f"`nmt {shlex.join(argv)}` does not parse: {_tail(err.getvalue(), 1)}"
    reads = {k: v for k, v in vars(args).items() if k not in ("output", "out")}
    for value in reads.values():
        for path in value if isinstance(value, list) else [value]:
            if isinstance(path, str) and path.startswith(("runs/", "studies/", "configs/")):
                if walk.unmade(path):
                    raise Skip(f"it reads what a skipped command makes ({walk.absent[0]})")
                if not (walk.cwd / path).exists() and path not in walk.virtual:
                    return f"{path} does not exist here"
    walk.virtual |= {getattr(args, k) for k in ("output", "out") if getattr(args, k, None)}
    if args.command == "study":
        return _dry_run_study(args, walk)
    if args.command == "train" and launch:
        walk.virtual |= {s.split("=", 1)[1] for s in args.set if s.startswith("train.run_dir=")}
        rc, out = run_nmt(argv + ["--dry-run"], walk.cwd)
        return _tail(out) if rc else None
    return None


def _dry_run_study(args, walk: Walk) -> str | None:
    """Every model's config builds (`nmt study` checks them all before training one) and its
    data is there."""
    from nmt.errors import NmtError
    from nmt.study import load_study, model_configs

    old = os.getcwd()
    try:
        os.chdir(walk.cwd)  # a study's data paths are relative to the working directory
        study = load_study(args.study)
        configs = model_configs(study, args.study, Path(args.out or "studies/dry-run"), args.set)
        for name, cfg in configs.items():
            if cfg.data.path and not Path(cfg.data.path).exists():
                return f"model {name}: data.path {cfg.data.path} does not exist"
    except NmtError as err:
        return f"nmt: error: {err}"
    finally:
        os.chdir(old)
    return None


# ------------------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def walk(tmp_path_factory) -> Walk:
    """Every page's commands, in reading order (the slow part: about a minute)."""
    import torch

    threads = torch.get_num_threads()
    base = tmp_path_factory.mktemp("docs_run")
    _slice_shared(base)
    state = Walk(base)
    try:
        for page in PAGES:
            state.page(page)
    finally:
        torch.set_num_threads(threads)  # the cut trainings set one thread
    return state


def _report(outcomes: list[Outcome]) -> str:
    return "\n".join(
        f"{o.command.where:28} {o.how:8} {o.cpu:5.1f} s  {o.command.text[:70]}"
        + (f"\n{'':37}{o.detail}" if o.how in ("skipped", "dry-run") else "")
        for o in outcomes
    )


def failure(outcomes: list[Outcome]) -> str | None:
    """The first failed command: its page and line (or what the page assumes), text, output."""
    for o in outcomes:
        if o.how == "failed":
            where = o.command.where if o.command.line else f"{o.command.page} (what it assumes)"
            return f"{where}: `{o.command.text}` failed:\n{o.detail}"
    return None


@pytest.mark.parametrize("page", PAGES)
def test_every_command_on_the_page_runs_in_reading_order(walk, page):
    outcomes = walk.outcomes[page]
    print(_report(outcomes))
    error = failure(outcomes)
    if error:
        pytest.fail(error, pytrace=False)
    skipped = [f"{o.command.where} ({o.detail})" for o in outcomes if o.how == "skipped"]
    if skipped:
        pytest.skip(f"{len(outcomes) - len(skipped)} commands checked; not run: {skipped}")


def test_every_dry_run_entry_names_a_documented_command():
    texts = [c.text for page in PAGES for c in page_commands(page)]
    texts += [t for steps in PAGE_ASSUMES.values() for t in steps]
    stale = [p for p in DRY_RUN if not any(re.search(p, t) for t in texts)]
    assert not stale, f"DRY_RUN entries that match no documented command: {stale}"


def test_a_command_whose_corpus_is_absent_is_skipped_and_so_is_what_reads_its_run(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(sys.modules[__name__], "SHARED", tmp_path / "no-shared")
    state = Walk(tmp_path, cwd=_page_dir(tmp_path, "docs/page.md"))
    train = state.one(
        Command("page.md", 2, "nmt train configs/multi30k/de-en/rnnsearch_local.yaml")
    )
    assert (train.how, train.detail) == ("skipped", "../shared/data/multi30k is absent")
    evaluate = state.one(Command("page.md", 3, "nmt evaluate runs/multi30k-de-en-rnnsearch-local"))
    serve = state.one(Command("page.md", 4, "nmt serve runs/multi30k-de-en-rnnsearch-local"))
    assert evaluate.how == serve.how == "skipped", (evaluate, serve)
    assert "../shared/data/multi30k is absent" in serve.detail


def test_every_documented_command_has_an_outcome(walk):
    """Nothing is dropped on the way: each command of each page ran, was cut, reused, dry-run or
    skipped (with its reason), up to the first failure of its page."""
    for page in PAGES:
        met = [o.command for o in walk.outcomes[page] if o.command.line]
        expected = page_commands(page)
        if failure(walk.outcomes[page]) is None:
            assert met == expected, page
        assert all(o.how != "skipped" or o.detail for o in walk.outcomes[page]), page
    assert {"README.md", "docs/training.md", "docs/decoding.md"} <= {
        page for page, outcomes in walk.outcomes.items() if outcomes
    }


def test_a_failing_command_fails_with_its_page_line_and_stderr(tmp_path):
    state = Walk(tmp_path, cwd=tmp_path)
    outcome = state.one(Command("page.md", 2, "nmt evaluate runs/none --split test"))
    message = failure([outcome])
    assert message and message.startswith("page.md:2: `nmt evaluate runs/none"), message
    assert "nmt: error:" in message and "runs/none" in message.splitlines()[-1], message


def test_a_dry_run_fails_on_a_stale_extra_flag_or_run(tmp_path):
    state = Walk(tmp_path, cwd=_page_dir(tmp_path, "docs/page.md"))
    stale = {
        'pip install -e ".[dev,nope]"': "no extra ['nope']",
        "python benchmarks/benchmark_export.py runs/x --no-such-flag 1": "takes no",
        "nmt serve runs/never-trained": "runs/never-trained does not exist here",
        "torchrun --nproc_per_node=2 -m nmt train configs/none.yaml": "does not exist here",
    }
    for text, error in stale.items():
        outcome = state.one(Command("page.md", 1, text))
        assert outcome.how == "failed" and error in outcome.detail, (text, outcome)
    made = state.one(
        Command("page.md", 2, "nmt import hf Helsinki-NLP/opus-mt-de-en -o runs/opus-x")
    )
    reads = state.one(Command("page.md", 3, "nmt export runs/opus-x --format hf -o runs/opus-x-hf"))
    assert made.how == reads.how == "dry-run", (made, reads)
