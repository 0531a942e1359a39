"""Lexical constraints as users write them: a file with one line per input line, the API's and the
server's per-text values, their encoding into target ids, and phrases drawn from references.

A file line is either empty (no constraints), TAB-separated phrases that must appear in that
line's translation, or, when it starts with `{`, a JSON object
`{"include": [...], "exclude": [...]}` whose `exclude` phrases must not appear. A phrase is text,
encoded with the target subword model as a sentence of its own: that gives its words their
word-initial pieces (sentencepiece's `▁`), the form a word takes inside a sentence, since
sentencepiece never joins pieces across whitespace. Every check runs before anything is decoded,
and each error names where (FILE line N, or the request's field and index); the limits on how
many phrases a line holds and how long each is (decode.max_phrases, max_phrase_words,
max_phrase_tokens) are checked on the text, before any phrase is encoded.

A phrase is met when its text is in the translation's text as whole words (`holds`): not glued
to a letter or digit on either side, except in scripts written without spaces, where any
occurrence counts. That is what every report counts (`unmet`, `nmt evaluate`'s "N of M phrases
met"), and, with the pieces, what refuses an excluded phrase inside an included one.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any, Optional

from nmt.config import DecodeConfig
from nmt.data.corpus import read_lines
from nmt.data.tokenizer import BOS, EOS, PAD, UNK, Tokenizer, spaced_word_character
from nmt.errors import NmtError

FORMAT = 'TAB-separated phrases, or a JSON object {"include": [...], "exclude": [...]}'
KEYS = ("include", "exclude")


class LimitExceeded(NmtError):
    """Constraints over one of the limits that bound the constrained search (`limit`: the
    setting's name, e.g. decode.max_phrases): one line for the CLI, a 422 naming it for the
    server."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


@dataclass(frozen=True)
class LineConstraints:
    """One text's phrases: `include` must appear in its translation, `exclude` must not."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.include or self.exclude)


# ---------------------------------------------------------------------------- reading


def parse_line(line: str, where: str) -> LineConstraints:
    """One file line: empty (none), TAB-separated phrases, or a JSON object."""
    if line.lstrip().startswith("{"):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise NmtError(
                f"{where}: invalid JSON ({e.msg} at column {e.colno}); a line starting with "
                f'{{ is an object {{"include": [...], "exclude": [...]}}'
            ) from None
        return from_value(value, where)
    if not line.strip() and "\t" not in line:
        return LineConstraints()
    phrases = line.split("\t")
    for n, p in enumerate(phrases, 1):
        if not p.strip():
            raise NmtError(
                f"{where}: phrase {n} of {len(phrases)} is empty (two TABs in a row, or a TAB "
                f"at the start or end); expected phrases separated by single TABs"
            )
    return LineConstraints(tuple(p.strip() for p in phrases))


def read_constraints(path: str, n_lines: int) -> list[LineConstraints]:
    """The constraints of `n_lines` input lines from `path`, one line each, all checked."""
    lines = read_lines(path)
    if len(lines) != n_lines:
        at = min(len(lines), n_lines) + 1
        what = (
            f"the file ends here but the input has {n_lines} lines"
            if len(lines) < n_lines
            else f"the input has only {n_lines} lines"
        )
        raise NmtError(
            f"{path} line {at}: {what}; expected one constraints line per input line "
            f"(an empty line for none)"
        )
    return [parse_line(line, f"{path} line {i}") for i, line in enumerate(lines, 1)]


def from_value(value: Any, where: str) -> LineConstraints:
    """The API's and the server's form of one text's constraints: None, a list of phrases that
    must appear, or {"include": [...], "exclude": [...]}."""
    if value is None:
        return LineConstraints()
    if isinstance(value, dict):
        unknown = [k for k in value if k not in KEYS]
        if unknown:
            raise NmtError(
                f"{where}: unknown key {unknown[0]!r}; expected 'include' and/or 'exclude'"
            )
        return LineConstraints(*(_phrases(value.get(k, []), where, f"'{k}': ") for k in KEYS))
    if isinstance(value, (list, tuple)):
        return LineConstraints(_phrases(value, where))
    got = json.dumps(value, ensure_ascii=False)[:40] if isinstance(value, str) else ""
    raise NmtError(
        f"{where}: expected a list of phrases or an object "
        f'{{"include": [...], "exclude": [...]}}, got {type(value).__name__} {got}'.rstrip()
    )


def _phrases(value: Any, where: str, kind: str = "") -> tuple[str, ...]:
    """Checked phrases of a list; `kind` ("'include': ") names the list in errors."""
    if not isinstance(value, (list, tuple)):
        raise NmtError(f"{where}: {kind}expected a list of phrases, got {type(value).__name__}")
    for n, p in enumerate(value, 1):
        if not isinstance(p, str) or not p.strip():
            got = "empty text" if isinstance(p, str) else type(p).__name__
            raise NmtError(f"{where}: {kind}phrase {n}: expected non-empty text, got {got}")
    return tuple(p.strip() for p in value)


# ---------------------------------------------------------------------------- encoding


def check_limits(c: LineConstraints, cfg: DecodeConfig, where: str) -> None:
    """One line's phrases within decode.max_phrases (included and excluded together) and
    max_phrase_words, checked on the text before anything is encoded: the limits that bound
    the constrained search's memory and time (docs/terminology.md)."""
    n = len(c.include) + len(c.exclude)
    if n > cfg.max_phrases:
        raise LimitExceeded(
            f"{where}: {n} phrases, more than the limit of {cfg.max_phrases} per sentence "
            f"(decode.max_phrases)",
            "decode.max_phrases",
        )
    for p in c.include + c.exclude:
        words = len(p.split())
        if words > cfg.max_phrase_words:
            raise LimitExceeded(
                f"{where}: phrase {_short(p)!r} has {words} words, more than the limit of "
                f"{cfg.max_phrase_words} (decode.max_phrase_words)",
                "decode.max_phrase_words",
            )


def encode_line(
    tok: Tokenizer, c: LineConstraints, limit: int, where: str, cfg: Optional[DecodeConfig] = None
) -> tuple[list[list[int]], list[list[int]]]:
    """One line's phrases as target ids (positive, negative), refused where no search could use
    them: more phrases or words than `cfg`'s limits (`check_limits`; default DecodeConfig()),
    a phrase with a character the target vocabulary cannot spell, one longer than
    decode.max_phrase_tokens, one that must appear but is longer than the line's length limit,
    or a forbidden phrase inside one that must appear (on text, as it is kept out)."""
    cfg = cfg or DecodeConfig()
    check_limits(c, cfg, where)
    out: tuple[list[list[int]], list[list[int]]] = ([], [])
    for kind, phrases, ids in zip(KEYS, (c.include, c.exclude), out):
        # The target model itself, as encode_tgt runs it but for any decoder prefix (a language
        # tag): a phrase is bare pieces, without BOS or EOS.
        texts = [p.lower() for p in phrases] if tok.lowercase else list(phrases)
        for text, p in zip(phrases, tok.tgt.encode(texts) if texts else []):
            p = [i for i in p if i not in (PAD, BOS, EOS)]
            _check_spelled(tok, text, p, where)
            if len(p) > cfg.max_phrase_tokens:
                raise LimitExceeded(
                    f"{where}: phrase {_short(text)!r} is {len(p)} target tokens, more than the "
                    f"limit of {cfg.max_phrase_tokens} (decode.max_phrase_tokens)",
                    "decode.max_phrase_tokens",
                )
            if kind == "include" and len(p) > limit:
                raise NmtError(
                    f"{where}: phrase {text!r} is {len(p)} target tokens, longer than the "
                    f"line's length limit of {limit} (decode.max_len_a * source tokens + "
                    f"decode.max_len_b)"
                )
            ids.append(p)
    _check_exclusions(tok, out, c, where)
    return out


def _check_spelled(tok: Tokenizer, text: str, ids: list[int], where: str) -> None:
    """A phrase every character of which the target vocabulary spells: a <unk> piece could
    never be found in the output's text, nor kept out of it (an excluded phrase of unknown
    characters only has no text, and would match every word boundary)."""
    if not ids:
        raise NmtError(
            f"{where}: phrase {text!r} encodes to no pieces at all; the target vocabulary "
            f"cannot spell it"
        )
    if UNK in ids:
        raise NmtError(
            f"{where}: phrase {_short(text)!r}: the target vocabulary cannot spell "
            f"{_unknown_part(tok, text)!r} (it encodes to <unk>); leave it out or rephrase"
        )


def _unknown_part(tok: Tokenizer, text: str) -> str:
    """The first character of `text` that no target piece holds; where every character is in
    some piece (a word vocabulary), the first word the target model encodes as <unk>."""
    known = set("".join(tok.tgt_piece_texts))
    for ch in text.lower() if tok.lowercase else text:
        if ch.strip() and ch not in known:
            return ch
    for word in (text.lower() if tok.lowercase else text).split():
        if UNK in tok.tgt.encode(word):
            return _short(word)
    return _short(text)


def _check_exclusions(
    tok: Tokenizer, out: tuple[list[list[int]], list[list[int]]], c: LineConstraints, where: str
) -> None:
    """No excluded phrase inside an included one, in either of the two ways the search keeps it
    out: as whole words of the text their pieces spell (excluding "shirt" keeps "t-shirt" out
    too), or as a run of the included phrase's pieces ("▁shirt" inside "▁shirt s": excluded
    pieces are banned even inside a longer word)."""
    if not (out[0] and out[1]):
        return
    included = tok.decode_tgt(out[0])
    for text, excluded, ids in zip(c.exclude, tok.decode_tgt(out[1]), out[1]):
        for inside, included_text, inside_ids in zip(c.include, included, out[0]):
            if holds(included_text, excluded) or _runs_inside(ids, inside_ids):
                raise NmtError(
                    f"{where}: excluded phrase {_short(text)!r} is part of included phrase "
                    f"{_short(inside)!r}; the two can never both hold"
                )


def _runs_inside(ids: list[int], longer: list[int]) -> bool:
    """Whether `ids` is a contiguous run of `longer`."""
    n = len(ids)
    return any(longer[j : j + n] == ids for j in range(len(longer) - n + 1))


def _short(text: str, most: int = 40) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


# ---------------------------------------------------------------------------- meeting


def holds(text: str, phrase: str) -> bool:
    """Whether `phrase` occurs in `text` as whole words: not glued to a letter or digit of a
    spaced script on either side (`spaced_word_character`); in scripts written without spaces
    any occurrence counts. Case as written; an empty phrase never occurs."""
    if not phrase:
        return False
    for m in re.finditer(re.escape(phrase), text):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        glued_before = spaced_word_character(before) and spaced_word_character(phrase[0])
        glued_after = spaced_word_character(after) and spaced_word_character(phrase[-1])
        if not (glued_before or glued_after):
            return True
    return False


def missing(text: str, phrases: list[str]) -> int:
    """How many of `phrases` the translation `text` does not hold (`holds`)."""
    return sum(not holds(text, p) for p in phrases)


# ---------------------------------------------------------------------------- results


def missed_message(missed: int, given: int) -> str:
    """The warning for a translation whose text misses constraint phrases."""
    return (
        f"{missed} of {given} constraint phrase(s) missing from the translation's text as "
        f"whole words: the length limit (decode.max_len_a * source tokens + "
        f"decode.max_len_b) left no room for them, or a forced prefix glued one to a longer word"
    )


def constraints_record(given: list[int], unmet: list[Optional[int]]) -> dict:
    """How the phrases that must appear fared, over the lines that had any: `given[i]` phrases
    on line i, `unmet[i]` of them missed by its translation."""
    lines = [(g, u or 0) for g, u in zip(given, unmet) if g]
    phrases = sum(g for g, _ in lines)
    all_met = sum(1 for _, u in lines if u == 0)
    return {
        "lines": len(lines),
        "phrases": phrases,
        "met": phrases - sum(u for _, u in lines),
        "lines_all_met": all_met,
        "share_met": round(all_met / len(lines), 4) if lines else None,
    }


def appearing(texts: list[str], phrases: list[list[str]]) -> int:
    """How many of line i's `phrases[i]` appear in texts[i] as whole words (`holds`): the
    check, on the text, that no excluded phrase got through."""
    return sum(holds(t, p) for t, ps in zip(texts, phrases) for p in ps)


def describe_record(r: dict) -> str:
    """`constraints_record` as `nmt evaluate` prints it."""
    if not r["lines"]:
        line = "constraints: no line had a phrase that must appear"
    else:
        line = (
            f"constraints: {r['met']} of {r['phrases']} phrases met; {r['lines_all_met']} of "
            f"{r['lines']} constrained lines have all of theirs ({100 * r['share_met']:.1f}%)"
        )
    if r.get("excluded"):
        line += f"; {r['excluded_in_output']} of {r['excluded']} excluded phrases in the output"
    return line


# ---------------------------------------------------------------------------- drawing


def draw_constraints(
    refs: list[str],
    seed: int,
    phrases: tuple[int, int] = (1, 3),
    words: tuple[int, int] = (1, 3),
) -> list[list[str]]:
    """Per reference, between phrases[0] and phrases[1] phrases of words[0] to words[1]
    consecutive words, not overlapping, in sentence order; a line too short for them gets
    fewer. Line i's draw depends only on the seed, i and the line, so the same file and seed
    always give the same phrases."""
    (lo_p, hi_p), (lo_w, hi_w) = phrases, words
    if not 0 <= lo_p <= hi_p or not 1 <= lo_w <= hi_w:
        raise NmtError(
            f"expected 0 <= --min-phrases <= --max-phrases and 1 <= --min-words <= "
            f"--max-words, got phrases {lo_p}..{hi_p}, words {lo_w}..{hi_w}"
        )
    out = []
    for i, ref in enumerate(refs):
        rng = random.Random(f"nmt-constraints:{seed}:{i}")  # str seeds hash the same everywhere
        tokens, spans = ref.split(), []
        for _ in range(rng.randint(lo_p, hi_p)):
            for n in range(rng.randint(lo_w, hi_w), lo_w - 1, -1):  # shorter where none fits
                free = [
                    s
                    for s in range(len(tokens) - n + 1)
                    if all(s + n <= a or s >= b for a, b in spans)
                ]
                if free:
                    s = rng.choice(free)
                    spans.append((s, s + n))
                    break
        out.append([" ".join(tokens[a:b]) for a, b in sorted(spans)])
    return out


def draw_exclusions(drawn: list[list[str]], texts: list[str], seed: int) -> list[Optional[str]]:
    """Per line, one word of texts[i] (3 letters or more, seeded as `draw_constraints`) to keep
    out of the translation, None where none qualifies: never text inside one of the line's
    drawn phrases, which could then never hold both."""
    out: list[Optional[str]] = []
    for i, (phrases, text) in enumerate(zip(drawn, texts)):
        rng = random.Random(f"nmt-exclusions:{seed}:{i}")
        words = [w for w in re.findall(r"[^\W\d_]{3,}", text) if not any(w in p for p in phrases)]
        out.append(rng.choice(words) if words else None)
    return out


def constraints_line(include: list[str], exclude: Optional[str] = None) -> str:
    """One line of a constraints file: TAB-separated phrases, or the JSON form with `exclude`."""
    if exclude is None:
        return "\t".join(include)
    return json.dumps({"include": include, "exclude": [exclude]}, ensure_ascii=False)
