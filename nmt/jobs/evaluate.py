"""`nmt evaluate`: a checkpoint (or ensemble) decodes a split or files; scores with bootstrap
intervals, BLEU by length and attention plots go into a report directory."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from nmt.config import Config, DataConfig
from nmt.data.constraints_file import appearing, constraints_record
from nmt.data.corpus import load_split, read_lines
from nmt.data.directions import (
    check_direction,
    check_pivot,
    pair_data,
    route,
    source_languages,
    target_languages,
)
from nmt.data.language_id import Identifier, default_identifier, off_target
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.inference import Loaded, decode_settings, load_for_decoding
from nmt.jobs.evaluate_loss import reference_losses, write_loss_report
from nmt.jobs.translate import warn_missed
from nmt.models import NMTModel
from nmt.run_dir import RunDir
from nmt.scoring.bootstrap import DEFAULT_SAMPLES
from nmt.scoring.metrics import (
    MeanScore,
    bucket_bounds,
    data_fingerprint,
    make_metric,
    merge_small_buckets,
    score_report,
)
from nmt.search.constraints import Phrases
from nmt.text_translation import (
    Translation,
    check_pivot_options,
    constraints_from_file,
    translate_through,
)
from nmt.unknown_words import warn_unknown

log = logging.getLogger("nmt")


@dataclass
class EvalOptions:
    """What `nmt evaluate` decodes and how it scores and reports (the command's options)."""

    split: Optional[str] = None  # a split role of the config (default: eval.split)
    src_file: Optional[str] = None  # or these two files
    ref_file: Optional[str] = None
    beam: Optional[int] = None
    report_dir: Optional[str] = None  # default RUN/eval_SPLIT_beamK
    buckets: Optional[list[int]] = None
    min_bucket: Optional[int] = None  # None: the config's eval.min_bucket
    attention_plots: int = 0
    attn_layer: int = -1
    attn_head: Optional[int] = None
    device: Optional[str] = None
    progress: bool = True
    overrides: Optional[dict] = None  # decode.* settings from the command line
    int8: bool = False
    metrics: Optional[tuple[str, ...]] = None  # None: the config's eval.metrics
    bootstrap: int = DEFAULT_SAMPLES  # resamples for 95% intervals (0: none)
    comet_model: Optional[str] = None  # a local COMET checkpoint (needs unbabel-comet)
    verbose: bool = False
    data: Optional[DataConfig] = None  # score on this data's split instead of the run's own
    constraints_file: Optional[str] = None  # lexical constraints, one line per source line
    direction: Optional[str] = None  # SRC-TGT of a multilingual model (trained or zero-shot)
    pivot: Optional[str] = None  # translate SRC -> pivot -> TGT with the same model
    identifier: Optional[Identifier] = None  # the off-target rate's (default: langid)
    loss_from: Optional[str] = None  # another beam's report of this checkpoint: reuse its loss


@dataclass(frozen=True)
class Way:
    """The direction a multilingual model is scored in: trained or zero-shot, maybe through a
    pivot (two passes of the same model); one tokenizer per pass."""

    src: str
    tgt: str
    pivot: Optional[str]
    trained: bool
    passes: list[Tokenizer]

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"

    def describe(self) -> str:
        """How the report names it: ', a-c (zero-shot) through b' and the like."""
        shot = "" if self.trained else " (zero-shot)"
        return f", {self.name}{shot}" + (f" through {self.pivot}" if self.pivot else "")

    def record(self) -> dict:
        """scores.json's `direction`."""
        return {"name": self.name, "trained": self.trained, "pivot": self.pivot}


def _way(run: DataConfig, tok: Tokenizer, o: EvalOptions) -> Optional[Way]:
    """The direction to score in (checked before anything is read); None for a one-direction
    model, whose --direction may only name its own. `run` is the run's own data section: the
    model decides what it translates, not the data (`o.data`) it is scored on."""
    if not run.directions:
        if o.direction:
            check_direction(run, o.direction)
        if o.pivot:
            check_pivot(run, o.pivot, None, run.tgt_lang)
        return None
    if not o.direction:
        raise NmtError(
            f"this model translates several directions ({', '.join(run.directions)}): give "
            f"--direction SRC-TGT"
        )
    src, tgt = check_direction(run, o.direction)
    passes = route(run, tok, tgt, src, o.pivot)
    check_pivot_options(o.pivot, None, o.constraints_file, flags=True)
    return Way(src, tgt, o.pivot, o.direction in run.directions, passes)


def language_identifier(cfg: Config, o: EvalOptions) -> tuple[Optional[Identifier], str]:
    """The off-target rate's identifier and its name: the one given, else langid over the
    languages of `cfg` (the run's: the model's languages), or None and why not."""
    if o.identifier is not None:
        f = o.identifier
        return f, getattr(f, "name", getattr(f, "__name__", type(f).__name__))
    data = cfg.data
    return default_identifier(sorted(set(source_languages(data)) | set(target_languages(data))))


def evaluate(target: str | list[str], o: Optional[EvalOptions] = None) -> tuple[dict, Path]:
    """Decode a split (or --src/--ref files) with a checkpoint (several: an ensemble); write
    hyps, scores with bootstrap intervals, and plots into the report directory. A multilingual
    model is scored in one direction, `o.direction` (`nmt.jobs.evaluate_directions` scores
    every trained one)."""
    o = o or EvalOptions()
    return evaluate_loaded(
        load_for_decoding(target, o.device, int8=o.int8, overrides=o.overrides), o
    )


def evaluate_loaded(
    m: Loaded, o: EvalOptions, identified: Optional[tuple[Optional[Identifier], str]] = None
) -> tuple[dict, Path]:
    """`evaluate` with the model loaded; `identified`: the off-target rate's language
    identifier and its name (default: `language_identifier`), loaded once for many directions."""
    from nmt.scoring.report import write_report  # matplotlib: only when a report is written

    model, meta = m.model, m.meta
    way = _way(m.cfg.data, m.tok, o)
    # the data scored on (o.data: a study's), decoded with this call's beam: one setting each
    decode = decode_settings(m.cfg.decode, o.beam, 1)
    cfg = dataclasses.replace(m.cfg, data=o.data or m.cfg.data, decode=decode)
    srcs, refs, name, test_set = _eval_set(cfg, o.split, o.src_file, o.ref_file, way)
    passes = way.passes if way else [m.tok]
    warn_unknown(passes[0], srcs, o.src_file or f"split {name}", o.verbose)
    o = dataclasses.replace(o, metrics=o.metrics or tuple(cfg.eval.metrics))
    bounds, merge = _buckets(cfg, o, srcs)
    pos = neg = None
    if o.constraints_file:  # read and checked in full before decoding
        pos, neg = constraints_from_file(passes[-1], srcs, o.constraints_file, cfg.decode)
    model.set_attention_view(o.attn_layer, o.attn_head)
    k = decode.beam
    what = (test_set["split"] or f"{o.src_file} / {o.ref_file}") + (way.describe() if way else "")
    at = f"{meta['path']} (step {meta['step']})"
    log.info(f"evaluating {at} on {what}: {len(srcs)} sentences, beam {k}")
    with m.autocast():
        out = translate_through(
            model,
            passes,
            srcs,
            decode,
            device=m.device,
            progress=o.progress,
            return_attn=o.attention_plots > 0,
            positive=pos,
            negative=neg,
        )
    hyps = [t.text for t in out]
    scores = _scores(srcs, hyps, refs, bounds, o, m.device)
    scores.update(_provenance(cfg, meta, k, o.int8, test_set), **merge)
    nll = reference_losses(m, passes, srcs, refs, bounds, decode, o.bootstrap, scores, o.loss_from)
    if way is not None:
        scores["direction"] = way.record()
        identify, what_id = identified or language_identifier(m.cfg, o)
        scores["off_target"] = off_target(hyps, way.tgt, identify, what_id)
    if pos is not None:
        scores["constraints"] = _constraints_record(out, pos, neg, o.constraints_file, passes[-1])
    report, model_name = report_place(cfg, meta, name, k, o, pos is not None, way)
    title = f"BLEU by source length: {what}, {len(srcs)} sentences"
    write_report(report, scores, hyps, srcs=srcs, refs=refs, name=model_name, title=title)
    write_loss_report(report, nll, scores, model_name)
    if o.attention_plots:
        view = _attention_view(cfg, model, o.attn_layer, o.attn_head)
        read = [s if t.pivot is None else t.pivot for t, s in zip(out, srcs)]  # the last pass's
        plots = (out, read, passes[-1], report, o.attention_plots, f"{model_name}, {view}")
        _attention_plots(*plots)
    return scores, report


def _constraints_record(
    out: list[Translation], pos: Phrases, neg: Optional[Phrases], path: str, tok: Tokenizer
) -> dict:
    """scores.json's `constraints`: the file, how many phrases were given and met, the share of
    the constrained lines whose translation has all of its phrases, and how many excluded
    phrases the output's text holds as words (`tok` spells them); one warning per line that
    misses some. A phrase is met where the text holds it as whole words (`Translation.unmet`)."""
    warn_missed(out, pos, path)
    unmet = [t.unmet for t in out]
    kept_out = [tok.decode_tgt(ps) if ps else [] for ps in neg or []]
    return {
        "file": str(Path(path).resolve()),
        **constraints_record(list(map(len, pos)), unmet),
        "excluded": sum(map(len, kept_out)),
        "excluded_in_output": appearing([t.text for t in out], kept_out),
    }


def _provenance(cfg: Config, meta: dict, k: int, int8: bool, test_set: dict) -> dict:
    """What the scores are of: every setting that shaped the output (alpha, length limits...),
    so a score says how it was decoded, the checkpoint and the test set."""
    return {
        "beam": k,
        "decode": {**dataclasses.asdict(cfg.decode), "int8": int8},
        "checkpoint": meta["path"],
        "step": meta["step"],
        "split": test_set["split"],
        "test_set": test_set,
    }


def _buckets(cfg: Config, o: EvalOptions, srcs: list[str]) -> tuple[list[int], dict]:
    """The length buckets (checked before decoding the whole split), merged as eval.min_bucket
    asks, since thin buckets of long sentences give noise, not a point; and what was merged."""
    asked = list(o.buckets or cfg.eval.buckets)
    _check_eval_options(asked, o.metrics, o.comet_model)
    least = cfg.eval.min_bucket if o.min_bucket is None else o.min_bucket
    if not least:
        return asked, {}
    bounds = merge_small_buckets(srcs, asked, least)
    merged = {"bucket_merge": {"asked": asked, "min_sentences": least}}
    return bounds, merged if bounds != asked else {}


def _scores(
    srcs: list[str],
    hyps: list[str],
    refs: list[str],
    bounds: list[int],
    o: EvalOptions,
    device: torch.device,
) -> dict:
    """The scores report, with COMET from a local checkpoint when one is given."""
    extra, comet_model = None, o.comet_model
    if comet_model:
        from nmt.scoring.comet import comet_scores

        gpus = int(str(device).startswith("cuda"))
        extra = {
            "comet": (
                MeanScore(f"comet:{comet_model}"),
                comet_scores(comet_model, srcs, hyps, refs, gpus=gpus),
            )
        }
    return score_report(srcs, hyps, refs, bounds, o.metrics, n_samples=o.bootstrap, extra=extra)


def report_place(
    cfg: Config,
    meta: dict,
    name: str,
    k: int,
    o: EvalOptions,
    constrained: bool,
    way: Optional[Way] = None,
) -> tuple[Path, str]:
    """The report directory (given, or RUN/eval_NAME_beamK..., with `_STEM` for a checkpoint
    of a run other than its best.pt (`_averaged`, `_step_500`), `_constrained_FILE` for a constraints file
    (`constrained_report`), `_vocabN` for decode.language_vocab N, and a multilingual model's
    direction last: `_de-fr`, `_de-fr_via_en`) and the model's name."""
    run = RunDir.of_checkpoint(meta["path"])
    members = f"_ensemble{len(meta['ensemble'])}" if "ensemble" in meta else ""
    checkpoint = Path(meta["path"])  # in a run, best.pt's report is never another's
    if not members and run.config.is_file() and checkpoint.name != RunDir.BEST:
        members = f"_{checkpoint.stem}"
    before = f"{members}{'_int8' if o.int8 else ''}"
    vocab = cfg.decode.language_vocab  # a masked vocabulary changes the output: its own report
    after = f"_vocab{vocab}" if vocab else ""
    if way is not None:
        after += f"_{way.name}" + (f"_via_{way.pivot}" if way.pivot else "")
    if o.report_dir:
        report = Path(o.report_dir)
    elif constrained:
        report = constrained_report(
            o.constraints_file, lambda held: run.report(name, k, f"{before}{held}{after}")
        )
    else:
        report = run.report(name, k, before + after)
    ensemble = f", ensemble of {len(meta['ensemble'])}" if "ensemble" in meta else ""
    extra = f"{', int8' if o.int8 else ''}{', constrained' if constrained else ''}"
    extra += f", language vocabulary >= {vocab}" if vocab else ""
    extra += way.describe() if way else ""
    return report, (
        f"{run.path.name} ({cfg.model.arch}{ensemble}, step {meta['step']}, beam {k}{extra})"
    )


def constrained_report(path: Optional[str], place: Callable[[str], Path]) -> Path:
    """The report of a constraints file, `place("_constrained_STEM")` for the file STEM.tsv, so
    that two files' reports never share a directory: the report whose scores.json records this
    file (its absolute path), else that name where no other file's report holds it, else
    `place("_constrained_STEM_HASH")` (a hash of this file's absolute path)."""
    if path is None:
        return place("_constrained")
    full = str(Path(path).resolve())
    stem = "".join(c if c.isalnum() or c in "-." else "_" for c in Path(path).stem)
    plain = place(f"_constrained_{stem}")
    hashed = place(f"_constrained_{stem}_{hashlib.sha1(full.encode()).hexdigest()[:8]}")
    owners = {p: _constraints_file_of(p) for p in (plain, hashed)}
    for p in (plain, hashed):
        if owners[p] == full:
            return p
    return plain if owners[plain] is None else hashed


def _constraints_file_of(report: Path) -> Optional[str]:
    """The constraints file a report's scores.json records, None for none (or no report)."""
    try:
        scores = json.loads((report / "scores.json").read_text("utf-8"))
        return str(scores["constraints"]["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _eval_set(
    cfg: Config,
    split: Optional[str],
    src_file: Optional[str],
    ref_file: Optional[str],
    way: Optional[Way] = None,
) -> tuple[list[str], list[str], str, dict]:
    """Sources, references, the report's name for them and the scores' `test_set` record."""
    if src_file or ref_file:
        if not (src_file and ref_file):
            raise NmtError("--src and --ref must be given together")
        srcs, refs = read_lines(src_file), read_lines(ref_file)
        if len(srcs) != len(refs):
            raise NmtError(
                f"line counts differ: {src_file} has {len(srcs)} lines, {ref_file} has {len(refs)}"
            )
        name = f"file_{Path(src_file).stem}"  # never the directory of a split's report
        test_set = {
            "split": None,
            "src_file": str(Path(src_file).resolve()),
            "ref_file": str(Path(ref_file).resolve()),
        }
    else:
        name = split or cfg.eval.split
        data = cfg.data if way is None else pair_data(cfg.data, way.src, way.tgt)
        srcs, refs = load_split(data, name)  # a direction reads SPLIT.src and SPLIT.tgt
        test_set = {"split": name, "data": _data_name(cfg)}
    if way is not None:
        test_set["direction"] = way.name
    if not srcs:
        raise NmtError(f"nothing to evaluate: {test_set['split'] or src_file} is empty")
    test_set.update(
        {
            "n": len(srcs),
            "src_words": sum(len(s.split()) for s in srcs),
            "ref_words": sum(len(r.split()) for r in refs),
            "sha256": data_fingerprint(srcs, refs),
        }
    )
    return srcs, refs, name, test_set


def _check_eval_options(
    bounds: list[int], metrics: tuple[str, ...], comet_model: Optional[str]
) -> None:
    bucket_bounds(bounds)  # a bad --buckets fails now, not after decoding the whole split
    for m in metrics:
        make_metric(m)  # so does a bad --metrics
    if comet_model and not Path(comet_model).is_file():
        raise NmtError(f"--comet-model {comet_model}: no such file (a local COMET checkpoint)")


def _data_name(cfg: Config) -> str:
    """Where a split comes from, for the report: the hub dataset or the local directory."""
    d = cfg.data
    if d.source == "hub":
        return f"hub:{d.hub_name}" + (f"/{d.hub_config}" if d.hub_config else "")
    if d.source == "local":
        return f"local:{Path(d.path).resolve() if d.path else '?'}"
    return f"synthetic:seed={d.synthetic.seed}"


def _attention_view(cfg: Config, model: NMTModel, layer: int, head: Optional[int]) -> str:
    layers, heads = model.attention_shape()
    if layers == 1 and heads == 1:
        return "attention"
    shown = layer % layers + 1
    return f"cross-attention layer {shown}/{layers}, " + (
        "mean of heads" if head is None else f"head {head + 1}/{heads}"
    )


def _attention_plots(
    out: list[Translation], srcs: list[str], tok, report: Path, n: int, what: str
) -> None:
    """Heatmaps of the first n sentences, labelled with what the reader typed: each source
    piece's own input text (an unknown word keeps its spelling), target pieces without the
    word-boundary marker."""
    from nmt.pieces import display, surfaces
    from nmt.scoring.report import plot_attention

    skip = len(tok.encode_src([""])[0]) - 1  # a source-mode language tag
    made = 0
    for i, t in enumerate(out):
        if made >= n:
            break
        if t.hyp is None or t.hyp.attn is None:
            continue
        text = srcs[i].lower() if tok.lowercase else srcs[i]
        pieces = t.src_pieces[:-1]  # the model's pieces (maybe truncated), then </s>
        surf = ([""] * skip + surfaces(tok.src, text))[: len(pieces)]  # a tag shows as itself
        surf = surf if len(surf) == len(pieces) else [""] * len(pieces)
        src = [s or display(p) or "\u00b7" for s, p in zip(surf, pieces)] + ["</s>"]
        tgt = [display(p) or "\u00b7" for p in tok.tgt_pieces(t.hyp.tokens)] + ["</s>"]
        plot_attention(
            src,
            tgt,
            t.hyp.attn.float().cpu().numpy(),
            report / f"attention_{i + 1}.png",
            title=f"{what}\nsentence {i + 1}: {len(srcs[i].split())} words",
        )
        made += 1
    if made == 0:
        log.warning("--attention-plots: this model reports no attention (seq2seq has none)")
