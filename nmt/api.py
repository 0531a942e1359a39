"""The Python API: load a trained model once, translate lists of sentences with typed results.

    from nmt import Translator
    t = Translator.load("runs/multi30k-transformer")        # a run directory or a checkpoint file
    (r,) = t.translate(["Ein Hund rennt."], beam=5, nbest=2, alignment=True)
    r.text, r.nbest, r.src_pieces, r.tgt_pieces, r.alignment, r.warnings

Built on `nmt.checkpoint.load_model` and `nmt.translate.translate_texts`, the code `nmt translate`
runs, so the same checkpoint and settings give the same text. `nmt serve` shares it.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Optional

import torch

from nmt.checkpoint import load_model
from nmt.config import Config
from nmt.data.tokenizer import EOS, Tokenizer
from nmt.errors import NmtError
from nmt.models.base import NMTModel
from nmt.models.onednn import for_cpu_decoding
from nmt.models.quantize import check_int8_device, quantize_int8
from nmt.precision import decode_precision
from nmt.run_dir import RunDir
from nmt.translate import translate_texts

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float  # length-normalised model score (higher is better)


@dataclass
class TranslationResult:
    text: str  # best hypothesis, detokenised
    nbest: list[Hypothesis]  # the returned hypotheses, best first
    src_pieces: list[str]  # source subwords the model saw, with </s>
    tgt_pieces: list[str]  # best hypothesis' subwords, with </s>
    alignment: Optional[list[list[float]]]  # [len(tgt_pieces)][len(src_pieces)] or None
    warnings: list[str] = field(default_factory=list)  # e.g. the input was truncated


@dataclass(frozen=True)
class ModelInfo:
    arch: str
    parameters: int
    src_vocab: int
    tgt_vocab: int
    step: int
    valid_bleu: Optional[float]  # BLEU on the validation split at that step, when recorded
    checkpoint: str
    attention_layers: int  # cross-attention views: layers x heads (1 x 1 for RNNs)
    attention_heads: int
    max_input_tokens: int
    default_beam: int


class Translator:
    """A loaded model, its subwords and decoding defaults. Not thread-safe: call `translate`
    from one thread at a time (the server's decoding worker does)."""

    def __init__(
        self,
        cfg: Config,
        model: NMTModel,
        tok: Tokenizer,
        meta: dict,
        device: str | torch.device = "cpu",
        precision: str = "fp32",
    ) -> None:
        if precision not in PRECISIONS:
            raise NmtError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.cfg, self.model, self.tok, self.meta = cfg, model, tok, meta
        self.device, self.precision = torch.device(device), precision
        layers, heads = model.attention_shape()
        self.info = ModelInfo(
            arch=cfg.model.arch,
            parameters=model.num_parameters(),
            src_vocab=tok.src_vocab_size,
            tgt_vocab=tok.tgt_vocab_size,
            step=meta["step"],
            valid_bleu=_valid_bleu(Path(meta["path"]), meta["step"]),
            checkpoint=meta["path"],
            attention_layers=layers,
            attention_heads=heads,
            max_input_tokens=cfg.decode.max_input_tokens,
            default_beam=cfg.decode.beam,
        )

    @classmethod
    def load(
        cls,
        run_or_checkpoint: str | Path,
        device: str = "cpu",
        precision: Optional[str] = None,
        int8: bool = False,
    ) -> "Translator":
        """A run directory (its best checkpoint) or a checkpoint file; `precision` is the
        autocast dtype for decoding (bf16 on CPU or CUDA, fp16 on CUDA only), by default what
        `nmt translate` uses (fp32 on a CPU, the run's own on a GPU); `int8`: dynamic int8
        quantization of the linear layers (CPU only, fp32 activations), as `nmt translate --int8`."""
        device = str(device)
        if int8:
            check_int8_device(device)  # before loading anything
            if precision not in (None, "fp32"):
                raise NmtError(f"int8 decodes in fp32 (its activations), not {precision}")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise NmtError(f"device {device!r} asked for, but no CUDA device is available")
        if precision == "fp16" and not device.startswith("cuda"):
            raise NmtError("precision fp16 needs a CUDA device (use bf16 on CPU)")
        cfg, model, tok, meta = load_model(run_or_checkpoint, device)
        if precision is None:
            precision = decode_precision(cfg.train.precision, torch.device(device), int8)
        model = quantize_int8(model) if int8 else for_cpu_decoding(model, device, precision)
        return cls(cfg, model, tok, meta, device, precision)

    def source_lengths(self, texts: list[str]) -> list[int]:
        """Subword tokens (with EOS) each text costs a decoding batch, after truncation."""
        cap = self.cfg.decode.max_input_tokens + 1
        return [min(len(ids), cap) for ids in self.tok.encode_src(texts)]

    def translate(
        self,
        texts: list[str],
        beam: Optional[int] = None,
        nbest: int = 1,
        alignment: bool = False,
        attention_layer: int = -1,
        attention_head: Optional[int] = None,
        batch_tokens: Optional[int] = None,
    ) -> list[TranslationResult]:
        """One result per text, in order (blank texts give empty results). `beam` defaults to
        the checkpoint's decode.beam; alignment rows are the cross-attention of
        (attention_layer, attention_head; None = mean of heads) for each target piece."""
        beam = self.cfg.decode.beam if beam is None else beam
        if not 1 <= nbest <= beam:
            raise NmtError(f"nbest must be between 1 and the beam ({beam}), got {nbest}")
        dcfg = (
            self.cfg.decode
            if batch_tokens is None
            else replace(self.cfg.decode, batch_tokens=batch_tokens)
        )
        warnings = self._truncation_warnings(texts)
        with self._attention_view(attention_layer, attention_head, alignment), self._autocast():
            out = translate_texts(
                self.model,
                self.tok,
                texts,
                dcfg,
                beam=beam,
                nbest=nbest,
                return_attn=alignment,
                device=self.device,
                where="request",
            )
        results = []
        for t, warn in zip(out, warnings):
            tokens = [] if t.hyp is None else t.hyp.tokens
            attn = None
            if alignment and t.hyp is not None and t.hyp.attn is not None:
                attn = [[round(float(w), 4) for w in row] for row in t.hyp.attn.tolist()]
            results.append(
                TranslationResult(
                    t.text,
                    [Hypothesis(h, s) for h, s in zip(t.nbest, t.scores)],
                    t.src_pieces,
                    self.tok.tgt_pieces(tokens + [EOS]) if t.hyp is not None else [],
                    attn,
                    warn,
                )
            )
        return results

    def _truncation_warnings(self, texts: list[str]) -> list[list[str]]:
        cap = self.cfg.decode.max_input_tokens
        return [
            [f"input has {len(ids) - 1} subword tokens; truncated to the first {cap}"]
            if len(ids) - 1 > cap
            else []
            for ids in self.tok.encode_src(texts)
        ]

    @contextmanager
    def _attention_view(self, layer: int, head: Optional[int], wanted: bool) -> Iterator[None]:
        """Point the model's reported attention at (layer, head), then put it back."""
        if not wanted:
            yield
            return
        old = (self.model.attn_layer, self.model.attn_head)
        self.model.set_attention_view(layer, head)
        try:
            yield
        finally:
            self.model.attn_layer, self.model.attn_head = old

    def _autocast(self):
        if self.precision == "fp32":
            return torch.autocast(self.device.type, enabled=False)
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)


def _valid_bleu(checkpoint: Path, step: int) -> Optional[float]:
    """The validation BLEU the run logged at `step` (in the metrics of the checkpoint's run)."""
    for run in (RunDir(checkpoint.parent), RunDir(checkpoint.parent.parent)):
        path = run.metrics
        if not path.is_file():
            continue
        try:
            rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
        except (OSError, ValueError):
            return None
        bleus = [
            r["bleu"]
            for r in rows
            if isinstance(r, dict)
            and r.get("split") == "valid"
            and r.get("step") == step
            and isinstance(r.get("bleu"), (int, float))
        ]
        return float(bleus[-1]) if bleus else None
    return None
