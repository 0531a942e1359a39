"""`nmt serve`: FastAPI routes and schemas over one `Translator` and its `Batcher`.

    POST /v1/translate   {"text": [...], "beam", "nbest", "alignment", "attention_layer",
                          "attention_head", "sample", "temperature", "top_k", "top_p", "seed",
                          "constraints", "tgt_lang", "pivot"} -> {"translations": [...],
                          "model": {...}, "time_ms"}
    GET  /v1/health      liveness, the worker's state (idle, busy, overdue), queue length,
                         counters
    GET  /v1/model       architecture, parameters, vocabularies, step, validation BLEU, limits,
                         languages, an example sentence from the run's own data
    GET  /               the page (static/index.html, app.js, style.css)

Every error is a JSON body {"error": "..."} naming the field and what was expected: 400 for
bodies that are not UTF-8 JSON, 413 for too many sentences or bytes, 422 for wrong types, unknown
fields, values out of range and constraints over a limit (then also {"limit": NAME}), 503 (with
Retry-After) when the queue is full, 504 past the timeout (the request's decoding stops there). The body is parsed by `nmt.serve.request` rather than by FastAPI so each of those
messages is ours; the OpenAPI schema still documents it (openapi_extra).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from nmt.api import Translator
from nmt.config import DecodeConfig
from nmt.errors import NmtError
from nmt.search.deadline import DeadlinePassed
from nmt.serve.batcher import Batcher, QueueFull
from nmt.serve.example import example_sentence
from nmt.serve.request import ApiError, Limits, TranslateRequest, parse_request, request_error

STATIC = Path(__file__).resolve().parent / "static"
DRAIN_BYTES = 64 * 1024 * 1024  # of an oversized body, read and dropped before the 413
CLOSE = {"Connection": "close"}  # after a 413 the connection is not reused


# ---------------------------------------------------------------------------------- answers


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
    target_languages: list[str] = Field(
        description="what tgt_lang accepts: a multilingual model's target languages, else its own"
    )
    source_languages: list[str]
    multilingual: bool = Field(description="several directions: every request needs tgt_lang")
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


def _error(
    status: int, message: str, headers: Optional[dict] = None, limit: Optional[str] = None
) -> JSONResponse:
    body = {"error": message} if limit is None else {"error": message, "limit": limit}
    return JSONResponse(body, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        return _error(e.status, e.message, e.headers, e.limit)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        return _error(422, request_error(e.errors()))

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
    answer.cancel()  # queued: skipped by the worker; running: stopped at its deadline
    if gone in done:
        return None
    raise _timeout(timeout)


def _timeout(timeout: float) -> ApiError:
    return ApiError(
        504,
        f"timeout: no answer within {timeout:g} s (the server is busy; retry, "
        f"send fewer sentences, or start it with a larger --timeout)",
    )


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def phrase_limits(decode: DecodeConfig) -> dict:
    """The decode.* limits on a request's constraints, as GET /v1/model lists them."""
    keys = ("max_phrases", "max_phrase_words", "max_phrase_tokens")
    return {k: getattr(decode, k) for k in keys}


def create_app(translator: Translator, limits: Limits = Limits()) -> FastAPI:
    batcher = Batcher(
        translator, limits.max_batch_tokens, limits.max_wait_ms, limits.queue, limits.timeout_s
    )

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
        limits={**asdict(limits), **phrase_limits(translator.cfg.decode)},
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
        except DeadlinePassed:
            raise _timeout(limits.timeout_s) from None
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
            **batcher.state(),
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
