"""Shared fixtures: the tiny training setup every test starts from, an isolated corpus cache, tiny
parallel corpora, the shared real corpora."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from nmt.config import Config
from nmt.config.load import from_dict, merge_sections
from nmt.data.synthetic import respell

# Real corpora live beside the project (never committed); tests using them skip without them.
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]

# The tiny training setup: a model of each architecture small enough to train in seconds on two
# CPU cores, on a small synthetic corpus, for a few steps, validated once at the end. Tests state
# only what they need to differ (tiny_config's overrides), and pass explicitly any value their
# assertions depend on.
TINY_MODELS: dict[str, dict[str, Any]] = {
    "seq2seq": {"arch": "seq2seq", "emb_size": 32, "hidden_size": 64},
    "rnnsearch": {"arch": "rnnsearch", "emb_size": 32, "hidden_size": 64},
    "transformer": {"arch": "transformer", "d_model": 32, "heads": 2, "ff": 64, "layers": 2},
}
TINY: dict[str, dict[str, Any]] = {
    "data": {
        "source": "synthetic",
        "batch_tokens": 400,
        "synthetic": {
            "train": 200,
            "valid": 10,
            "test": 20,
            "lexicon": 30,
            "max_words": 12,
            "seed": 5,
        },
    },
    "vocab": {"type": "word", "size": 200},
    "train": {
        "max_steps": 10,
        "lr": 0.003,
        "log_every": 5,
        "valid_every": 1000,  # past max_steps: one validation, at the end
        "progress": False,
        "seed": 7,
        "threads": 1,
    },
    "decode": {"beam": 2, "max_len_a": 1.2, "max_len_b": 5},  # short: a toy model may babble
}


def tiny_model(arch: str = "rnnsearch", **keys: Any) -> dict[str, Any]:
    """The `model:` section of the tiny `arch` (any other arch: just its name) with `keys` set."""
    return {**TINY_MODELS.get(arch, {"arch": arch}), **keys}


def tiny_config(
    tmp_path: Path | None = None, arch: str | None = "rnnsearch", **overrides: Any
) -> dict[str, Any]:
    """The raw config of the tiny setup: a tiny `arch` model (None: no model section, as in a
    study's base), its run in tmp_path/run.

    Each keyword is a section merged key by key, recursively, over the setup (as `base:` merges):
    `train={"max_steps": 30}`, `data={"synthetic": {"seed": 11}}`. A `model` naming another arch
    starts from that arch's tiny sizes; a data source other than synthetic drops the synthetic
    corpus. `make_config(**tiny_config(...))` validates it; `write_yaml` writes it for the CLI.
    """
    data, model = overrides.get("data", {}), overrides.get("model", {})
    raw: dict[str, Any] = {"data": TINY["data"], "vocab": TINY["vocab"]}
    if data.get("source", "synthetic") != "synthetic":
        raw["data"] = {k: v for k, v in TINY["data"].items() if k != "synthetic"}
    if arch is not None or model:
        raw["model"] = tiny_model(model.get("arch", arch))
    raw["train"] = dict(TINY["train"])
    if tmp_path is not None:
        raw["train"]["run_dir"] = str(tmp_path / "run")
    raw["decode"] = TINY["decode"]
    return merge_sections(raw, overrides)  # a copy: TINY stays as it is


def write_yaml(path: Path, raw: dict[str, Any]) -> Path:
    """`raw` written as YAML at `path` (its folder made), for `nmt` or load_config to read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def tiny_yaml(tmp_path: Path) -> Callable[..., Path]:
    """Factory: tiny_config(...) written to tmp_path/NAME, its run beside it; returns the file.

    Usage: `tiny_yaml("transformer", train={"max_steps": 4})` (tmp_path/config.yaml, trained in
    tmp_path/run), `tiny_yaml(name="a/config.yaml")` (trained in tmp_path/a/run).
    """

    def make(arch: str | None = "rnnsearch", name: str = "config.yaml", **overrides: Any) -> Path:
        path = tmp_path / name
        return write_yaml(path, tiny_config(path.parent, arch, **overrides))

    return make


def make_config(**sections: Any) -> Config:
    """A validated Config from section dicts over the dataclass defaults (not the tiny setup):
    `data` defaults to the synthetic source and `model.arch` to rnnsearch."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in sections.items()}
    raw.setdefault("data", {"source": "synthetic"})
    raw.setdefault("model", {"arch": "rnnsearch"})
    return from_dict(raw, "test config")


# A made-up language pair: the target reverses the word order and respells every word, so the
# two sides are aligned yet different (enough structure for subwords and a toy model).
_SRC_WORDS = (
    "le la un dog cat sees runs big small red house tree on under near with "
    "bird fish eats sleeps old young blue green river hill"
).split()
_TGT_WORDS = {w: w[::-1] + "o" for w in _SRC_WORDS}


def tiny_pairs(
    n: int, seed: int = 0, min_words: int = 2, max_words: int = 9
) -> list[tuple[str, str]]:
    """n deterministic (source, target) sentences of the made-up language pair."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        src = [rng.choice(_SRC_WORDS) for _ in range(rng.randint(min_words, max_words))]
        pairs.append((" ".join(src), " ".join(_TGT_WORDS[w] for w in reversed(src))))
    return pairs


@pytest.fixture(autouse=True, scope="session")
def nmt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Keep the synthetic-corpus cache out of the user's home directory."""
    cache = tmp_path_factory.mktemp("nmt_cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("NMT_CACHE", str(cache))
    yield cache
    mp.undo()


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Callable[..., Path]:
    """Factory: write `{split}.{src}` / `{split}.{tgt}` line-aligned files and return the dir.

    Usage: `tiny_corpus("de", "en", sizes={"train": 300, "valid": 40, "test": 40})`.
    """

    def make(
        src: str = "src",
        tgt: str = "tgt",
        sizes: dict[str, int] | None = None,
        name: str = "corpus",
    ) -> Path:
        out = tmp_path / name
        out.mkdir(parents=True, exist_ok=True)
        sizes = sizes or {"train": 300, "valid": 40, "test": 40}
        for seed, (split, n) in enumerate(sizes.items()):
            pairs = tiny_pairs(n, seed)
            (out / f"{split}.{src}").write_text("".join(s + "\n" for s, _ in pairs), "utf-8")
            (out / f"{split}.{tgt}").write_text("".join(t + "\n" for _, t in pairs), "utf-8")
        return out

    return make


@pytest.fixture
def multi30k() -> Path:
    """The shared Multi30k corpus (train/val/test_2016_flickr .de/.en/.fr), or a clean skip."""
    path = SHARED / "multi30k"
    if not (path / "train.de").is_file():
        pytest.skip(f"shared corpus not found: {path}")
    return path


def train_tiny_transformer(root: Path) -> Path:
    """A 2-layer, 2-head Transformer trained for 40 steps on a synthetic corpus in `root` (a
    few seconds); its run directory. The session fixture below and
    benchmarks/serve_under_memory_cap.py train it."""
    from dataclasses import replace

    from nmt.config import SyntheticConfig
    from nmt.config.load import load_config
    from nmt.data.synthetic import write_corpus
    from nmt.jobs import train as train_job

    write_corpus(
        root / "corpus",
        replace(SyntheticConfig(), train=400, valid=20, test=20, lexicon=30, max_words=12, seed=3),
    )
    cfg = tiny_config(
        root,
        "transformer",
        data={"source": "local", "path": str(root / "corpus")},
        train={"max_steps": 40, "valid_max_sentences": 20},
        decode={"beam": 3, "max_input_tokens": 20},
    )
    return train_job.train(load_config(write_yaml(root / "cfg.yaml", cfg))).run


@pytest.fixture(scope="session")
def tiny_transformer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`train_tiny_transformer`'s run, shared by the API, server and browser tests, which
    compare against `nmt translate`."""
    return train_tiny_transformer(tmp_path_factory.mktemp("tiny_transformer"))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: extra intra-op threads only add contention on a shared CPU (30x slower).
    A module uses it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The toy three-language corpus of the multilingual tests: a and b are tiny_pairs' two sides, c
# is a respelled as the synthetic generator respells its `alt` language (disjoint spellings).
DIRECTIONS = ["a-b", "b-a", "c-b", "b-c"]  # a-c and c-a are zero-shot
TAGS = ["source", "target"]


def write_three_way(out: Path, sizes: dict[str, int]) -> Path:
    """Line-aligned SPLIT.a, SPLIT.b, SPLIT.c for each split and size, split k drawn with seed k."""
    out.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes.items()):
        a, b = zip(*tiny_pairs(n, seed))
        for lang, lines in {"a": a, "b": b, "c": [respell(s) for s in a]}.items():
            (out / f"{split}.{lang}").write_text("".join(x + "\n" for x in lines), "utf-8")
    return out


@pytest.fixture(scope="session")
def three_way_corpus(tmp_path_factory) -> Path:
    """Line-aligned SPLIT.a, SPLIT.b, SPLIT.c (train, valid, test)."""
    sizes = {"train": 240, "valid": 12, "test": 16}
    return write_three_way(tmp_path_factory.mktemp("three_languages"), sizes)


@pytest.fixture(scope="session")
def multilingual_runs(three_way_corpus: Path, tmp_path_factory) -> dict[str, Path]:
    """A small Transformer trained on the four directions in each tag mode (150 steps: enough
    for the tag to decide the output language, as in test_multilingual.py), shared
    by the multilingual decoding, scoring and page tests."""
    from nmt.jobs import train as train_job

    root = tmp_path_factory.mktemp("multilingual_runs")
    out = {}
    for tag in TAGS:
        cfg = make_config(
            data={
                "source": "local",
                "path": str(three_way_corpus),
                "directions": DIRECTIONS,
                "tag": tag,
                "batch_tokens": 300,
                "prepared_dir": str(root / "prepared"),
            },
            vocab={"type": "unigram", "size": 120},
            model={"arch": "transformer", "d_model": 64, "heads": 4, "ff": 128, "layers": 2},
            train={
                "run_dir": str(root / tag),
                "max_steps": 150,
                "valid_every": 150,
                "valid_max_sentences": 5,
                "lr": 0.003,
                "progress": False,
                "threads": 1,
            },
            decode={"beam": 2, "max_len_a": 1.0, "max_len_b": 4},
        )
        out[tag] = train_job.train(cfg).run
    return out
