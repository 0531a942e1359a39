"""`nmt translate` (lines in, lines out, n-best, prefixes, word alignments) and `nmt score`
(forced decoding of given pairs), over a model loaded by `nmt.inference`."""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from nmt.config import DecodeConfig
from nmt.data.constraints_file import missed_message
from nmt.data.corpus import read_lines
from nmt.data.directions import route
from nmt.data.tokenizer import Tokenizer
from nmt.errors import NmtError
from nmt.files import atomic_write
from nmt.inference import Loaded, decode_settings, load_for_decoding
from nmt.search.constraints import Phrases
from nmt.text_translation import (
    Translation,
    check_pivot_options,
    constraints_from_file,
    score_pairs,
    translate_through,
)
from nmt.unknown_words import warn_unknown

log = logging.getLogger("nmt")


@dataclass
class Session:
    """A loaded model (or ensemble) with its decoding settings, ready to translate lines."""

    loaded: Loaded
    decode: DecodeConfig  # the run's decode.*, with the command line's beam and --nbest
    # one tokenizer per decoding pass (`nmt.data.directions.route`): the target language's
    # view of a multilingual model, after the pivot's with --pivot; the model's own otherwise
    passes: list[Tokenizer] = field(default_factory=list)

    @property
    def tok(self) -> Tokenizer:
        """The tokenizer of the last pass (of the first, the source side is the same)."""
        return self.passes[-1] if self.passes else self.loaded.tok

    @property
    def pivot(self) -> bool:
        return len(self.passes) > 1

    def translate(
        self,
        lines: list[str],
        where: str,
        progress: bool = False,
        prefixes: Optional[list[str]] = None,
        return_attn: bool = False,
        positive: Optional[Phrases] = None,
        negative: Optional[Phrases] = None,
    ) -> list[Translation]:
        m = self.loaded
        with m.autocast():
            return translate_through(
                m.model,
                self.passes or [m.tok],
                lines,
                self.decode,
                device=m.device,
                progress=progress,
                where=where,
                prefixes=prefixes,
                return_attn=return_attn,
                positive=positive,
                negative=negative,
            )

    def output_lines(self, t: Translation, index: int) -> list[str]:
        """The text, or with nbest > 1 the lines `INDEX ||| HYPOTHESIS ||| SCORE`."""
        if self.decode.nbest == 1:
            return [t.text]
        return [f"{index} ||| {h} ||| {s:.4f}" for h, s in zip(t.nbest, t.scores)]


def open_session(
    target: str | list[str],
    beam: Optional[int],
    nbest: int,
    device: Optional[str] = None,
    overrides: Optional[dict] = None,
    int8: bool = False,
    tgt_lang: Optional[str] = None,
    src_lang: Optional[str] = None,
    pivot: Optional[str] = None,
) -> Session:
    """Load checkpoint(s) for `nmt translate`, with command-line decode settings and the
    languages checked (`tgt_lang` is required for a multilingual model)."""
    m = load_for_decoding(target, device, int8=int8, overrides=overrides)
    decode = decode_settings(m.cfg.decode, beam, nbest, "--nbest")
    passes = route(m.cfg.data, m.tok, tgt_lang, src_lang, pivot)
    if pivot is not None:
        log.info(f"translating {src_lang or 'the input'} -> {pivot} -> {tgt_lang}: two passes")
    return Session(m, decode, passes)


def translate(
    session: Session,
    lines: list[str],
    where: str,
    output_path: Optional[str],
    prefix_path: Optional[str] = None,
    alignment: bool = False,
    verbose: bool = False,
    progress: bool = False,
    constraints_path: Optional[str] = None,
) -> int:
    """`nmt translate` of given lines (read by the CLI from `where`): one output line per input
    line, to `output_path` or stdout. Every input file is checked before anything is decoded."""
    pivot = session.passes[0].direction[0] if session.pivot else None  # the first pass's target
    check_pivot_options(pivot, alignment, constraints_path, flags=True)
    warn_unknown(session.tok, lines, where, verbose)
    prefixes = read_lines(prefix_path) if prefix_path else None
    if prefixes is not None and len(prefixes) != len(lines):
        raise NmtError(
            f"--prefix {prefix_path} has {len(prefixes)} lines but the input has "
            f"{len(lines)}; expected one prefix line per input line"
        )
    pos = neg = None
    if constraints_path:
        pos, neg = constraints_from_file(session.tok, lines, constraints_path, session.decode)
    out = session.translate(lines, where, progress, prefixes, alignment, pos, neg)
    if pos is not None:
        warn_missed(out, pos, constraints_path)
    text = "".join(line + "\n" for i, t in enumerate(out) for line in session.output_lines(t, i))
    if alignment:
        _write_alignments(out, lines, session.tok, output_path)
    _emit(text, output_path)
    return 0


def warn_missed(out: list[Translation], positive: Phrases, where: str) -> int:
    """One warning per line whose best translation's text misses constraint phrases as whole
    words (`Translation.unmet`); the number of such lines."""
    missed = 0
    for i, (t, phrases) in enumerate(zip(out, positive)):
        if t.unmet:
            log.warning(f"{where} line {i + 1}: {missed_message(t.unmet, len(phrases))}")
            missed += 1
    return missed


def check_output(output_path: Optional[str]) -> None:
    """Refuse an output file that cannot be written, before any decoding: its folder must exist
    (it is not made: a mistyped path would make folders) and it must not be a directory."""
    if not output_path:
        return
    path = Path(output_path)
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise NmtError(f"cannot write {path}: its folder {folder} {what} (create it first)")
    if path.is_dir():
        raise NmtError(f"cannot write {path}: it is a directory; give a file name (-o FILE)")


def _emit(text: str, output_path: Optional[str]) -> None:
    """The command's output: written atomically to `output_path`, or to stdout."""
    if output_path:
        atomic_write(output_path, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _write_alignments(out: list[Translation], lines: list[str], tok, output_path: str) -> None:
    """FILE.align: Pharaoh `src-tgt` word links per line; FILE.align.json: soft word alignments."""
    from nmt.alignment import (
        hard_alignment,
        pharaoh,
        word_attention,
        word_index_by_decoding,
        word_index_by_words,
    )
    from nmt.data.tokenizer import UNK

    # a multilingual model's language tag (first source token, or first target token in target
    # mode) is no word of either sentence: its row or column is left out
    skip = len(tok.encode_src([""])[0]) - 1
    hard, soft = [], []
    for t, text in zip(out, lines):
        if t.hyp is None:
            hard.append("")
            soft.append({"src": [], "tgt": [], "attention": []})
            continue
        if t.hyp.attn is None:
            raise NmtError("--alignment needs a model with attention (seq2seq has none)")
        src = [tok.src.piece_to_id(p) for p in t.src_pieces[skip:-1]]
        src_words = text.split()
        words = [ids[skip:-1] for ids in tok.encode_src(src_words)]
        src_index = word_index_by_words(src, words, UNK)
        if src_index is None:  # e.g. truncated: index the words decoded
            src_index = word_index_by_decoding(src, tok.src.decode)
            src_words = tok.src.decode(src).split()
        a = word_attention(
            t.hyp.attn.float().numpy()[t.lead :, skip:],
            src_index,
            word_index_by_decoding(t.tokens, lambda ids: tok.decode_tgt([ids])[0]),
        )
        if not t.text.split():  # nothing but unknown pieces came out
            a = a[:0]
        hard.append(pharaoh(hard_alignment(a)))
        soft.append(
            {
                "src": src_words,
                "tgt": t.text.split(),
                "attention": [[round(float(x), 4) for x in row] for row in a],
            }
        )
    atomic_write(output_path + ".align", "".join(line + "\n" for line in hard))
    atomic_write(
        output_path + ".align.json", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in soft)
    )


def score(
    target: str | list[str],
    src_file: str,
    ref_file: str,
    output_path: Optional[str],
    device: Optional[str] = None,
    overrides: Optional[dict] = None,
    tgt_lang: Optional[str] = None,
    src_lang: Optional[str] = None,
) -> int:
    """`nmt score`: one JSON line per (source, reference) pair with its model log-probs. The
    languages are checked as `nmt translate` checks them (`tgt_lang` is required for a
    multilingual model), and the pairs are tagged with its tokenizer for `tgt_lang`."""
    check_output(output_path)
    srcs, refs = read_lines(src_file), read_lines(ref_file)
    if len(srcs) != len(refs):
        raise NmtError(
            f"line counts differ: {src_file} has {len(srcs)} lines, {ref_file} has {len(refs)}"
        )
    m = load_for_decoding(target, device, overrides=overrides)
    (tok,) = route(m.cfg.data, m.tok, tgt_lang, src_lang)  # one pass: scoring has no pivot
    with m.autocast():
        rows = score_pairs(m.model, tok, srcs, refs, m.cfg.decode, m.device, where=src_file)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _emit(text, output_path)
    return 0
