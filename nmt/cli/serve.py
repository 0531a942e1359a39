"""`nmt serve`: the HTTP server and its page."""

from __future__ import annotations

import argparse
import sys

from nmt.cli.options import (
    constraint_limit_args,
    count,
    int_at_least,
    language_vocab_arg,
    positive,
)
from nmt.errors import NmtError
from nmt.serve import REQUEST_PHRASES


def register(sub: "argparse._SubParsersAction") -> None:
    sv = sub.add_parser(
        "serve",
        help="HTTP translation server with a page showing the attention",
        description="Serve a checkpoint or run directory over HTTP: POST "
        "/v1/translate, GET /v1/model, GET /v1/health, the page at / and the "
        'OpenAPI schema at /docs. Needs the serve extra: pip install -e ".[serve]"',
    )
    sv.add_argument(
        "checkpoint",
        nargs="+",
        help="checkpoint file or run directory; several are served as one ensemble",
    )
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    sv.add_argument(
        "--port",
        type=int_at_least(0, 65535),
        default=8000,
        help="port (default: 8000; 0: any free one)",
    )
    _batching_args(sv)
    sv.add_argument(
        "--device",
        default=None,
        help="cpu, cuda or cuda:N (default: the run's training device where this "
        "machine has it, else cpu)",
    )
    sv.add_argument(
        "--precision",
        default=None,
        choices=["fp32", "bf16", "fp16"],
        help="decoding precision (default: as nmt translate: fp32 on a CPU, the run's on a GPU)",
    )
    sv.add_argument(
        "--int8",
        action="store_true",
        help="dynamic int8 quantization of the linear layers (CPU only)",
    )
    language_vocab_arg(sv)
    _limit_args(sv)
    sv.set_defaults(func=run)


def _limit_args(sv: argparse.ArgumentParser) -> None:
    """The limits on a request's lexical constraints (docs/terminology.md#limits): the
    per-sentence ones translate and evaluate share, and the request's."""
    g = constraint_limit_args(sv)
    g.add_argument(
        "--max-request-phrases",
        type=positive,
        default=REQUEST_PHRASES,
        metavar="N",
        help=f"phrases in all of a request's sentences (default: {REQUEST_PHRASES})",
    )


def _batching_args(sv: argparse.ArgumentParser) -> None:
    """How requests share batches, queue and time out."""
    sv.add_argument(
        "--max-batch-tokens",
        type=count,
        default=2000,
        metavar="N",
        help="padded source tokens per merged batch; 0 = no merging (default: 2000)",
    )
    sv.add_argument(
        "--max-wait-ms",
        type=float,
        default=10.0,
        metavar="M",
        help="how long a request waits for others to share its batch (default: 10)",
    )
    sv.add_argument(
        "--queue",
        type=positive,
        default=256,
        metavar="N",
        help="requests waiting before the server answers 503 (default: 256)",
    )
    sv.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per request, queueing included, before 504 (default: 60)",
    )


def run(a: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401  (checked here: the extra's one message)

        from nmt.serve.app import Limits, create_app
        from nmt.serve.listen import address, bind, bound_malloc_arenas, serve
    except ImportError as e:
        raise NmtError(
            f"nmt serve needs the serve extra ({e.name} is not installed): "
            f'pip install -e ".[serve]"'
        ) from None
    from nmt.api import Translator
    from nmt.logs import setup_logging

    if a.max_wait_ms < 0 or a.timeout <= 0:
        raise NmtError("--max-wait-ms must be >= 0 and --timeout > 0")
    setup_logging()
    bound_malloc_arenas()  # before torch's and uvicorn's threads start
    # Bound before the model loads: a busy port fails at once, and no address is announced
    # that the server does not hold.
    sock = bind(a.host, a.port)
    try:
        keys = ("language_vocab", "max_phrases", "max_phrase_words", "max_phrase_tokens")
        decode = {k: getattr(a, k) for k in keys if getattr(a, k) is not None}
        translator = Translator.load(
            a.checkpoint, device=a.device, precision=a.precision, int8=a.int8, decode=decode
        )
        limits = Limits(
            max_batch_tokens=a.max_batch_tokens,
            max_wait_ms=a.max_wait_ms,
            queue=a.queue,
            timeout_s=a.timeout,
            max_request_phrases=a.max_request_phrases,
        )
        app = create_app(translator, limits)
    except BaseException:
        sock.close()
        raise
    where = address(a.host, sock.getsockname()[1])  # --port 0: the port the system chose
    print(f"nmt serve: {translator.info.checkpoint} on http://{where}/", file=sys.stderr)
    serve(app, sock)
    return 0
