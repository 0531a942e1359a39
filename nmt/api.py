"""The Python API: load a trained model once, translate lists of sentences with typed results.

    from nmt import Translator
    t = Translator.load("runs/multi30k-transformer")        # a run directory or a checkpoint file
    (r,) = t.translate(["Ein Hund rennt."], beam=5, nbest=2, alignment=True)
    r.text, r.nbest, r.src_pieces, r.tgt_pieces, r.alignment, r.warnings
    t.translate("Ein Hund rennt.")                           # one string in, one string out
    t.translate("Ein Hund rennt.", constraints=["dog"])      # phrases the translation must hold
    t.translate("Ein Hund rennt.", tgt_lang="fr")            # a multilingual model: required
    t.translate("Ein Hund rennt.", tgt_lang="fr", pivot="en")  # two passes: de -> en -> fr

Built on `nmt.inference.load_for_decoding` and `nmt.text_translation.translate_through`, the code
`nmt translate` runs, so the same checkpoint and settings give the same text. `nmt serve` shares it.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence, overload

from nmt.config import DecodeConfig
from nmt.config.load import with_decode_options
from nmt.data.constraints_file import from_value, missed_message
from nmt.data.directions import (
    check_target,
    route,
    source_languages,
    target_languages,
    target_tokenizer,
)
from nmt.data.tokenizer import EOS, Tokenizer
from nmt.errors import NmtError
from nmt.inference import Loaded, decode_settings, load_for_decoding
from nmt.run_dir import RunDir
from nmt.search.constraints import Phrases
from nmt.text_translation import (
    Translation,
    check_pivot_options,
    encode_constraints,
    translate_through,
)
from nmt.unknown_words import describe_unknown, unknown_words


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float  # length-normalised model score (higher is better)


class TranslationResult(str):
    """The best translation, as a string (so `translate("...")` gives a string and a list gives a
    list of strings, as `transformers` users expect), carrying what else the search returned."""

    nbest: list[Hypothesis]  # the returned hypotheses, best first
    src_pieces: list[str]  # source subwords the model saw, with </s>
    tgt_pieces: list[str]  # best hypothesis' subwords, with </s>
    alignment: Optional[list[list[float]]]  # [len(tgt_pieces)][len(src_pieces)] or None
    warnings: list[str]  # unknown words, truncation, constraint phrases missed
    # Phrases that had to appear and are not in the text as whole words; None without any.
    unmet: Optional[int]

    def __new__(
        cls,
        text: str,
        nbest: list[Hypothesis],
        src_pieces: list[str],
        tgt_pieces: list[str],
        alignment: Optional[list[list[float]]],
        warnings: Optional[list[str]] = None,
        unmet: Optional[int] = None,
    ) -> "TranslationResult":
        self = super().__new__(cls, text)
        self.nbest, self.src_pieces, self.tgt_pieces = nbest, src_pieces, tgt_pieces
        self.alignment, self.warnings, self.unmet = alignment, list(warnings or []), unmet
        return self

    @property
    def text(self) -> str:
        """The best hypothesis, detokenised (the string itself, as a plain str)."""
        return str.__str__(self)

    def as_dict(self) -> dict:
        """The JSON form the server returns."""
        return {
            "text": self.text,
            "nbest": [asdict(h) for h in self.nbest],
            "src_pieces": self.src_pieces,
            "tgt_pieces": self.tgt_pieces,
            "alignment": self.alignment,
            "warnings": self.warnings,
            "unmet": self.unmet,
        }


@dataclass(frozen=True)
class Sampling:
    """Draw tokens instead of searching (`nbest` samples per text); None keeps the checkpoint's
    decode.* setting."""

    temperature: Optional[float] = None  # divide log-probs by T
    top_k: Optional[int] = None  # draw from the K likeliest tokens (0: all)
    top_p: Optional[float] = None  # draw from the nucleus of mass P
    seed: Optional[int] = None


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
    # what `tgt_lang` accepts: a multilingual model's target languages (required), else its own
    target_languages: list[str]
    source_languages: list[str]  # the languages it was trained to read
    multilingual: bool  # trained on several directions (data.directions): tgt_lang is required


class Translator:
    """A loaded model (or ensemble), its subwords and decoding defaults. Not thread-safe: call
    `translate` from one thread at a time (the server's decoding worker does)."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.cfg, self.model, self.tok, self.meta = (
            loaded.cfg,
            loaded.model,
            loaded.tok,
            loaded.meta,
        )
        self.device, self.precision = loaded.device, loaded.precision
        layers, heads = self.model.attention_shape()
        self.info = ModelInfo(
            arch=self.cfg.model.arch,
            parameters=self.model.num_parameters(),
            src_vocab=self.tok.src_vocab_size,
            tgt_vocab=self.tok.tgt_vocab_size,
            step=self.meta["step"],
            valid_bleu=_valid_bleu(Path(self.meta["path"]), self.meta["step"]),
            checkpoint=self.meta["path"],
            attention_layers=layers,
            attention_heads=heads,
            max_input_tokens=self.cfg.decode.max_input_tokens,
            default_beam=self.cfg.decode.beam,
            target_languages=target_languages(self.cfg.data),
            source_languages=source_languages(self.cfg.data),
            multilingual=bool(self.cfg.data.directions),
        )

    @classmethod
    def load(
        cls,
        run_or_checkpoint: str | Path | Sequence[str | Path],
        device: Optional[str] = None,
        precision: Optional[str] = None,
        int8: bool = False,
        decode: Optional[dict] = None,
    ) -> "Translator":
        """A run directory (its best checkpoint) or a checkpoint file, or a list of them decoded
        as one ensemble, loaded as `nmt translate` loads them (`nmt.inference`): `device`
        defaults to the run's training device where this machine has it, else the CPU;
        `precision` is the autocast dtype for decoding (bf16 on CPU or CUDA, fp16 on CUDA
        only), by default fp32 on a CPU and the run's own on a GPU; `int8`: dynamic int8
        quantization of the linear layers (CPU only, fp32 activations); `decode`: decode.*
        settings over the run's, checked as the config's (e.g. {"language_vocab": 10})."""
        where = "Translator.load(decode=...)"
        if decode is not None and not isinstance(decode, Mapping):
            raise NmtError(
                f"{where}: expected a dict of decode.* settings (e.g. {{'beam': 5}}) or None, "
                f"got {type(decode).__name__} {decode!r:.40}"
            )
        return cls(load_for_decoding(run_or_checkpoint, device, precision, int8, decode, where))

    def tokenizer(self, tgt_lang: Optional[str] = None) -> Tokenizer:
        """The tokenizer that translates into `tgt_lang`: a multilingual model's view for that
        language (`tgt_lang` required: an error names the choices), else the model's own (which
        takes its own target language or None)."""
        tgt = check_target(self.cfg.data, tgt_lang, "tgt_lang")
        return target_tokenizer(self.cfg.data, self.tok, tgt)

    def source_lengths(self, texts: list[str], tgt_lang: Optional[str] = None) -> list[int]:
        """Subword tokens (with EOS) each text costs a decoding batch, after truncation."""
        cap = self.cfg.decode.max_input_tokens + 1
        return [min(len(ids), cap) for ids in self.tokenizer(tgt_lang).encode_src(texts)]

    @overload
    def translate(
        self,
        texts: str,
        beam: Optional[int] = None,
        nbest: int = 1,
        alignment: bool = False,
        attention_layer: int = -1,
        attention_head: Optional[int] = None,
        batch_tokens: Optional[int] = None,
        sampling: Optional[Sampling] = None,
        constraints: Optional[list[str] | dict] = None,
        tgt_lang: Optional[str] = None,
        pivot: Optional[str] = None,
    ) -> TranslationResult: ...

    @overload
    def translate(
        self,
        texts: Sequence[str],
        beam: Optional[int] = None,
        nbest: int = 1,
        alignment: bool = False,
        attention_layer: int = -1,
        attention_head: Optional[int] = None,
        batch_tokens: Optional[int] = None,
        sampling: Optional[Sampling] = None,
        constraints: Optional[Sequence[Optional[list[str] | dict]]] = None,
        tgt_lang: Optional[str] = None,
        pivot: Optional[str] = None,
    ) -> list[TranslationResult]: ...

    def translate(
        self,
        texts: str | Sequence[str],
        beam: Optional[int] = None,
        nbest: int = 1,
        alignment: bool = False,
        attention_layer: int = -1,
        attention_head: Optional[int] = None,
        batch_tokens: Optional[int] = None,
        sampling: Optional[Sampling] = None,
        constraints: Any = None,
        tgt_lang: Optional[str] = None,
        pivot: Optional[str] = None,
    ) -> TranslationResult | list[TranslationResult]:
        """One result per text, in order (blank texts give empty results); a single string
        gives its one result itself, a string, not a list (a string is not taken as a list of
        characters); every result is the best translation as a `str` with its details. `beam`
        defaults to the checkpoint's decode.beam; with `sampling`, `nbest` samples are drawn
        instead of searching. Alignment rows are the cross-attention of (attention_layer,
        attention_head; None = mean of heads) for each target piece. Each result's warnings
        name the words the vocabulary does not know and say when the input was truncated.

        `constraints`: per text, a list of phrases its translation must contain, or {"include":
        [...], "exclude": [...]} (exclude: phrases it must not contain), or None; with a single
        string, that one text's list or dict. Each result's `unmet` counts the phrases its text
        misses as whole words (with a warning), None without constraints. decode.max_phrases,
        max_phrase_words and max_phrase_tokens bound them (`Translator.load(decode=...)`).

        `tgt_lang`: the language to translate into, required for a multilingual model (one of
        `info.target_languages`); a one-direction model takes its own or None. `pivot`: a
        language of a multilingual model to translate through, as `nmt translate --pivot`
        does: texts -> pivot, then pivot -> tgt_lang (two passes of the model, for a direction
        it was not trained on); not with `alignment` or `constraints`, since the second pass
        reads the pivot text, whose pieces the results' `src_pieces` are."""
        if isinstance(texts, str):
            args = (beam, nbest, alignment, attention_layer, attention_head, batch_tokens, sampling)
            one = None if constraints is None else [constraints]
            return self.translate([texts], *args, one, tgt_lang, pivot)[0]
        texts = _texts(texts)
        passes = self.passes(tgt_lang, pivot)
        decode = self.decode_config(beam, nbest, batch_tokens, sampling)
        check_pivot_options(pivot, alignment, constraints)
        pos, neg = self.encode_constraints(texts, constraints, sampling, tgt_lang=tgt_lang)
        warnings = self._warnings(texts, passes[0])
        with self._attention_view(attention_layer, attention_head, alignment):
            with self.loaded.autocast():
                out = translate_through(
                    self.model,
                    passes,
                    texts,
                    decode,
                    where="request",
                    return_attn=alignment,
                    device=self.device,
                    positive=pos,
                    negative=neg,
                )
        given = [0] * len(texts) if pos is None else list(map(len, pos))
        return [self._result(*args, alignment) for args in zip(out, warnings, given)]

    def passes(
        self, tgt_lang: Optional[str] = None, pivot: Optional[str] = None
    ) -> list[Tokenizer]:
        """One tokenizer per decoding pass into `tgt_lang`: `tokenizer(tgt_lang)`, or through
        `pivot` the pivot's then the target's (`nmt translate --pivot`'s route), every language
        checked first in errors that name `tgt_lang` or `pivot`."""
        tok = self.tokenizer(tgt_lang)
        if pivot is None:
            return [tok]
        return route(self.cfg.data, self.tok, tgt_lang, pivot=pivot, pivot_field="pivot")

    def decode_config(
        self,
        beam: Optional[int] = None,
        nbest: int = 1,
        batch_tokens: Optional[int] = None,
        sampling: Optional[Sampling] = None,
    ) -> DecodeConfig:
        """The decode settings of one call (see `translate`): the checkpoint's decode.* with the
        call's batch_tokens and sampling (checked as the config's), beam (default: decode.beam)
        and nbest, made and checked once (`nmt.decode.decode_settings`)."""
        _check_count("beam", beam)
        _check_count("nbest", nbest, none=False)
        _check_count("batch_tokens", batch_tokens)
        options = {} if sampling is None else {"sample": True, **asdict(sampling)}
        if batch_tokens is not None:
            options["batch_tokens"] = batch_tokens
        options = {k: v for k, v in options.items() if v is not None}
        decode = self.cfg.decode
        if options:
            decode = with_decode_options(replace(self.cfg), options, "the request").decode
        return decode_settings(decode, beam, nbest)

    def encode_constraints(
        self,
        texts: list[str],
        constraints: Any,
        sampling: Optional[Sampling] = None,
        where: str = "constraints[{}]",
        tgt_lang: Optional[str] = None,
    ) -> tuple[Optional[Phrases], Optional[Phrases]]:
        """Per-text constraints (see `translate`) as target ids, all checked before decoding;
        (None, None) without any. Errors name the text as `where` formats its index; length
        limits count what the model reads into `tgt_lang` (a source-mode tag included)."""
        if constraints is None:
            return None, None
        if isinstance(constraints, (str, dict)) or not isinstance(constraints, Sequence):
            raise NmtError(
                f"constraints: expected one entry per text (a list of phrases, an include/"
                f"exclude dict or None), got {type(constraints).__name__}"
            )
        if len(constraints) != len(texts):
            raise NmtError(
                f"constraints: {len(constraints)} entries for {len(texts)} texts; expected one "
                f"per text (None or [] for none)"
            )
        if sampling is not None:
            raise NmtError("constraints need beam search; they cannot be used with sampling")
        specs = [from_value(c, where.format(i)) for i, c in enumerate(constraints)]
        if all(c.empty for c in specs):
            return None, None
        tok = self.tokenizer(tgt_lang)
        return encode_constraints(tok, texts, specs, self.cfg.decode, where.format)

    def _result(
        self, t: Translation, warnings: list[str], given: int, alignment: bool
    ) -> TranslationResult:
        """A result as `nmt translate` writes it: target pieces and alignment rows of the text,
        without a forced language tag (`Translation.lead`)."""
        tokens = t.tokens
        attn = None
        if alignment and t.hyp is not None and t.hyp.attn is not None:
            attn = [[round(float(w), 4) for w in row] for row in t.hyp.attn[t.lead :].tolist()]
        unmet = t.unmet  # None: decoded without constraints
        return TranslationResult(
            t.text,
            [Hypothesis(h, s) for h, s in zip(t.nbest, t.scores)],
            t.src_pieces,
            self.tok.tgt_pieces(tokens + [EOS]) if t.hyp is not None else [],
            attn,
            warnings + ([missed_message(unmet, given)] if unmet else []),
            unmet,
        )

    def _warnings(self, texts: list[str], tok: Tokenizer) -> list[list[str]]:
        """Per text, its truncation (counted as `tok` encodes it) and unknown-word warnings."""
        pairs = zip(self._truncation_warnings(texts, tok), self._unknown_warnings(texts))
        return [t + u for t, u in pairs]

    def _unknown_warnings(self, texts: list[str]) -> list[list[str]]:
        return [
            [describe_unknown(text, words)] if words else []
            for text, words in zip(texts, unknown_words(self.tok, texts))
        ]

    def _truncation_warnings(self, texts: list[str], tok: Tokenizer) -> list[list[str]]:
        cap = self.cfg.decode.max_input_tokens
        return [
            [f"input has {len(ids) - 1} subword tokens; truncated to the first {cap}"]
            if len(ids) - 1 > cap
            else []
            for ids in tok.encode_src(texts)
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


def _texts(texts: object) -> list[str]:
    """`translate`'s texts as a list of strings, or one error naming what came instead."""
    try:
        items = None if isinstance(texts, (bytes, dict)) else list(texts)  # type: ignore[call-overload]
    except TypeError:
        items = None
    if items is None:
        got = type(texts).__name__
        raise NmtError(f"texts: expected a string or a list of strings, got {got}")
    bad = [(i, t) for i, t in enumerate(items) if not isinstance(t, str)]
    if bad:
        i, t = bad[0]
        raise NmtError(f"texts[{i}]: expected a string, got {type(t).__name__}")
    return items


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


def _check_count(name: str, value: Any, none: bool = True) -> None:
    """`value` an integer (or None where `none`), else one error naming the argument."""
    if (value is not None or not none) and type(value) is not int:
        expected = "an integer" + (" or None" if none else "")
        got = f"{type(value).__name__} {value!r:.40}"
        raise NmtError(f"Translator.translate({name}=...): expected {expected}, got {got}")
