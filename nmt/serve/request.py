"""The body of `POST /v1/translate`: its schema, and the checks that turn every mistake in it
into an `ApiError` naming the field (400 not UTF-8 JSON, 413 too many sentences, 422 wrong
types, unknown fields, values out of range, a target or pivot language the model lacks). The
body is parsed here rather than by FastAPI so each of those messages is ours. Its decode
settings are made and checked once here, as `Translator.translate` makes them, and its
constraints against every limit (per request here, per sentence and phrase by the model's
decode.max_phrases, max_phrase_words, max_phrase_tokens) before any of them is encoded."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nmt.api import Sampling, Translator
from nmt.config import DecodeConfig
from nmt.config.fields import INT_MAX, INT_MIN
from nmt.config.schema import SEED_MAX
from nmt.data.constraints_file import LimitExceeded
from nmt.errors import NmtError
from nmt.serve import REQUEST_PHRASES
from nmt.serve.batcher import Options
from nmt.text_translation import check_pivot_options


@dataclass(frozen=True)
class Limits:
    max_batch_tokens: int = 2000  # padded source tokens per merged batch; 0 = no merging
    max_wait_ms: float = 10.0  # how long the oldest request waits for company
    queue: int = 256  # requests waiting before 503
    timeout_s: float = 60.0  # per request, queueing included, before 504
    max_sentences: int = 64  # per request (413 beyond)
    max_bytes: int = 256 * 1024  # request body (413 beyond)
    max_beam: int = 16
    max_request_phrases: int = REQUEST_PHRASES  # in all of a request's texts (422 beyond)


# ---------------------------------------------------------------------------------- schemas


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    text: list[str] = Field(
        min_length=1, description="sentences to translate (blank ones give empty translations)"
    )
    beam: Optional[int] = Field(
        None,
        ge=1,
        description="beam size, 1 = greedy (default: the "
        "checkpoint's decode.beam; at most the server's max_beam)",
    )
    nbest: int = Field(1, ge=1, le=INT_MAX, description="hypotheses per sentence (<= beam)")
    alignment: bool = Field(
        False,
        description="return the attention matrix of the best "
        "hypothesis (target pieces x source pieces)",
    )
    attention_layer: int = Field(
        -1,
        ge=INT_MIN,
        le=INT_MAX,
        description="decoder layer of the reported attention (transformer; -1 = last)",
    )
    attention_head: Optional[int] = Field(
        None,
        ge=INT_MIN,
        le=INT_MAX,
        description="head of the reported attention (transformer; null = mean over heads)",
    )
    sample: bool = Field(
        False, description="draw tokens instead of searching (nbest = samples per sentence)"
    )
    temperature: Optional[float] = Field(
        None, gt=0, description="sampling: divide log-probs by T (default: decode.temperature)"
    )
    top_k: Optional[int] = Field(
        None, ge=0, le=INT_MAX, description="sampling: draw from the K likeliest tokens (0 = all)"
    )
    top_p: Optional[float] = Field(
        None, gt=0, le=1, description="sampling: draw from the nucleus of mass P"
    )
    seed: Optional[int] = Field(
        None, ge=0, le=SEED_MAX, description="sampling seed (default: decode.seed)"
    )
    tgt_lang: Optional[str] = Field(
        None,
        description="the language to translate into: required for a multilingual model (one "
        "of GET /v1/model's target_languages); a one-direction model takes its own or null",
    )
    pivot: Optional[str] = Field(
        None,
        description="a multilingual model: translate through this language (one it reads and "
        "writes), text -> pivot -> tgt_lang in two passes, for a direction it was not trained "
        "on; not with alignment or constraints",
    )
    # Checked by `Translator.encode_constraints`, so each error names the text's index.
    constraints: Optional[list[Any]] = Field(
        None,
        description="lexical constraints, one entry per text: a list of phrases its "
        'translation must contain, or {"include": [...], "exclude": [...]}, or null/[] for '
        "none (beam search only)",
    )


# ---------------------------------------------------------------------------------- errors


class ApiError(Exception):
    """An answer other than 200: its status, message and headers, and the name of the limit it
    is over, if any (the JSON's `limit`)."""

    def __init__(
        self,
        status: int,
        message: str,
        headers: Optional[dict] = None,
        limit: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.headers, self.limit = status, message, headers, limit


def _field_error(err: dict) -> str:
    """One pydantic error as 'FIELD: what was expected'."""
    where = _shown(".".join(str(p) for p in err["loc"]) or "request body")  # a name may be huge
    if err["type"] == "extra_forbidden":
        fields = list(TranslateRequest.model_fields)
        near = difflib.get_close_matches(str(err["loc"][-1]), fields, n=1)
        if near:
            return f"{where}: unknown field (did you mean '{near[0]}'?)"
        return f"{where}: unknown field (expected one of {', '.join(fields)})"
    if err["type"] == "missing":
        return f"{where}: required field missing"
    if err["type"] == "too_short":
        return f"{where}: expected a non-empty list of sentences, got []"
    got = _shown(json.dumps(err.get("input"), ensure_ascii=False))
    return f"{where}: {err['msg'][0].lower()}{err['msg'][1:]}, got {got}"


def request_error(errors: list[dict]) -> str:
    """The first error; an unknown field before everything else, since a misspelled field (txt)
    also makes the one it was meant as (text) look missing."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if not unknown:
        return _field_error(errors[0])
    missing = [e for e in errors if e["type"] == "missing"]
    return "; ".join(_field_error(e) for e in unknown[:1] + missing[:1])


def _no_constant(name: str) -> None:
    """NaN and Infinity are Python's JSON extensions, not JSON: a request never holds them."""
    raise ApiError(400, f"request body: invalid JSON ({name} is not a JSON number)")


def _shown(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def parse_request(
    raw: bytes, translator: Translator, limits: Limits
) -> tuple[list[str], Options, Optional[list]]:
    """Bytes -> (texts, options, constraints), or the ApiError that names what is wrong."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(
            400,
            f"request body: not valid UTF-8 (byte 0x{raw[e.start]:02x} at "
            f"offset {e.start}); send JSON encoded as UTF-8",
        ) from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ApiError(
            400,
            f"request body: invalid JSON ({e.msg} at line {e.lineno} column "
            f'{e.colno}); expected an object like {{"text": ["..."]}}',
        ) from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise ApiError(400, f"request body: invalid JSON ({_shown(str(e), 120)})") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ApiError(
            400, 'request body: JSON nested too deeply; expected an object like {"text": ["..."]}'
        ) from None
    if not isinstance(data, dict):
        raise ApiError(
            422,
            f'request body: expected a JSON object like {{"text": ["..."]}}, '
            f"got {type(data).__name__}",
        )
    if isinstance(data.get("text"), list) and len(data["text"]) > limits.max_sentences:
        raise ApiError(
            413,
            f"text: {len(data['text'])} sentences, the limit is {limits.max_sentences} per request",
        )
    try:
        req = TranslateRequest.model_validate(data)
    except ValidationError as e:
        raise ApiError(422, request_error(e.errors())) from None
    for i, t in enumerate(req.text):
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, f"text.{i}: not valid Unicode (a lone surrogate escape)") from None
    decode = _decode(req, translator, limits)
    _check_view(req, translator)
    _check_languages(req, translator)
    options = Options(
        decode.beam,
        decode.nbest,
        req.alignment,
        req.attention_layer,
        req.attention_head,
        _sampling(req),
        req.tgt_lang,
        req.pivot,
    )
    return req.text, options, _constraints(req, translator, limits)


def _check_languages(req: TranslateRequest, translator: Translator) -> None:
    """`tgt_lang` names a language this model translates into (required if it has several);
    `pivot`, one it reads and writes, without what a pivot cannot give."""
    try:
        translator.passes(req.tgt_lang, req.pivot)
        check_pivot_options(req.pivot, req.alignment, req.constraints)
    except NmtError as e:
        raise ApiError(422, str(e)) from None


def _check_view(req: TranslateRequest, translator: Translator) -> None:
    """The attention layer and head exist in this model."""
    layers, heads = translator.info.attention_layers, translator.info.attention_heads
    if not -layers <= req.attention_layer < layers:
        raise ApiError(
            422,
            f"attention_layer: expected -{layers}..{layers - 1} (the model has "
            f"{layers} decoder layer(s)), got {req.attention_layer}",
        )
    if req.attention_head is not None and not 0 <= req.attention_head < heads:
        raise ApiError(
            422,
            f"attention_head: expected 0..{heads - 1} or null for the mean (the "
            f"model has {heads} head(s)), got {req.attention_head}",
        )


def _constraints(req: TranslateRequest, translator: Translator, limits: Limits) -> Optional[list]:
    """The request's constraints, checked in full now, so a bad one is a 422 naming
    `constraints.INDEX` (and the limit it is over), not a failed batch (the batcher's translate
    encodes them again). The request's count of phrases is checked first, on the raw values."""
    if req.constraints is None:
        return None
    n = sum(_count_phrases(c) for c in req.constraints)
    if n > limits.max_request_phrases:
        raise ApiError(
            422,
            f"constraints: {n} phrases in the request, more than the limit of "
            f"{limits.max_request_phrases} (the server's --max-request-phrases)",
            limit="max_request_phrases",
        )
    try:
        translator.encode_constraints(
            req.text, req.constraints, _sampling(req), "constraints.{}", req.tgt_lang
        )
    except LimitExceeded as e:
        raise ApiError(422, str(e), limit=e.limit) from None
    except NmtError as e:
        raise ApiError(422, str(e)) from None
    return req.constraints


def _count_phrases(value: Any) -> int:
    """The phrases of one text's constraints as sent (a list, or an include/exclude object;
    anything else counts 0 here and is refused by the full check)."""
    if isinstance(value, list):
        return len(value)
    if isinstance(value, dict):
        return sum(len(v) for v in value.values() if isinstance(v, list))
    return 0


def _decode(req: TranslateRequest, translator: Translator, limits: Limits) -> DecodeConfig:
    """The request's decode settings, made and checked as `Translator.translate` makes them
    (beam default: the checkpoint's decode.beam; the n-best rule), within the server's beam."""
    try:
        decode = translator.decode_config(req.beam, req.nbest, sampling=_sampling(req))
    except NmtError as e:
        raise ApiError(422, str(e)) from None
    if decode.beam > limits.max_beam:
        raise ApiError(422, f"beam: expected at most {limits.max_beam}, got {decode.beam}")
    return decode


def _sampling(req: TranslateRequest) -> Optional[Sampling]:
    """The request's sampling settings, or None to search."""
    return Sampling(req.temperature, req.top_k, req.top_p, req.seed) if req.sample else None
