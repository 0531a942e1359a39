"""Temperature sampling over directions (data.temperature, Arivazhagan et al. 2019): an epoch
draws direction d's pairs in proportion to n_d^(1/T)."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.data.batching import BucketBatcher
from nmt.data.temperature import (
    direction_shares,
    epoch_counts,
    sampled_examples,
    unsampled_directions,
    warn_unsampled,
)

SIZES = [900, 100]  # a large and a small direction


def batcher(temperature: float, seed: int = 1) -> BucketBatcher:
    rng = np.random.default_rng(0)
    n = sum(SIZES)
    src = [[5] * int(k) for k in rng.integers(1, 12, n)]
    tgt = [[6] * int(k) for k in rng.integers(1, 12, n)]
    groups = np.repeat(np.arange(len(SIZES)), SIZES).astype(np.int16)
    return BucketBatcher.from_lists(
        src, tgt, 60, seed=seed, prefetch=0, groups=groups, temperature=temperature
    )


def test_with_temperature_5_a_small_direction_gets_the_share_the_formula_says():
    b = batcher(5.0)
    epoch = np.concatenate(b.epoch(0))
    small = int((epoch >= SIZES[0]).sum())
    share = 100**0.2 / (900**0.2 + 100**0.2)  # p_d = n_d^(1/T) / sum_k n_k^(1/T)
    assert len(epoch) == 1000  # an epoch keeps its size
    assert small == round(1000 * share) == 392  # up from 100 at T = 1
    # the small direction is upsampled: each of its pairs 3 or 4 times, all of them at least 3
    seen = np.bincount(epoch[epoch >= SIZES[0]] - SIZES[0], minlength=100)
    assert set(seen.tolist()) <= {3, 4} and seen.sum() == 392
    # the large one is subsampled: each pair at most once
    assert np.bincount(epoch[epoch < SIZES[0]]).max() == 1


def test_temperature_1_is_every_pair_once_and_the_plain_plan():
    sampled = batcher(1.0)
    plain = BucketBatcher(sampled.src, sampled.tgt, 60, seed=1, prefetch=0)
    got, want = sampled.epoch(0), plain.epoch(0)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert sorted(np.concatenate(got).tolist()) == list(range(1000))


def test_sampling_is_seeded_per_epoch_and_the_same_in_every_process():
    a, b = batcher(5.0), batcher(5.0)
    assert all(np.array_equal(x, y) for x, y in zip(a.epoch(3), b.epoch(3)))
    first, second = (np.sort(np.concatenate(a.epoch(e))) for e in (0, 1))
    assert not np.array_equal(first, second)  # another epoch, another subset


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0, 5.0, 100.0])
def test_epoch_counts_follow_the_shares_and_add_up(temperature):
    sizes = np.array([5000, 700, 0, 40])
    counts = epoch_counts(sizes, temperature)
    shares = direction_shares(sizes, temperature)
    assert counts.sum() == sizes.sum() and counts[2] == 0
    assert np.all(np.abs(counts - shares * sizes.sum()) < 1)
    if temperature > 1:  # flatter than proportional: the smallest gains, the largest loses
        assert counts[3] > sizes[3] and counts[0] < sizes[0]


def test_one_direction_or_equal_shares_at_t_1_need_no_sampling():
    rng = np.random.default_rng(0)
    assert sampled_examples(np.zeros(10, dtype=np.int16), 5.0, rng) is None
    assert sampled_examples(np.array([0, 1, 1]), 1.0, rng) is None
    equal = sampled_examples(np.repeat([0, 1], 50), 5.0, rng)  # equal sizes: every pair once
    assert sorted(equal.tolist()) == list(range(100))


@pytest.mark.parametrize("temperature", [0.01, 0.001, 1e-6])
def test_a_small_temperature_gives_the_largest_direction_the_whole_epoch_without_overflow(
    temperature,
):
    sizes = np.array([27000, 3000])  # 27000 ** 100 overflows a float64
    shares = direction_shares(sizes, temperature)
    assert np.all(np.isfinite(shares)) and shares.sum() == pytest.approx(1.0)
    assert epoch_counts(sizes, temperature).tolist() == [30000, 0]
    groups = np.repeat([0, 1], sizes)
    epoch = sampled_examples(groups, temperature, np.random.default_rng(0))
    seen = np.bincount(epoch, minlength=30000)  # the large direction, upsampled to fill it
    assert len(epoch) == 30000 and set(seen[:27000].tolist()) == {1, 2} and not seen[27000:].any()


def test_log_space_shares_equal_the_formula_where_it_does_not_overflow():
    sizes = np.array([5000, 700, 0, 40])
    for temperature in (0.3, 1.0, 5.0):
        w = np.where(sizes > 0, sizes.astype(float) ** (1 / temperature), 0.0)
        assert direction_shares(sizes, temperature) == pytest.approx(w / w.sum(), rel=1e-12)


def test_a_direction_an_epoch_leaves_out_is_one_warning_line_naming_it(caplog):
    sizes = {"en-de": 27000, "en-fr": 3000, "de-fr": 0}
    assert unsampled_directions(sizes, 0.1) == ["en-fr", "de-fr"]
    with caplog.at_level("WARNING", logger="nmt"):
        warn_unsampled(sizes, 0.1)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith("direction en-fr gets no training pair: data.temperature 0.1")
    assert "raise data.temperature" in lines[0]
    assert (
        lines[1]
        == "direction de-fr gets no training pair: the corpus filter kept none of its pairs"
    )
    caplog.clear()
    warn_unsampled({"en-de": 27000, "en-fr": 3000}, 5.0)  # every direction sampled: silence
    assert not caplog.records
