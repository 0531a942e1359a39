"""data.shapes: training batches padded to a few fixed (source, target) widths, a fixed row count
per width, every example once an epoch, so a step compiled with static shapes is captured once
per shape."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from nmt.config.load import load_config
from nmt.data.batching import BucketBatcher
from nmt.data.shapes import best_shapes, covering_cost, shape_of
from nmt.errors import NmtError
from nmt.jobs import train as train_job

sys.path.insert(0, str(Path(__file__).parent))
from test_train import metrics, write_config  # noqa: E402


def pairs(n: int = 600, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    rng = np.random.default_rng(seed)
    src_len = rng.integers(2, 50, n)
    tgt_len = np.clip(src_len + rng.integers(-4, 5, n), 1, None)
    return [list(range(1, k + 1)) for k in src_len], [list(range(1, k + 1)) for k in tgt_len]


def test_each_pair_gets_its_cheapest_covering_shape_and_the_longest_fits_the_last():
    src, tgt = np.array([3, 9, 12, 30]), np.array([4, 10, 11, 33])
    shapes = best_shapes(src, tgt, 2)
    assert len(shapes) <= 2 and tuple(shapes[-1]) == (30, 33)
    k = shape_of(shapes, src, tgt)
    assert (shapes[k, 0] >= src).all() and (shapes[k, 1] >= tgt).all()
    assert (shapes[k].sum(1) == covering_cost(shapes, src, tgt)).all()


def test_an_epoch_holds_every_example_once_in_at_most_twice_n_tensor_shapes():
    src, tgt = pairs()
    batcher = BucketBatcher.from_lists(src, tgt, 800, shapes=4)
    seen, tensor_shapes = [], set()
    for indices in batcher.epoch(1):
        batch = batcher.batch(indices)
        widths = (batch.src.shape[1], batch.tgt_in.shape[1])
        assert widths in {tuple(s) for s in batcher.shapes.tolist()}
        assert batch.src.shape[0] * max(widths) <= 800  # within the token budget, as bucketing
        assert batch.tgt_out.shape == batch.tgt_in.shape
        tensor_shapes.add((batch.src.shape[0], *widths))
        seen += indices.tolist()
    assert sorted(seen) == list(range(len(src)))
    # each width holds a fixed row count; only its last batch of the epoch is shorter
    assert len({shape[1:] for shape in tensor_shapes}) <= 4 and len(tensor_shapes) <= 8


def test_fixed_shapes_are_reproducible_per_epoch_and_shared_evenly_by_ranks():
    src, tgt = pairs()
    one = BucketBatcher.from_lists(src, tgt, 800, seed=3, shapes=4)
    again = BucketBatcher.from_lists(src, tgt, 800, seed=3, shapes=4)
    assert [b.tolist() for b in one.epoch(2)] == [b.tolist() for b in again.epoch(2)]
    assert [b.tolist() for b in one.epoch(2)] != [b.tolist() for b in one.epoch(3)]
    ranks = [BucketBatcher.from_lists(src, tgt, 800, shapes=4, rank=r, world=2) for r in (0, 1)]
    assert len(ranks[0].epoch(1)) == len(ranks[1].epoch(1))


def test_the_log_names_the_shapes_and_their_padding_and_bucketing_says_nothing():
    src, tgt = pairs()
    line = BucketBatcher.from_lists(src, tgt, 800, shapes=3).shape_line()
    assert line.startswith("fixed batch shapes (source x target widths): ")
    assert "rows)" in line and "% of real tokens" in line
    assert BucketBatcher.from_lists(src, tgt, 800).shape_line() == ""


def test_training_on_fixed_shapes_logs_them_and_learns(tmp_path):
    cfg = write_config(tmp_path, "transformer", max_steps=20, log_every=10)
    run = train_job.train(load_config(cfg, ["data.shapes=3"])).run
    losses = [m["loss"] for m in metrics(run) if m["split"] == "train"]
    assert len(losses) == 2 and losses[1] < losses[0]
    log = (run / "train.log").read_text()
    assert "fixed batch shapes (source x target widths): " in log
    # this CPU runs the step eager by default: the shapes only add padding, and the log says so
    assert "data.shapes pads every batch to a fixed shape for a compiled step" in log


def test_a_negative_shape_count_is_a_one_line_error_naming_the_key(tmp_path):
    with pytest.raises(NmtError, match="data.shapes"):
        load_config(write_config(tmp_path, "transformer", max_steps=2), ["data.shapes=-1"])


def test_fixed_shapes_compile_static_graphs_with_room_for_each_and_bucketing_symbolic_ones(
    monkeypatch, tmp_path
):
    """A static graph per shape and per shape's shorter last batch (a tiny Transformer on 2
    shapes compiled 4 graphs), so torch's default limit of 8 recompilations must rise; on CUDA
    each graph is replayed as a CUDA graph."""
    import torch

    from nmt.config.schema import TrainConfig
    from nmt.models.base import NMTModel
    from nmt.training import compile as compile_mod
    from nmt.training import step as step_mod
    from nmt.training.distributed import DistInfo

    asked = []
    monkeypatch.setattr(step_mod, "should_compile", lambda *args: True)
    monkeypatch.setattr(
        step_mod, "compile_module", lambda net, dynamic, device: asked.append(dynamic) or net
    )
    net = NMTModel()  # compiled whole, as the Transformer is
    for dynamic in (False, True):
        step_mod.wrap_model(net, TrainConfig(compile=True), DistInfo(), "transformer", dynamic)
    assert asked == [False, True]
    modes = []
    monkeypatch.setattr(torch, "compile", lambda net, dynamic, mode: modes.append(mode) or net)
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # compile_module sets them
        monkeypatch.setenv(name, str(tmp_path))
    with torch._dynamo.config.patch(recompile_limit=8):  # restored after
        compile_mod.compile_module(net, dynamic=True)
        assert torch._dynamo.config.recompile_limit == 8
        compile_mod.compile_module(net, dynamic=False)
        assert torch._dynamo.config.recompile_limit == compile_mod.MAX_STATIC_GRAPHS
        compile_mod.compile_module(net, dynamic=False, device_type="cuda")
        compile_mod.compile_module(net, dynamic=False, device_type="cuda", cuda_graphs=False)
    # static graphs on CUDA are captured as CUDA graphs, except a region called once a time
    # step (an RNN decoder's); the CPU keeps the default mode
    assert modes == [None, None, "reduce-overhead", None]
