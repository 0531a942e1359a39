"""Shared fixtures: an isolated corpus cache, tiny parallel corpora, the shared real corpora."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Callable

import pytest

from nmt.config import Config
from nmt.config.load import from_dict

# Real corpora live beside the project (never committed); tests using them skip without them.
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]

# A made-up language pair: the target reverses the word order and respells every word, so the
# two sides are aligned yet different (enough structure for subwords and a toy model).
_SRC_WORDS = (
    "le la un dog cat sees runs big small red house tree on under near with "
    "bird fish eats sleeps old young blue green river hill"
).split()
_TGT_WORDS = {w: w[::-1] + "o" for w in _SRC_WORDS}


def make_config(**sections: Any) -> Config:
    """A validated Config from section dicts; `model.arch` defaults to rnnsearch."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in sections.items()}
    raw.setdefault("model", {"arch": "rnnsearch"})
    return from_dict(raw, "test config")


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


@pytest.fixture(scope="session")
def tiny_transformer_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 2-head Transformer trained for 40 steps on a synthetic corpus (a few seconds):
    shared by the API, server and browser tests, which compare against `nmt translate`."""
    from dataclasses import replace

    import yaml

    from nmt.config import SyntheticConfig
    from nmt.config.load import load_config
    from nmt.data.synthetic import write_corpus
    from nmt.jobs import train as train_job

    root = tmp_path_factory.mktemp("tiny_transformer")
    write_corpus(
        root / "corpus",
        replace(SyntheticConfig(), train=400, valid=20, test=20, lexicon=30, max_words=12, seed=3),
    )
    cfg = {
        "data": {"source": "local", "path": str(root / "corpus"), "batch_tokens": 400},
        "vocab": {"type": "word", "size": 200},
        "model": {"arch": "transformer", "d_model": 32, "heads": 2, "ff": 64, "layers": 2},
        "train": {
            "run_dir": str(root / "run"),
            "max_steps": 40,
            "lr": 0.003,
            "valid_every": 40,
            "valid_max_sentences": 20,
            "progress": False,
            "seed": 7,
            "threads": 1,
        },
        "decode": {"beam": 3, "max_len_a": 1.2, "max_len_b": 5, "max_input_tokens": 20},
    }
    (root / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return train_job.train(load_config(root / "cfg.yaml")).run


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: extra intra-op threads only add contention on a shared CPU (30x slower).
    A module uses it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
