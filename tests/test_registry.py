"""The architecture registry: each architecture's config keys live with its model, the config
loader checks `model:` against the chosen architecture, and a new architecture is one file."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from nmt.checkpoint import load_model
from nmt.cli import main
from nmt.config.docs import docs_markdown
from nmt.config.load import load_config, model_config
from nmt.errors import NmtError
from nmt.jobs import train as train_job
from nmt.models import architectures, config_classes

REPO = Path(__file__).resolve().parents[1]

# A whole architecture in one file: its config keys, its model, its registration.
TINY_ARCH = textwrap.dedent('''
    from dataclasses import dataclass

    import torch
    import torch.nn.functional as F
    from torch import nn

    from nmt.config import ModelConfig, opt
    from nmt.models.base import EncoderOut, NMTModel, State
    from nmt.models.registry import register


    @dataclass
    class BagConfig(ModelConfig):
        width: int = opt(16, "embedding width", lo=1)


    class Bag(NMTModel):
        """Decodes from the mean source embedding and the previous target token."""

        def __init__(self, cfg, src_vocab, tgt_vocab):
            super().__init__()
            self.src = nn.Embedding(src_vocab, cfg.width)
            self.tgt = nn.Embedding(tgt_vocab, cfg.width)
            self.out = nn.Linear(2 * cfg.width, tgt_vocab)

        def encode(self, src, src_mask):
            mem = self.src(src) * src_mask.unsqueeze(-1)
            return EncoderOut(mem, src_mask, final=mem.sum(1) / src_mask.sum(1, keepdim=True))

        def init_state(self, enc):
            return State({"bag": enc.final})

        def decode_step(self, state, prev_tokens):
            logits = self.out(torch.cat([state["bag"], self.tgt(prev_tokens)], -1))
            return F.log_softmax(logits.float(), -1), State(state.tensors, state.step + 1), None

        def features(self, src, src_mask, tgt_in):
            bag = self.encode(src, src_mask).final.unsqueeze(1).expand(-1, tgt_in.size(1), -1)
            return torch.cat([bag, self.tgt(tgt_in)], -1)

        def vocab_projection(self):
            return self.out


    @register("bag", config=BagConfig)
    def build_bag(cfg, src_vocab, tgt_vocab):
        return Bag(cfg, src_vocab, tgt_vocab)
''')


def error_of(capsys, *args: str) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("nmt: error: ") and "\n" not in err, err
    return err


def test_a_key_of_another_architecture_is_an_error_naming_its_owner(tiny_yaml, tmp_path, capsys):
    # The example: heads and d_model mean nothing to an RNN.
    cfg = tiny_yaml("rnnsearch")
    err = error_of(
        capsys,
        "train",
        str(cfg),
        "--dry-run",
        "--set",
        "model.heads=8",
        "--set",
        "model.d_model=100",
    )
    assert "unknown key 'model.d_model'" in err or "unknown key 'model.heads'" in err
    assert "the 'rnnsearch' architecture has no such key (it belongs to transformer)" in err
    assert not (tmp_path / "run").exists()


def test_a_misspelt_key_suggests_the_closest_key_of_its_architecture(tiny_yaml, capsys):
    cfg = tiny_yaml("transformer", model={"d_modl": 64})
    err = error_of(capsys, "train", str(cfg))
    assert "unknown key 'model.d_modl'" in err and "did you mean 'model.d_model'?" in err


def test_an_unknown_architecture_is_refused_at_load_time_with_a_suggestion(
    tiny_yaml, tmp_path, capsys
):
    cfg = tiny_yaml("rnnsearc")
    err = error_of(capsys, "train", str(cfg))
    assert "unknown architecture 'model.arch: rnnsearc'" in err
    assert "did you mean 'rnnsearch'?" in err and "registered: rnnsearch, seq2seq" in err
    assert not (tmp_path / "run").exists()


def test_each_architecture_checks_its_own_fields_in_one_place(tiny_yaml):
    with pytest.raises(NmtError, match=r"'model.d_model' \(18\) .* divisible by 'model.heads'"):
        load_config(tiny_yaml("transformer", model={"d_model": 18, "heads": 4}))
    cfg = load_config(tiny_yaml("seq2seq", model={"hidden_size": 18}))
    assert type(cfg.model).__name__ == "Seq2SeqConfig" and cfg.model.hidden_size == 18
    assert not hasattr(cfg.model, "heads")


def test_model_config_builds_an_architecture_config_from_keywords():
    cfg = model_config("transformer", d_model=32, heads=4)
    assert type(cfg) is config_classes()["transformer"] and cfg.ff == 1024
    with pytest.raises(NmtError, match="'rnnsearch' architecture has no such key"):
        model_config("rnnsearch", heads=4)


def test_docs_have_one_table_per_architecture():
    docs = docs_markdown()
    for arch in architectures():
        assert f"## `model` with `arch: {arch}`" in docs
    rnn = docs.split("## `model` with `arch: rnnsearch`")[1].split("## ")[0]
    assert "`model.attention`" in rnn and "`model.heads`" not in rnn


# An architecture written before `features`: it overrides `forward` (logits) alone.
LOGITS_ONLY_ARCH = TINY_ARCH.replace(
    "def features(self, src, src_mask, tgt_in):", "def forward(self, src, src_mask, tgt_in):"
).replace(
    "return torch.cat([bag, self.tgt(tgt_in)], -1)",
    "return self.out(torch.cat([bag, self.tgt(tgt_in)], -1))",
)


@pytest.mark.parametrize("source", [TINY_ARCH, LOGITS_ONLY_ARCH], ids=["features", "logits-only"])
def test_a_new_architecture_is_one_file(tiny_yaml, tmp_path, monkeypatch, source):
    """Register a tiny architecture from a file outside the package, then train, evaluate and
    translate with it like any other: no other file changes."""
    path = tmp_path / "bag_arch.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("bag_arch", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bag_arch", module)
    spec.loader.exec_module(module)
    try:
        cfg = tiny_yaml("bag", model={"width": 12}, train={"max_steps": 4})
        run = train_job.train(load_config(cfg)).run
        cfg_loaded, model, tok, meta = load_model(run)
        assert cfg_loaded.model.width == 12 and meta["step"] == 4
        assert type(model).__name__ == "Bag"
        with pytest.raises(NmtError, match="'bag' architecture has no such key"):
            load_config(tiny_yaml("bag", "bad.yaml", model={"hidden_size": 3}))
    finally:  # leave the registry as other tests expect it
        from nmt.models import registry

        registry._BUILDERS.pop("bag", None)
        registry._CONFIGS.pop("bag", None)
