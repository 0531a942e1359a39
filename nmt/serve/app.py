"""`nmt serve`: FastAPI routes and schemas over one `Translator` and its `Batcher`.

    POST /v1/translate   {"text": [...], "beam", "nbest", "alignment", "attention_layer",
                          "attention_head", "sample", "temperature", "top_k", "top_p", "seed",
                          "constraints"} -> {"translations": [...], "model": {...}, "time_ms"}
    GET  /v1/health      liveness, queue length, counters
    GET  /v1/model       architecture, parameters, vocabularies, step, validation BLEU, limits,
                         an example sentence from the run's own data
    GET  /               the page (static/index.html, app.js, style.css)

Every error is a JSON body {"error": "..."} naming the field and what was expected: 400 for
bodies that are not UTF-8 JSON, 413 for too many sentences or bytes, 422 for wrong types, unknown
fields and values out of range, 503 (with Retry-After) when the queue is full, 504 past the
timeout. The body is parsed here rather than by FastAPI so each of those messages is ours; the
OpenAPI schema still documents it (openapi_extra).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from nmt.api import Sampling, Translator
from nmt.errors import NmtError
from nmt.inference import check_nbest
from nmt.serve.batcher import Batcher, Options, QueueFull
from nmt.serve.example import example_sentence

STATIC = Path(__file__).resolve().parent / "static"
DRAIN_BYTES = 64 * 1024 * 1024  # of an oversized body, read and dropped before the 413
CLOSE = {"Connection": "close"}  # after a 413 the connection is not reused


@dataclass(frozen=True)
class Limits:
    max_batch_tokens: int = 2000  # padded source tokens per merged batch; 0 = no merging
    max_wait_ms: float = 10.0  # how long the oldest request waits for company
    queue: int = 256  # requests waiting before 503
    timeout_s: float = 60.0  # per request, queueing included, before 504
    max_sentences: int = 64  # per request (413 beyond)
    max_bytes: int = 256 * 1024  # request body (413 beyond)
    max_beam: int = 16


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
    nbest: int = Field(1, ge=1, description="hypotheses per sentence (<= beam)")
    alignment: bool = Field(
        False,
        description="return the attention matrix of the best "
        "hypothesis (target pieces x source pieces)",
    )
    attention_layer: int = Field(
        -1, description="decoder layer of the reported attention (transformer; -1 = last)"
    )
    attention_head: Optional[int] = Field(
        None, description="head of the reported attention (transformer; null = mean over heads)"
    )
    sample: bool = Field(
        False, description="draw tokens instead of searching (nbest = samples per sentence)"
    )
    temperature: Optional[float] = Field(
        None, gt=0, description="sampling: divide log-probs by T (default: decode.temperature)"
    )
    top_k: Optional[int] = Field(
        None, ge=0, description="sampling: draw from the K likeliest tokens (0 = all)"
    )
    top_p: Optional[float] = Field(
        None, gt=0, le=1, description="sampling: draw from the nucleus of mass P"
    )
    seed: Optional[int] = Field(None, description="sampling seed (default: decode.seed)")
    # Checked by `Translator.encode_constraints`, so each error names the text's index.
    constraints: Optional[list[Any]] = Field(
        None,
        description="lexical constraints, one entry per text: a list of phrases its "
        'translation must contain, or {"include": [...], "exclude": [...]}, or null/[] for '
        "none (beam search only)",
    )


class NBestOut(BaseModel):
    text: str
    score: float


class TranslationOut(BaseModel):
    text: str
    nbest: list[NBestOut]
    src_pieces: list[str]
    tgt_pieces: list[str]
    alignment: Optional[list[list[float]]]
    warnings: list[str]
    unmet: Optional[int] = Field(
        None, description="constraint phrases the translation misses (null: none were given)"
    )


class ModelOut(BaseModel):
    arch: str
    parameters: int
    src_vocab: int
    tgt_vocab: int
    step: int
    valid_bleu: Optional[float]
    checkpoint: str
    attention_layers: int
    attention_heads: int
    max_input_tokens: int
    default_beam: int
    device: str
    precision: str
    limits: dict
    example: Optional[str] = Field(
        None, description="the first source sentence of the run's test (else validation) split"
    )


class TranslateResponse(BaseModel):
    translations: list[TranslationOut]
    model: ModelOut
    time_ms: float


class ErrorOut(BaseModel):
    error: str


# ---------------------------------------------------------------------------------- errors


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: Optional[dict] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def _field_error(err: dict) -> str:
    """One pydantic error as 'FIELD: what was expected'."""
    where = ".".join(str(p) for p in err["loc"]) or "request body"
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
    got = json.dumps(err.get("input"), ensure_ascii=False)
    got = got if len(got) <= 60 else got[:57] + "..."
    return f"{where}: {err['msg'][0].lower()}{err['msg'][1:]}, got {got}"


def _request_error(errors: list[dict]) -> str:
    """The first error; an unknown field before everything else, since a misspelled field (txt)
    also makes the one it was meant as (text) look missing."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if not unknown:
        return _field_error(errors[0])
    missing = [e for e in errors if e["type"] == "missing"]
    return "; ".join(_field_error(e) for e in unknown[:1] + missing[:1])


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, or a 413 once it passes `limit` bytes. The rest of an oversized body is read and
    dropped first (up to DRAIN_BYTES): a client that sends its whole body before reading the
    answer (urllib, most HTTP libraries) gets a broken pipe if the server closes on unread data."""
    declared = request.headers.get("content-length")
    too_long = bool(declared and declared.isdigit() and int(declared) > limit)
    waits = request.headers.get("expect", "").lower() == "100-continue"  # curl: sends nothing yet
    body, seen = bytearray(), 0
    if not (too_long and (waits or int(declared) > DRAIN_BYTES)):
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > DRAIN_BYTES:
                break
            if seen <= limit:  # past it, chunks are only counted
                body += chunk
    if too_long:
        raise ApiError(413, f"request body: {declared} bytes, the limit is {limit}", CLOSE)
    if seen > limit:
        raise ApiError(413, f"request body: more than {limit} bytes, the limit is {limit}", CLOSE)
    return bytes(body)


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
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ApiError(
            400,
            f"request body: invalid JSON ({e.msg} at line {e.lineno} column "
            f'{e.colno}); expected an object like {{"text": ["..."]}}',
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
        raise ApiError(422, _request_error(e.errors())) from None
    for i, t in enumerate(req.text):
        try:
            t.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, f"text.{i}: not valid Unicode (a lone surrogate escape)") from None
    beam = translator.info.default_beam if req.beam is None else req.beam
    _check_beam(beam, req, limits)
    _check_view(req, translator)
    options = Options(
        beam, req.nbest, req.alignment, req.attention_layer, req.attention_head, _sampling(req)
    )
    return req.text, options, _constraints(req, translator)


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


def _constraints(req: TranslateRequest, translator: Translator) -> Optional[list]:
    """The request's constraints, checked in full now, so a bad one is a 422 naming
    `constraints.INDEX`, not a failed batch (the batcher's translate encodes them again)."""
    if req.constraints is None:
        return None
    try:
        translator.encode_constraints(
            req.text, req.constraints, _sampling(req), where="constraints.{}"
        )
    except NmtError as e:
        raise ApiError(422, str(e)) from None
    return req.constraints


def _check_beam(beam: int, req: TranslateRequest, limits: Limits) -> None:
    """The server's beam limit and the n-best rule every front end checks."""
    if beam > limits.max_beam:
        raise ApiError(422, f"beam: expected at most {limits.max_beam}, got {beam}")
    try:
        check_nbest(beam, req.nbest, req.sample)
    except NmtError as e:
        raise ApiError(422, str(e)) from None


def _sampling(req: TranslateRequest) -> Optional[Sampling]:
    """The request's sampling settings, or None to search."""
    return Sampling(req.temperature, req.top_k, req.top_p, req.seed) if req.sample else None


def _error(status: int, message: str, headers: Optional[dict] = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        return _error(e.status, e.message, e.headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        return _error(422, _request_error(e.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return _error(e.status_code, str(e.detail), getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def bug(_: Request, e: Exception) -> JSONResponse:
        return _error(500, f"internal error ({type(e).__name__}); the server log has the details")


# ---------------------------------------------------------------------------------- the app


async def _wait(request: Request, future, timeout: float):
    """The batcher's answer; None if the client went away (the job is cancelled then)."""
    answer = asyncio.wrap_future(future)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait(
            {answer, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        gone.cancel()
    if answer in done:
        return answer.result()
    answer.cancel()  # queued: skipped by the worker; running: discarded
    if gone in done:
        return None
    raise ApiError(
        504,
        f"timeout: no answer within {timeout:g} s (the server is busy; retry, "
        f"send fewer sentences, or start it with a larger --timeout)",
    )


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def create_app(translator: Translator, limits: Limits = Limits()) -> FastAPI:
    batcher = Batcher(translator, limits.max_batch_tokens, limits.max_wait_ms, limits.queue)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        batcher.start()
        yield
        batcher.stop()

    app = FastAPI(
        title="nmt",
        version=__import__("nmt").__version__,
        lifespan=lifespan,
        description="Neural machine translation with the attention shown: "
        "POST /v1/translate, GET /v1/model, GET /v1/health, and the page at /.",
    )
    app.state.batcher, app.state.translator = batcher, translator
    _install_error_handlers(app)
    model = ModelOut(
        **asdict(translator.info),
        device=str(translator.device),
        precision=translator.precision,
        limits={k: v for k, v in asdict(limits).items()},
        example=example_sentence(translator.cfg.data),
    )
    _add_translate_route(app, batcher, translator, limits, model)
    _add_info_routes(app, batcher, model)
    return app


def _add_translate_route(
    app: FastAPI, batcher: Batcher, translator: Translator, limits: Limits, model: ModelOut
) -> None:
    """POST /v1/translate: parse and check the body, queue it for the batcher, wait."""
    errors = {s: {"model": ErrorOut} for s in (400, 413, 422, 503, 504)}

    @app.post(
        "/v1/translate",
        response_model=TranslateResponse,
        responses=errors,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": TranslateRequest.model_json_schema()}},
            }
        },
    )
    async def translate(request: Request):
        start = time.perf_counter()
        texts, options, constraints = parse_request(
            await _read_body(request, limits.max_bytes), translator, limits
        )
        try:
            future = batcher.submit(texts, options, constraints)
        except QueueFull as e:
            raise ApiError(503, str(e), {"Retry-After": str(e.retry_after)}) from None
        try:
            results = await _wait(request, future, limits.timeout_s)
        except NmtError as e:
            raise ApiError(422, str(e)) from None
        if results is None:
            return _error(499, "client closed the request")
        return {
            "translations": [r.as_dict() for r in results],
            "model": model,
            "time_ms": round((time.perf_counter() - start) * 1000, 2),
        }


def _add_info_routes(app: FastAPI, batcher: Batcher, model: ModelOut) -> None:
    """GET /v1/health, /v1/model, the page at / and its static files."""

    @app.get("/v1/health")
    async def health():
        body = {
            "status": "ok" if batcher.alive else "down",
            "queued": batcher.queued(),
            **asdict(batcher.stats),
        }
        return JSONResponse(body, status_code=200 if batcher.alive else 503)

    @app.get("/v1/model", response_model=ModelOut)
    async def model_info():
        return model

    @app.get("/", include_in_schema=False)
    async def page():
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
