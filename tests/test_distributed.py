"""torchrun setup and DDP semantics: one-line errors for impossible layouts, the collective
timeout, and a loss normalised by the token count of all ranks (two gloo processes)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as tdist
import torch.multiprocessing as mp

from conftest import make_config, tiny_model
from nmt.data.batching import make_batch
from nmt.errors import NmtError
from nmt.models import build_model
from nmt.training import distributed
from nmt.training.distributed import DistInfo


def _torchrun_env(monkeypatch, rank: int, world: int) -> None:
    for key, value in {
        "WORLD_SIZE": world,
        "RANK": rank,
        "LOCAL_RANK": rank,
        "LOCAL_WORLD_SIZE": world,
    }.items():
        monkeypatch.setenv(key, str(value))


def test_more_processes_than_gpus_is_a_one_line_error(monkeypatch):
    _torchrun_env(monkeypatch, rank=1, world=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(
        NmtError,
        match=r"torchrun --nproc_per_node=2 starts more processes than "
        r"this machine has GPUs \(1\)",
    ):
        distributed.init("auto")


def test_cuda_under_torchrun_without_cuda_is_an_error_not_a_silent_gloo_run(monkeypatch):
    _torchrun_env(monkeypatch, rank=0, world=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(NmtError, match="'train.device: cuda' but no CUDA device is available"):
        distributed.init("cuda")


def test_the_collective_timeout_comes_from_the_config(monkeypatch):
    _torchrun_env(monkeypatch, rank=0, world=2)
    seen = {}
    monkeypatch.setattr(tdist, "is_initialized", lambda: False)
    monkeypatch.setattr(tdist, "init_process_group", lambda **kw: seen.update(kw))
    info = distributed.init("cpu", timeout_minutes=45)
    assert seen["backend"] == "gloo" and seen["timeout"].total_seconds() == 45 * 60
    assert (info.rank, info.world) == (0, 2)


# ---------------------------------------------------------------- two gloo ranks
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BATCHES = [  # two batches of very different token counts (3 and 9 target tokens + EOS)
    make_batch([[5, 6, 3]], [[7, 8]]),
    make_batch([[5, 9, 10, 3], [11, 3]], [[7, 7, 8, 9], [12, 13, 14]]),
]


def _trainer(tmp: Path, dist: DistInfo, accum: int):
    from nmt.training.trainer import Trainer

    cfg = make_config(
        model=tiny_model("transformer", d_model=16, ff=32, layers=1, dropout=0.0),
        train={"run_dir": str(tmp), "accum_steps": accum, "lr": 0.01},
    )
    torch.manual_seed(0)
    model = build_model(cfg.model, 20, 20)
    trainer = Trainer(cfg, model, None, None, [], tmp, dist)
    real_step, trainer.grads = trainer.opt.step, {}

    def step_keeping_grads():  # the gradients the optimiser is given
        trainer.grads.update({k: p.grad.clone() for k, p in model.named_parameters()})
        real_step()

    trainer.opt.step = step_keeping_grads
    return trainer


def _rank_main(rank: int, port: int, tmp: str, out: str) -> None:
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    torch.set_num_threads(1)
    trainer = _trainer(Path(tmp) / f"r{rank}", DistInfo(rank, 2, rank), accum=1)
    res = trainer.train_step([BATCHES[rank]])
    if rank == 0:
        torch.save(
            {
                "grads": trainer.grads,
                "loss": res["loss"],
                "tokens": res["tokens"],
                "broadcast_buffers": trainer.net.broadcast_buffers,
            },
            out,
        )
    tdist.destroy_process_group()


def test_ddp_step_equals_one_process_accumulating_both_ranks_batches(tmp_path):
    out = tmp_path / "rank0.pt"
    mp.spawn(_rank_main, args=(_free_port(), str(tmp_path), str(out)), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=True)
    single = _trainer(tmp_path / "single", DistInfo(), accum=2)
    res = single.train_step(BATCHES)
    # the logged loss and token count are global, not rank 0's
    assert ddp["tokens"] == res["tokens"] == 3 + 9
    assert ddp["loss"] == pytest.approx(res["loss"], rel=1e-5)
    # one loss over all tokens: each rank's gradient is weighted by its share of the tokens
    assert single.grads.keys() == ddp["grads"].keys()
    for k, g in single.grads.items():
        assert torch.allclose(ddp["grads"][k], g, atol=1e-6, rtol=1e-4), k
    assert ddp["broadcast_buffers"] is False
