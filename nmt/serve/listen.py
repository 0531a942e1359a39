"""The listening socket of `nmt serve`, bound by us before anything is loaded or announced: a busy
port is one error line naming HOST:PORT (not a greeting followed by uvicorn's errno), and the
address the server announces is the one it holds."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import socket

from nmt.errors import NmtError

BACKLOG = 2048  # connections waiting to be accepted (uvicorn's default)
# glibc gives each thread that allocates its own heap arena, up to 8 per core, each reserving
# 64 MB of address space: on a 64-core machine the server's torch, uvicorn and worker threads
# reserved gigabytes they never used, and a cap on the address space (`ulimit -v`) refused it.
# One decoding thread does the work, so two arenas cost no contention (docs/serving.md).
MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def address(host: str, port: int) -> str:
    """HOST:PORT as a URL spells it ([::1]:8000 for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) and listening, or one NmtError line saying why not.
    A client that connects before uvicorn runs waits in the backlog instead of being refused."""
    where = address(host, port)
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise NmtError(f"cannot serve on {where}: unknown host {host!r} ({e.strerror})") from None
    sock = socket.socket(family, kind, proto)
    # as uvicorn does: a restart may take over a port its predecessor left in TIME_WAIT (a port
    # another process listens on is still refused)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        raise NmtError(_why(e, where, host)) from None
    return sock


def _why(e: OSError, where: str, host: str) -> str:
    if e.errno == errno.EADDRINUSE:
        return (
            f"{where} is already in use (another server listens there); stop it or pick "
            f"another --port"
        )
    if e.errno == errno.EACCES:
        return f"cannot serve on {where}: permission denied (ports below 1024 need root)"
    if e.errno == errno.EADDRNOTAVAIL:
        return f"cannot serve on {where}: {host} is not an address of this machine (--host)"
    return f"cannot serve on {where}: {e.strerror or e}"


def bound_malloc_arenas(arenas: int = MALLOC_ARENAS) -> None:
    """At most `arenas` glibc heap arenas (see MALLOC_ARENAS), unless MALLOC_ARENA_MAX says
    otherwise; call before the threads start. Elsewhere than glibc nothing to do."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, arenas)
    except (OSError, AttributeError):
        pass


def serve(app: object, sock: socket.socket) -> None:
    """Run `app` with uvicorn on the bound `sock` until interrupted: one access-log line per
    request, uvicorn's own start-up messages left out (the CLI has said where it serves)."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning")  # sets the uvicorn loggers' levels
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
