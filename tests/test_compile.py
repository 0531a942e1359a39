"""train.compile: auto runs eager where the compiled step was not measured faster, true compiles
(or fails in one line without a C++ compiler), a failing compile under auto falls back to eager
with one warning, compile seconds are reported apart from step time, and the kernel cache lives
under NMT_CACHE."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest
import torch

from nmt.config.load import load_config
from nmt.errors import NmtError
from nmt.jobs import train as train_job
from nmt.training import compile as compile_mod
from nmt.training.compile import COMPILE_WINS, EagerFallback, should_compile
from nmt.training.log import LogWindow

sys.path.insert(0, str(Path(__file__).parent))
from test_train import metrics, write_config  # noqa: E402

CPU = torch.device("cpu")


@pytest.mark.parametrize("arch", ["seq2seq", "rnnsearch", "transformer"])
def test_auto_runs_eager_on_a_cpu_where_compiling_measured_slower(arch, caplog):
    assert COMPILE_WINS[("cpu", arch)] is False
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert should_compile("auto", CPU, arch) is False
    assert "compile: off (train.compile: auto; cpu, " + arch in caplog.text
    assert "measured slower than eager" in caplog.text


def test_auto_on_an_unmeasured_device_runs_eager_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert should_compile("auto", torch.device("cuda"), "transformer") is False
    assert "not measured here" in caplog.text


def test_false_never_compiles():
    assert should_compile(False, CPU, "transformer") is False


def test_true_without_a_cxx_compiler_is_one_line_naming_the_key(monkeypatch):
    monkeypatch.setattr(compile_mod, "cxx_compiler", lambda: None)
    with pytest.raises(NmtError) as err:
        should_compile(True, CPU, "transformer")
    message = str(err.value)
    assert "\n" not in message
    assert "'train.compile: true'" in message and "C++ compiler" in message


def test_auto_without_a_cxx_compiler_runs_eager_even_where_compiling_wins(monkeypatch, caplog):
    monkeypatch.setattr(compile_mod, "cxx_compiler", lambda: None)
    monkeypatch.setitem(COMPILE_WINS, ("cpu", "transformer"), True)
    with caplog.at_level(logging.INFO, logger="nmt"):
        assert should_compile("auto", CPU, "transformer") is False
    assert "no C++ compiler found" in caplog.text


def test_a_failing_compile_under_auto_warns_once_and_trains_eager(caplog):
    class Broken(torch.nn.Module):
        calls = 0

        def forward(self, x):
            Broken.calls += 1
            raise torch._dynamo.exc.BackendCompilerFailed(
                lambda: None, RuntimeError("no cc1plus"), None
            )

    eager = torch.nn.Linear(3, 2)
    net = EagerFallback(Broken(), eager)
    x = torch.randn(4, 3)
    with caplog.at_level(logging.WARNING, logger="nmt"):
        first, second = net(x), net(x)
    assert torch.equal(first, eager(x)) and torch.equal(second, eager(x))
    assert Broken.calls == 1  # not retried on every step
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "compile failed, training eager instead" in warnings[0].message
    assert "\n" not in warnings[0].message


def test_compile_seconds_are_left_out_of_tokens_per_second():
    window = LogWindow(start=time.time() - 10.0, tokens=1000.0, loss=2000.0, batches=1)
    out = {"lr": 1e-3, "grad_norm": torch.tensor(1.0)}
    plain = window.row(5, 0, out, 0.0)
    compiled = window.row(5, 0, out, 0.0, compile_s=8.0)
    assert "compile_s" not in plain and compiled["compile_s"] == 8.0
    assert plain["tok_s"] == pytest.approx(100, rel=0.05)
    assert compiled["tok_s"] == pytest.approx(500, rel=0.1)  # 1,000 tokens in the 2 s not compiling


def test_true_trains_a_compiled_transformer_with_its_cache_under_nmt_cache(
    tmp_path, monkeypatch, nmt_cache
):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cfg = write_config(tmp_path, "transformer", max_steps=3, log_every=3, compile=True)
    run = train_job.train(load_config(cfg)).run
    rows = [m for m in metrics(run) if m["split"] == "train"]
    assert len(rows) == 1 and torch.isfinite(torch.tensor(rows[0]["loss"]))
    assert rows[0]["compile_s"] > 0  # reported apart from the step time
    assert "compile: on (train.compile: true" in (run / "train.log").read_text()
    inductor = nmt_cache / "compile" / "inductor"
    assert inductor.is_dir() and any(inductor.rglob("*.py"))


def test_compiled_dropout_draws_its_mask_with_the_byte_op_and_drops_the_gradient_with_it():
    from nmt.models.dropout import byte_dropout

    torch.manual_seed(0)
    x = torch.randn(256, 64, requires_grad=True)
    step = torch.compile(lambda t: byte_dropout(t, 0.25) * 2, dynamic=True)
    y = step(x)
    y.sum().backward()
    kept = y != 0
    assert 0.70 < kept.float().mean().item() < 0.80  # p = 64/256 exactly
    assert torch.equal(x.grad != 0, kept)  # the same mask forward and backward
    assert torch.allclose(y[kept], (x * 2 * 256 / 192)[kept])
    assert not torch.equal(step(x) != 0, kept)  # a new mask each call


def test_an_eager_run_never_imports_the_compiler():
    """compile_seconds() is read at every training log line: without compiling it is 0 and
    costs no import of torch._dynamo (about 1.7 s)."""
    import subprocess

    code = (
        "import sys; from nmt.training.compile import compile_seconds, should_compile; "
        "import torch; should_compile('auto', torch.device('cpu'), 'transformer'); "
        "assert compile_seconds() == 0.0; print('torch._dynamo' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def _tiny_rnnsearch() -> torch.nn.Module:
    from nmt.models.rnn_config import RNNSearchConfig
    from nmt.models.rnnsearch import RNNSearch

    cfg = RNNSearchConfig(arch="rnnsearch", emb_size=16, hidden_size=24, dropout=0.0)
    torch.manual_seed(0)
    return RNNSearch(cfg, 50, 50)


def _batch(rows: int, src_len: int, tgt_len: int) -> tuple[torch.Tensor, ...]:
    src = torch.randint(4, 50, (rows, src_len))
    mask = torch.ones(rows, src_len, dtype=torch.bool)
    mask[::2, src_len // 2 :] = False  # every other row padded
    return src, mask, torch.randint(4, 50, (rows, tgt_len))


def test_rnnsearch_compiles_its_decoder_step_and_decodes_eager():
    """The loop over target steps stays Python: one compiled graph serves every target length,
    where the whole forward compiled would unroll into a graph per length."""
    model, calls = _tiny_rnnsearch(), []

    def counted(fn):
        return lambda *args: calls.append(1) or fn(*args)

    assert model.compile_regions(counted) is True
    src, mask, tgt = _batch(3, 5, 7)
    model.train()
    model(src, src_mask=mask, tgt_in=tgt)
    assert len(calls) == 7  # one call a target step
    model.eval()
    with torch.no_grad():
        model(src, src_mask=mask, tgt_in=tgt)
        state = model.init_state(model.encode(src, mask))
        model.decode_step(state, tgt[:, 0])
    assert len(calls) == 7  # validation and decoding run the eager step


def test_models_without_a_python_time_loop_are_compiled_whole():
    from nmt.models.rnn_config import Seq2SeqConfig
    from nmt.models.seq2seq import Seq2Seq
    from nmt.models.transformer import Transformer
    from nmt.models.transformer_config import TransformerConfig

    tiny = TransformerConfig(arch="transformer", d_model=16, heads=2, ff=32, layers=1)
    for model in (
        Transformer(tiny, 50, 50),
        Seq2Seq(Seq2SeqConfig(arch="seq2seq", emb_size=16, hidden_size=24), 50, 50),
    ):
        assert model.compile_regions(lambda fn: pytest.fail("no region to compile")) is False


def test_true_trains_rnnsearch_with_its_decoder_step_compiled(tmp_path, nmt_cache):
    cfg = write_config(tmp_path, "rnnsearch", max_steps=3, log_every=3, compile=True)
    run = train_job.train(load_config(cfg)).run
    rows = [m for m in metrics(run) if m["split"] == "train"]
    assert len(rows) == 1 and torch.isfinite(torch.tensor(rows[0]["loss"]))
    assert rows[0]["compile_s"] > 0
    assert "compile: one decoder step a graph" in (run / "train.log").read_text()


def test_compiled_rnnsearch_step_learns_what_the_eager_one_does(monkeypatch, nmt_cache):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)  # the kernels go to NMT_CACHE
    eager, compiled = _tiny_rnnsearch(), _tiny_rnnsearch()
    compiled.compile_regions(lambda fn: compile_mod.compile_module(fn, dynamic=True))
    for shape in ((4, 6, 5), (3, 9, 8)):  # token-bucketed batches change shape every step
        src, mask, tgt = _batch(*shape)
        for model in (eager, compiled):
            model.zero_grad()
            model(src, src_mask=mask, tgt_in=tgt).logsumexp(-1).mean().backward()
        for (name, a), b in zip(eager.named_parameters(), compiled.parameters()):
            # fused kernels sum in another order than eager ones: equal up to rounding
            assert torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5), name
