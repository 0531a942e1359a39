"""The config schema: one dataclass per section, each field documented where it is declared.

Torch-free on purpose: model modules import `ModelConfig` and `opt` from here, and reading or
checking a config file must not pay for torch. Loading (YAML, `base:`, `--set`, validation)
lives in `nmt.config.load`; `docs/config.md` is generated from these fields by `nmt.config.docs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from nmt.config.metrics import early_stop_metrics, text_metrics

REQUIRED = dataclasses.MISSING
RELATIVE_PATHS = (
    "a relative path resolves against the folder of the config file that sets it "
    "(with --set: against the working directory)"
)


# Every seed fits NumPy's legacy generator (np.random.seed takes 0 to 2**32 - 1), the tightest of
# the generators a seed reaches.
SEED_MAX = 2**32 - 1


def opt(
    default: Any,
    doc: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    path: bool = False,
) -> Any:
    """A documented config field. `lo`/`hi` bound numbers (open bounds exclude the value);
    `path`: an input file or directory, relative to the folder of the config file setting it."""
    if path:
        doc += "; " + RELATIVE_PATHS
    meta = {"doc": doc, "lo": lo, "hi": hi, "lo_open": lo_open, "hi_open": hi_open, "path": path}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    if dataclasses.is_dataclass(default):
        return field(default_factory=type(default), metadata=meta)
    if default is REQUIRED:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class SyntheticConfig:
    # the generator's languages, the keys a multilingual synthetic corpus's directions use (not
    # a field): the source language, the target language and `alt`, the source respelled
    LANGUAGES = ("src", "tgt", "alt")
    train: int = opt(20000, "number of generated training pairs", lo=1)
    valid: int = opt(500, "number of generated validation pairs", lo=1)
    test: int = opt(1000, "number of generated test pairs", lo=1)
    seed: int = opt(
        1, "generator seed (the corpus is a pure function of its settings)", lo=0, hi=SEED_MAX
    )
    lexicon: int = opt(400, "number of content words in the lexicon", lo=20)
    min_words: int = opt(3, "shortest source sentence in words", lo=1)
    max_words: int = opt(80, "longest source sentence in words", lo=3)
    long_fraction: float = opt(
        0.3, "share of sentences drawn from the long (nested-clause) regime", lo=0.0, hi=1.0
    )


@dataclass
class DataConfig:
    source: Literal["synthetic", "hub", "local"] = opt(
        REQUIRED,
        "where the corpus comes from: built-in synthetic generator, a HuggingFace hub "
        "dataset, or local files",
    )
    src_lang: str = opt(
        "src", "source language key (file suffix, JSONL/hub translation key, TSV column)"
    )
    tgt_lang: str = opt("tgt", "target language key")
    directions: list[str] = opt(
        [],
        "several translation directions in one model, e.g. [de-en, en-de, fr-en, en-fr]: each "
        "reads the line-aligned SPLIT.xx and SPLIT.yy files (source: local, format: text; "
        "or source: synthetic, whose languages are src, tgt and alt), "
        "the training pairs of all are mixed in every batch, and a tag `<2yy>` for each target "
        "language says where to translate (vocab.joint must be true); empty = one direction, "
        "src_lang to tgt_lang",
    )
    tag: Literal["source", "target"] = opt(
        "target",
        "with directions: where the target-language tag goes: target = the decoder's first "
        "token, forced when decoding (mBART / M2M-100 style; better or level in every "
        "direction of the Multi30k trial, docs/training.md); source = first token of the "
        "source sentence (Johnson et al. 2017)",
    )
    temperature: float = opt(
        1.0,
        "with directions: each epoch draws a direction's training pairs in proportion to "
        "(its kept pairs)^(1/temperature) (Arivazhagan et al. 2019): 1 = every pair once; "
        "larger values flatten towards equal shares, upsampling small directions",
        lo=0.0,
        lo_open=True,
    )
    hub_name: Optional[str] = opt(None, "hub dataset id, e.g. bentrevett/multi30k (source: hub)")
    hub_config: Optional[str] = opt(None, "hub dataset config name, e.g. fr-en for wmt14")
    path: Optional[str] = opt(None, "directory holding the local files (source: local)", path=True)
    format: Literal["text", "tsv", "jsonl"] = opt(
        "text",
        "local format: text = SPLIT.SRC + SPLIT.TGT line-aligned files; tsv = SPLIT.tsv "
        "with columns named by the language keys (or src<TAB>tgt without header); jsonl = "
        'SPLIT.jsonl with {"translation": {SRC: ..., TGT: ...}}',
    )
    splits: dict[str, str] = opt(
        {"train": "train", "valid": "valid", "test": "test"},
        "split role -> split name on disk / on the hub (roles: train, "
        "valid, test, any others you want to evaluate); a slice such as train[1000:] and "
        "train[:1000] holds part of a split out, for local files as on the hub",
    )
    synthetic: SyntheticConfig = opt(
        SyntheticConfig(), "built-in corpus settings (source: synthetic)"
    )
    max_len: int = opt(
        100,
        "training pairs with more subword tokens than this on either side are "
        "dropped (train split only)",
        lo=1,
    )
    max_ratio: float = opt(
        3.0, "training pairs whose token-length ratio exceeds this are dropped", lo=1.0
    )
    train_max_words: int = opt(
        0,
        "training pairs with more whitespace-separated words than this on either side are "
        "dropped (train split only; valid and test are untouched), e.g. 30 for Bahdanau et "
        "al.'s RNNsearch-30; 0 = off. The prepared corpus and its subword model are shared by "
        "every cap: the cap is applied when training opens it",
        lo=0,
    )
    batch_tokens: int = opt(
        3000, "token budget per batch (max of source and target tokens, padding included)", lo=1
    )
    batch_size: int = opt(
        0, "if > 0, batches hold this many sentences instead of a token budget", lo=0
    )
    shapes: int = opt(
        0,
        "if > 0, every training batch is padded to one of this many (source, target) widths "
        "chosen for the corpus, with a fixed row count per width, so a compiled step "
        "(train.compile: true) is captured once per shape instead of tracing symbolic sizes; "
        "costs padding (16% at 8 on Multi30k, 21-23% on Europarl: docs/performance.md); "
        "0 = token-bucketed batches; at most 64 (a compiled step per shape: more would "
        "compile for longer than they save)",
        lo=0,
        hi=64,
    )
    lowercase: bool = opt(False, "lowercase both sides before subword training and encoding")
    workers: int = opt(
        1,
        "processes encoding the training split in `nmt prepare` / the first "
        "`nmt train` (Dataset.map num_proc)",
        lo=1,
    )
    prepared_dir: Optional[str] = opt(
        None,
        "where prepared (encoded, memory-mapped) corpora are "
        "cached; default $NMT_CACHE/prepared or "
        "~/.cache/nmt/prepared (relative to the "
        "working directory)",
    )

    def language_pairs(self) -> list[tuple[str, str]]:
        """(source, target) language keys of every direction: `directions` split at '-', or
        the one pair src_lang, tgt_lang (entries are checked by nmt.config.load)."""
        if not self.directions:
            return [(self.src_lang, self.tgt_lang)]
        return [tuple(d.split("-", 1)) for d in self.directions]  # type: ignore[misc]

    def target_languages(self) -> list[str]:
        """The languages that get a tag <2xx>: every direction's target, sorted (none without
        directions)."""
        return sorted({t for _, t in self.language_pairs()}) if self.directions else []


@dataclass
class VocabConfig:
    type: Literal["unigram", "bpe", "word"] = opt("unigram", "sentencepiece model type")
    size: int = opt(8000, "vocabulary size (per side when joint is false)", lo=8)
    joint: bool = opt(True, "one vocabulary for source and target")
    character_coverage: float = opt(1.0, "sentencepiece character_coverage", lo=0.5, hi=1.0)
    model: Optional[str] = opt(
        None, "existing sentencepiece model to use instead of training one (joint only)", path=True
    )
    src_model: Optional[str] = opt(
        None, "existing source sentencepiece model (joint: false)", path=True
    )
    tgt_model: Optional[str] = opt(
        None, "existing target sentencepiece model (joint: false)", path=True
    )
    max_sentences: int = opt(
        200000,
        "at most this many training sentences (a seeded sample, half "
        "per side when joint) feed subword training; unigram training "
        "peaks at about 23 bytes per character of the sample",
        lo=1,
    )


@dataclass
class ModelConfig:
    """Keys every architecture has. Each architecture extends this with its own dataclass
    (registered beside its model with `@register(name, config=...)`), and the `model:` section is
    checked against the chosen architecture's keys."""

    arch: str = opt(REQUIRED, "registered architecture (see the tables below)")
    layers: int = opt(1, "layers in encoder and decoder", lo=1)
    dropout: float = opt(0.1, "dropout probability", lo=0.0, hi=1.0, hi_open=True)

    def check(self, cfg: "Config", where: str) -> None:
        """Cross-field checks of this architecture against the whole config (none here)."""


# The choices of eval.metrics and train.early_stop_metric, read from the metric table
# (nmt.config.metrics) when this module is imported: a new row there is a new choice here.
Metric = Literal[text_metrics()]  # type: ignore[valid-type]
EarlyStopMetric = Literal[early_stop_metrics()]  # type: ignore[valid-type]


@dataclass
class TrainConfig:
    run_dir: str = opt(
        "runs/default",
        "run directory: config, subword models, checkpoints, "
        "logs (relative to the working directory)",
    )
    seed: int = opt(1, "seeds Python, NumPy and torch; also the batch shuffling", lo=0, hi=SEED_MAX)
    max_steps: int = opt(0, "stop after this many optimiser steps (0 = no limit)", lo=0)
    max_epochs: int = opt(0, "stop after this many epochs (0 = no limit)", lo=0)
    max_minutes: float = opt(
        0.0,
        "wall-clock budget in minutes of the run's training, summed over its resumes (a "
        "resumed run stops where an uninterrupted one would); stops cleanly with a checkpoint "
        "(0 = no limit)",
        lo=0.0,
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = opt(
        "auto",
        "autocast precision: bf16 on CPU or CUDA, fp16 on CUDA only (with a GradScaler); "
        "auto = bf16 where this machine runs it faster (a CUDA GPU with bf16, a CPU with "
        "AVX512-BF16 or AMX), else fp32",
    )
    device: Literal["auto", "cpu", "cuda"] = opt("auto", "auto = cuda when available")
    threads: int = opt(0, "torch intra-op threads on CPU (0 = torch's default)", lo=0)
    optimizer: Literal["adam", "adamw"] = opt("adam", "optimiser")
    lr: float = opt(0.0005, "peak learning rate", lo=0.0, lo_open=True)
    betas: list[float] = opt([0.9, 0.98], "Adam betas")
    weight_decay: float = opt(0.0, "weight decay", lo=0.0)
    clip_grad: float = opt(1.0, "clip the gradient norm to this (0 = off)", lo=0.0)
    label_smoothing: float = opt(
        0.1, "label smoothing of the cross-entropy loss", lo=0.0, hi=1.0, hi_open=True
    )
    word_dropout: float = opt(
        0.0,
        "replace each training source piece (not EOS) by <unk> with this probability: word "
        "dropout, a regulariser for small corpora (0 = off)",
        lo=0.0,
        hi=1.0,
        hi_open=True,
    )
    accum_steps: int = opt(1, "batches accumulated per optimiser step", lo=1)
    schedule: Literal["constant", "noam", "inverse_sqrt", "plateau", "cosine"] = opt(
        "constant",
        "learning-rate schedule; warmup applies to all but plateau. inverse_sqrt: "
        "linear warm-up to lr, then lr * sqrt(warmup_steps / step) (Vaswani et al. 2017 with lr "
        "as its peak); noam is another name for the same schedule; cosine: linear warm-up to "
        "lr, then half a cosine down to min_lr at max_steps (Loshchilov & Hutter 2017), so a "
        "fixed step budget ends annealed without waiting for a plateau",
    )
    warmup_steps: int = opt(0, "linear warm-up steps", lo=0)
    plateau_factor: float = opt(
        0.5,
        "plateau: multiply lr by this when validation stalls",
        lo=0.0,
        hi=1.0,
        lo_open=True,
        hi_open=True,
    )
    plateau_patience: int = opt(2, "plateau: validations without improvement before decaying", lo=0)
    min_lr: float = opt(1e-6, "plateau: learning-rate floor; cosine: the rate at max_steps", lo=0.0)
    log_every: int = opt(50, "steps between log lines", lo=1)
    valid_every: int = opt(500, "steps between validations (also at the end)", lo=1)
    valid_max_sentences: int = opt(
        0, "decode at most this many validation sentences for BLEU (0 = all)", lo=0
    )
    early_stop_metric: EarlyStopMetric = opt(
        "bleu", "metric for best checkpoint, early stopping and plateau"
    )
    patience: int = opt(0, "stop after this many validations without improvement (0 = never)", lo=0)
    keep_last: int = opt(3, "keep this many recent step checkpoints", lo=1)
    max_bad_steps: int = opt(5, "stop after this many consecutive non-finite losses", lo=1)
    compile: Literal["auto", True, False] = opt(
        "auto",
        "torch.compile the model: auto where it was measured faster than eager for the device "
        "and architecture (nmt/training/compile.py), else eager; true compiles or fails",
    )
    progress: bool = opt(
        True, "show a tqdm progress bar (on a terminal only, never in a pipe or file)"
    )
    init_from: Optional[str] = opt(
        None,
        "fine-tune: start from the weights of this run directory "
        "(its best checkpoint) or checkpoint file, reusing its "
        "subword models (vocab must match it)",
        path=True,
    )
    init_optimizer: bool = opt(
        False,
        "with init_from: also continue its optimiser moments and "
        "schedule state (default: fresh ones)",
    )
    tf32: bool = opt(True, "let CUDA fp32 matmuls and convolutions use TF32 tensor cores")
    dist_timeout_minutes: float = opt(
        30.0,
        "under torchrun: how long a rank waits in a "
        "collective (e.g. while rank 0 validates) before "
        "the job fails",
        lo=0.0,
        lo_open=True,
    )
    average_last: int = opt(
        0,
        "at the end of training, average the last N step checkpoints "
        "into RUN/averaged.pt (0 = off; N <= keep_last)",
        lo=0,
    )


@dataclass
class DecodeConfig:
    beam: int = opt(5, "beam size (1 = greedy)", lo=1)
    alpha: float = opt(0.6, "GNMT length penalty exponent ((5+len)/6)^alpha; 0 = off", lo=0.0)
    max_len_a: float = opt(1.5, "hypotheses stop at a * source_length + b tokens", lo=0.0)
    max_len_b: int = opt(10, "see max_len_a", lo=1)
    nbest: int = opt(1, "hypotheses returned per sentence (<= beam)", lo=1)
    early_stop: bool = opt(
        True,
        "beam search: a sentence stops once its nbest finished hypotheses outrank its best live "
        "beam (exact for alpha 0); false: once it holds `beam` finished hypotheses",
    )
    greedy_floor: bool = opt(
        False,
        "beam search: also decode greedily and keep the greedy hypothesis when it scores higher "
        "(beam never below greedy in model score; costs a greedy pass)",
    )
    batch_tokens: int = opt(4000, "source-token budget per decoding batch", lo=1)
    max_input_tokens: int = opt(
        250, "longer inputs are truncated to this many subword tokens (with a warning)", lo=1
    )
    no_repeat_ngram: int = opt(
        0, "never repeat an n-gram of this many tokens in a hypothesis (0 = off)", lo=0
    )
    language_vocab: int = opt(
        0,
        "write only target pieces seen at least this many times in the target language's "
        "training text (read from the run's data when the model loads; 0 = off): keeps a "
        "multilingual model's zero-shot output in the asked language",
        lo=0,
    )
    max_phrases: int = opt(
        16,
        "lexical constraints: most phrases (included and excluded together) per sentence; more "
        "is refused before decoding (the constrained search's memory grows with their square)",
        lo=1,
        hi=256,
    )
    max_phrase_words: int = opt(
        8, "lexical constraints: most words per phrase (more is refused before decoding)", lo=1
    )
    max_phrase_tokens: int = opt(
        24,
        "lexical constraints: most target subword tokens per phrase (more is refused before "
        "decoding)",
        lo=1,
    )
    sample: bool = opt(
        False, "sample tokens instead of searching (nbest = samples per sentence; beam is ignored)"
    )
    temperature: float = opt(1.0, "sampling: divide the log-probs by this", lo=0.0, lo_open=True)
    top_k: int = opt(0, "sampling: draw from the k most probable tokens only (0 = all)", lo=0)
    top_p: float = opt(
        1.0,
        "sampling: draw from the smallest set of tokens holding this much probability (1 = all)",
        lo=0.0,
        hi=1.0,
        lo_open=True,
    )
    seed: int = opt(
        1,
        "sampling: random seed (the same seed, input and batch_tokens give the same samples)",
        lo=0,
        hi=SEED_MAX,
    )


@dataclass
class EvalConfig:
    metrics: list[Metric] = opt(
        ["bleu", "chrf"],
        "sacreBLEU metrics nmt evaluate reports when --metrics is not given; bleu_lc is BLEU "
        "lowercased (sacreBLEU -lc), the scoring of anchors that lowercase; ter: lower is better",
    )
    buckets: list[int] = opt(
        [10, 20, 30, 40, 50],
        "upper bounds (source words, inclusive) of the length buckets; a final open bucket follows",
    )
    min_bucket: int = opt(
        0,
        "merge adjacent length buckets until each holds at least this many test sentences "
        "(0 = keep the buckets as given); scores.json and the printed table say what was merged",
        lo=0,
    )
    split: str = opt("test", "default split role for nmt evaluate")


@dataclass
class Config:
    data: DataConfig = opt(REQUIRED, "corpus, filtering and batching")
    model: ModelConfig = opt(REQUIRED, "architecture and sizes")
    vocab: VocabConfig = opt(VocabConfig(), "sentencepiece subwords")
    train: TrainConfig = opt(TrainConfig(), "optimisation, precision, limits, checkpoints")
    decode: DecodeConfig = opt(DecodeConfig(), "greedy/beam search settings")
    eval: EvalConfig = opt(EvalConfig(), "evaluation settings")
