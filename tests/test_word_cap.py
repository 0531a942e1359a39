"""data.train_max_words: training pairs longer than N words on either side are dropped from train
only; every cap shares one prepared corpus and subword model, never an uncapped corpus's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nmt.cli.main import main
from nmt.data.corpus import load_split
from nmt.data.prepared import corpus_key, ensure_prepared, prepared_corpus
from test_prepared import config, write_corpus


def words(n: int, word: str = "w") -> str:
    return " ".join(f"{word}{i % 7}" for i in range(n))


@pytest.fixture
def lengths_dir(tmp_path: Path) -> Path:
    """Pairs of 3 to 40 words a side; pair k has k % 38 + 3 source words and one target word
    fewer, except the pairs whose target is the long side."""
    pairs = []
    for k in range(120):
        n = k % 38 + 3
        src, tgt = (words(n), words(n - 1, "v")) if k % 5 else (words(4), words(n, "v"))
        pairs.append((src, tgt))
    d = write_corpus(tmp_path / "corpus", pairs)
    write_corpus(d, pairs[:50], "valid")
    return d


def longer_side(pair: tuple[str, str]) -> int:
    return max(len(pair[0].split()), len(pair[1].split()))


def test_a_word_cap_drops_training_pairs_over_it_on_either_side(lengths_dir, tmp_path):
    data = {"max_len": 100, "max_ratio": 20.0}
    uncapped = prepared_corpus(config(lengths_dir, tmp_path / "p", data))
    capped = prepared_corpus(config(lengths_dir, tmp_path / "p", {**data, "train_max_words": 20}))
    src, tgt = load_split(config(lengths_dir, tmp_path / "p").data, "train")
    within = [i for i, p in enumerate(zip(src, tgt)) if longer_side(p) <= 20]
    assert uncapped.kept.tolist() == list(range(120))
    assert capped.kept.tolist() == within  # a long target drops its pair too
    assert 0 < len(within) < 120
    assert np.array_equal(capped.src_len, uncapped.src_len[within])
    assert capped.stats.kept == len(within) and capped.stats.total == 120
    assert f"{120 - len(within)} over train_max_words (20)" in capped.stats.line()
    # every kept pair is batched once an epoch, and none over the cap
    batcher = capped.batcher(config(lengths_dir, tmp_path / "p").data, seed=1)
    seen = np.concatenate(batcher.epoch(0))
    assert sorted(capped.kept[seen].tolist()) == within


def test_valid_and_test_are_never_capped(lengths_dir, tmp_path):
    cfg = config(lengths_dir, tmp_path / "p", {"train_max_words": 5})
    src, _ = load_split(cfg.data, "valid")
    assert len(src) == 50 and max(len(s.split()) for s in src) > 5


def test_capped_and_uncapped_corpora_never_share_a_cache_but_caps_share_one(lengths_dir, tmp_path):
    root = tmp_path / "p"
    keys = {n: corpus_key(config(lengths_dir, root, {"train_max_words": n})) for n in (0, 30, 50)}
    assert keys[0] != keys[30] and keys[30] == keys[50]
    plain, _ = ensure_prepared(config(lengths_dir, root))
    capped, built = ensure_prepared(config(lengths_dir, root, {"train_max_words": 30}))
    assert built and capped != plain
    assert (capped / "words.npy").is_file() and not (plain / "words.npy").exists()
    # the -30 and -50 models: one corpus, one subword model
    again, built = ensure_prepared(config(lengths_dir, root, {"train_max_words": 50}))
    assert again == capped and not built
    # an uncapped config still finds the corpus it had before the key existed
    assert keys[0] == corpus_key(config(lengths_dir, root))


def test_a_cap_that_keeps_nothing_is_one_line_naming_the_key(lengths_dir, tmp_path):
    cfg = config(lengths_dir, tmp_path / "p", {"train_max_words": 2})
    with pytest.raises(Exception, match="train_max_words") as e:
        prepared_corpus(cfg)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "value, expected",
    [("-1", "expected >= 0, got -1"), ("thirty", "expected int, got 'thirty'"), ("2.5", "int")],
)
def test_a_bad_cap_is_one_line_error(tmp_path, capsys, value, expected):
    from conftest import tiny_config, write_yaml

    path = write_yaml(tmp_path / "c.yaml", tiny_config(tmp_path))
    code = main(["train", str(path), "--dry-run", "--set", f"data.train_max_words={value}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "data.train_max_words" in err and expected in err
