#!/usr/bin/env python
"""JoeyNMT's training tokens/s on the same data, sizes and batches as an nmt config: the peer
figure of the speed benchmark.

    python benchmarks/joeynmt_peer.py configs/multi30k/de-en/transformer_local.yaml \
        --python /path/to/joeynmt-venv/bin/python --updates 60 --out joey.json

JoeyNMT runs in a Python of its own (its pins are not ours; `pip install torch==2.13.0
joeynmt==2.3.0` in a second venv). The nmt config is turned into a JoeyNMT 2.3 config: the same
train/dev files, the same sentencepiece model and vocabulary, the same layer sizes (Transformer:
d_model, heads, ff, layers, pre/post norm, tied embeddings; RNN: GRU/LSTM, embedding, encoder and
decoder sizes, Bahdanau attention), token batches of the config's `batch_tokens`, Adam, label
smoothing, CPU, fp32. JoeyNMT trains `--updates` updates and logs "Tokens per Sec" (target tokens
over wall time) every `--log-every`; the first `--skip` logs (start-up, warm-up) are dropped and
the median of the rest is the figure. JoeyNMT's own parameter count is reported beside ours.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine, write_json  # noqa: E402

TOKENS_PER_SEC = re.compile(r"Tokens per Sec:\s*([0-9.]+)")
TOTAL_PARAMS = re.compile(r"Total params:\s*(\d+)")


def has_peer(model) -> bool:
    """JoeyNMT's RNN decoder always attends: seq2seq (no attention) has no JoeyNMT twin."""
    return model.arch in ("transformer", "rnnsearch")


def model_section(model) -> dict:
    """JoeyNMT's `model:` section for one of our architecture configs."""
    if model.arch == "transformer":
        side = {
            "type": "transformer",
            "num_layers": model.layers,
            "num_heads": model.heads,
            "hidden_size": model.d_model,
            "ff_size": model.ff,
            "dropout": model.dropout,
            "layer_norm": model.norm,
            "embeddings": {"embedding_dim": model.d_model, "scale": True},
        }
        tied = bool(model.tie_embeddings)
        return {
            "tied_embeddings": tied,
            "tied_softmax": bool(model.tie_output),
            "encoder": side,
            "decoder": dict(side),
        }
    if not has_peer(model):
        raise SystemExit(f"error: JoeyNMT has no peer of arch '{model.arch}'")
    if model.attention == "luong_dot":
        raise SystemExit("error: JoeyNMT has no dot-product (luong_dot) RNN attention")
    emb = {"embedding_dim": model.emb_size}
    encoder = {
        "type": "recurrent",
        "rnn_type": model.rnn_type,
        "hidden_size": model.enc_hidden_size or model.hidden_size // 2,
        "bidirectional": True,
        "num_layers": model.layers,
        "dropout": model.dropout,
        "embeddings": emb,
    }
    decoder = {
        "type": "recurrent",
        "rnn_type": model.rnn_type,
        "hidden_size": model.hidden_size,
        "num_layers": model.layers,
        "dropout": model.dropout,
        "hidden_dropout": model.dropout,
        "attention": "bahdanau" if model.attention == "bahdanau" else "luong",  # luong = general
        "input_feeding": True,
        "init_hidden": "bridge",
        "embeddings": dict(emb),
    }
    return {"encoder": encoder, "decoder": decoder}


def schedule(train) -> dict:
    """JoeyNMT's name for our schedule. JoeyNMT 2.3 has no constant rate and its plateau
    scheduler passes `verbose`, which torch 2.13 no longer takes: plateau becomes "decaying"
    (a per-epoch step, never reached in a benchmark); a schedule changes no step's cost."""
    if train.schedule == "inverse_sqrt":
        return {"scheduling": "warmupinversesquareroot", "learning_rate_warmup": train.warmup_steps}
    return {"scheduling": "decaying"}


def joey_config(cfg, spm_model: Path, vocab: Path, model_dir: Path, updates: int, log_every: int):
    """The JoeyNMT 2.3 config (a dict) that trains what `cfg` trains, for `updates` updates."""
    splits, path = cfg.data.splits, Path(cfg.data.path)
    side = {
        "level": "bpe",
        "lowercase": False,
        "max_length": cfg.data.max_len,
        "voc_file": str(vocab),
        "tokenizer_type": "sentencepiece",
        "tokenizer_cfg": {"model_file": str(spm_model)},
    }
    return {
        "name": "nmt-peer",
        "data": {
            "train": str(path / splits["train"]),
            "dev": str(path / splits["valid"]),
            "dataset_type": "plain",
            "src": {"lang": cfg.data.src_lang, **side},
            "trg": {"lang": cfg.data.tgt_lang, **side},
        },
        "testing": {"beam_size": 1, "eval_metrics": ["bleu"]},
        "training": {
            "model_dir": str(model_dir),
            "overwrite": True,
            "random_seed": cfg.train.seed,
            "optimizer": "adam",
            "adam_betas": list(cfg.train.betas),
            "learning_rate": cfg.train.lr,
            **schedule(cfg.train),
            "label_smoothing": cfg.train.label_smoothing,
            "clip_grad_norm": cfg.train.clip_grad,
            "normalization": "tokens",
            "batch_size": cfg.data.batch_tokens,
            "batch_type": "token",
            "epochs": 1000,
            "updates": updates,
            "logging_freq": log_every,
            "validation_freq": 10 * updates,  # no validation inside the timed updates
            "use_cuda": False,
            "fp16": False,
            "keep_best_ckpts": 1,
            "print_valid_sents": [],
        },
        "model": model_section(cfg.model),
    }


def parse_log(text: str, skip: int) -> dict:
    """Tokens/s (median of the logs after the first `skip`) and the parameter count."""
    rates = [float(x) for x in TOKENS_PER_SEC.findall(text)]
    if len(rates) <= skip:
        raise SystemExit(f"error: JoeyNMT logged {len(rates)} speeds, need more than {skip}")
    params = TOTAL_PARAMS.search(text)
    return {
        "tgt_tok_s": statistics.median(rates[skip:]),
        "tgt_tok_s_logs": rates,
        "params": int(params.group(1)) if params else None,
    }


def measure(config: str, python: str, updates: int, log_every: int, skip: int) -> dict:
    """Train JoeyNMT on what `config` describes and return its speed and size."""
    import yaml

    from nmt.config.load import load_config
    from nmt.data.prepared import prepared_corpus
    from nmt.models import build_model

    cfg = load_config(config, ["train.progress=false"])
    sliced = any("[" in cfg.data.splits[k] for k in ("train", "valid"))
    if cfg.data.source != "local" or cfg.data.format != "text" or sliced:
        raise SystemExit(
            f"error: {config}: the JoeyNMT peer reads whole plain-text files (a _local config, no split slices)"
        )
    if not cfg.vocab.joint:
        raise SystemExit("error: the JoeyNMT peer needs a joint vocabulary (vocab.joint: true)")
    tok = prepared_corpus(cfg).tokenizer
    ours = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size).num_parameters()
    with tempfile.TemporaryDirectory(prefix="joeynmt-peer-") as tmp:
        tmp = Path(tmp)
        spm_model = tok.save(tmp)[0]
        vocab = tmp / "vocab.txt"
        sp = tok.src
        vocab.write_text(
            "".join(sp.id_to_piece(i) + "\n" for i in range(sp.get_piece_size())), "utf-8"
        )
        conf = tmp / "joey.yaml"
        joey = joey_config(cfg, spm_model, vocab, tmp / "model", updates, log_every)
        conf.write_text(yaml.safe_dump(joey), "utf-8")
        done = subprocess.run(
            [python, "-m", "joeynmt", "train", str(conf), "--skip-test"],
            capture_output=True,
            text=True,
        )
        log = done.stdout + done.stderr
        if done.returncode:
            raise SystemExit(f"error: JoeyNMT failed on {config}:\n{log[-2000:]}")
    version = subprocess.run(
        [python, "-c", "import joeynmt; print(joeynmt.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "config": config,
        "arch": cfg.model.arch,
        "joeynmt": version,
        "updates": updates,
        "batch_tokens": cfg.data.batch_tokens,
        "nmt_params": ours,
        **parse_log(log, skip),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("configs", nargs="+", help="nmt training configs (transformer, rnnsearch)")
    ap.add_argument("--python", required=True, help="the Python that has joeynmt installed")
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--skip", type=int, default=1, help="first logs dropped (warm-up)")
    ap.add_argument("--out", help="JSON file")
    a = ap.parse_args(argv)
    rows = [measure(c, a.python, a.updates, a.log_every, a.skip) for c in a.configs]
    if a.out:
        write_json(a.out, {"machine": machine(), "joeynmt": rows})
    for r in rows:
        print(f"{r['arch']}: JoeyNMT {r['joeynmt']} {r['tgt_tok_s']:.0f} target tok/s")
    return rows


if __name__ == "__main__":
    main()
