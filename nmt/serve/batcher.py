"""Cross-request batching: one decoding thread owns the model and merges queued requests.

Requests wait in a bounded queue. When the worker is free it takes the oldest request and gathers
later ones with the same decoding options until the batch reaches `max_batch_tokens` padded
source tokens (the measure `decode.batch_tokens` uses), or until as many requests have arrived
since the last batch was answered as that batch answered, or the wait runs out. It decodes them
as one list with `Translator.translate`. The wait runs `max_wait_ms` from the later of the oldest
arrival and the last answer, and, while clients answered by the last batch may still come back,
up to `comeback_share` (1/10) of that batch's decoding time, so waiting for them costs at most
that share of the throughput. Clients answered a moment ago are about to send again: without the
wait, under a steady load of C clients the batches settle into two alternating halves of C/2 (one
queueing while the other decodes); with it, each batch holds all C. A lone client that sends
again as soon as it is answered never waits. `max_batch_tokens=0` turns merging off: one request
per decode, the way a per-model lock behaves. The model is touched by this thread only, so the
attention view a request asks for (which mutates the model) is set and restored safely.

A full queue raises `QueueFull` (the server answers 503 with Retry-After). A caller that gives up
(timeout, disconnect) cancels its future, and a cancelled request is skipped before decoding.
A batch that fails is retried request by request, so one bad request fails alone.

Each request has a deadline, `timeout_s` after it arrived. The worker decodes a batch within the
earliest deadline of its requests (`nmt.search.deadline`: checked before every decoding step),
so a request past its time stops where it runs, within a step, and the worker goes on to the
next; the other requests of its batch are then decoded alone, each within its own deadline.
`state` says whether the worker is idle, busy, or busy past its batch's deadline (`/v1/health`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Optional

from nmt.api import Sampling
from nmt.errors import NmtError
from nmt.search.deadline import DeadlinePassed, within

log = logging.getLogger("nmt")


@dataclass(frozen=True)
class Options:
    """The decoding options of a request; only requests with equal options share a batch."""

    beam: int
    nbest: int = 1
    alignment: bool = False
    attention_layer: int = -1
    attention_head: Optional[int] = None
    sampling: Optional[Sampling] = None  # draw nbest samples instead of searching
    tgt_lang: Optional[str] = None  # a multilingual model's target language
    pivot: Optional[str] = None  # ... and the language to translate through (two passes)


@dataclass
class Job:
    texts: list[str]
    lengths: list[int]  # source tokens per text (with EOS, after truncation)
    options: Options
    constraints: Optional[list] = None  # per text, as `Translator.translate` takes them
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.monotonic)
    deadline: float = math.inf  # time.monotonic() past which its decoding stops


class QueueFull(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(f"the request queue is full; retry in {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Stats:
    requests: int = 0
    sentences: int = 0
    batches: int = 0
    cancelled: int = 0
    failed: int = 0
    timed_out: int = 0  # stopped at their deadline
    # why the free worker stopped gathering a batch, and how long it waited in all
    closed_full: int = 0  # the token budget was reached
    closed_returned: int = 0  # the clients answered last had come back
    closed_max_wait: int = 0  # the wait ran out (max_wait_ms or the comeback share)
    wait_s: float = 0.0


class Batcher:
    def __init__(
        self,
        translator,
        max_batch_tokens: int,
        max_wait_ms: float,
        queue_size: int,
        timeout_s: float = math.inf,
    ) -> None:
        if max_batch_tokens < 0 or max_wait_ms < 0 or queue_size < 1:
            raise NmtError(
                f"batcher needs max_batch_tokens >= 0, max_wait_ms >= 0 and "
                f"queue_size >= 1, got {max_batch_tokens}, {max_wait_ms}, {queue_size}"
            )
        self.translator = translator
        self.max_batch_tokens, self.max_wait = max_batch_tokens, max_wait_ms / 1000
        self.queue_size, self.timeout_s = queue_size, timeout_s
        self.stats = Stats()
        self._busy: Optional[tuple[float, float]] = None  # (since, deadline) of the batch
        self._queue: deque[Job] = deque()
        self._cv = threading.Condition()
        self._stopping = False
        self._seconds_per_sentence = 0.05  # running estimate, for Retry-After
        self._last_done = 0.0  # when the last batch was answered
        self._answered = 0  # requests that batch answered
        self._last_decode_s = 0.0  # and how long it took to decode
        self.comeback_share = 0.10  # of that time, spent waiting for them
        self._thread = threading.Thread(target=self._run, name="nmt-decoder", daemon=True)

    # -- the caller's side -----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stopping

    def state(self) -> dict:
        """The worker as /v1/health shows it: idle, busy, or overdue (busy past its batch's
        deadline: stopping at its next decoding step), and for how long it has been busy."""
        busy = self._busy  # one read: the worker may change it meanwhile
        if busy is None:
            return {"worker": "idle", "busy_s": 0.0}
        now = time.monotonic()
        return {"worker": "overdue" if now > busy[1] else "busy", "busy_s": round(now - busy[0], 3)}

    def queued(self) -> int:
        """Requests waiting for the worker (those whose callers gave up not counted)."""
        with self._cv:
            self._drop_cancelled()
            return len(self._queue)

    def submit(
        self, texts: list[str], options: Options, constraints: Optional[list] = None
    ) -> Future:
        """Queue a request (with its texts' lexical constraints, if any: they do not keep it
        from sharing a batch); its future resolves to one TranslationResult per text."""
        lengths = self.translator.source_lengths(texts, options.tgt_lang)
        job = Job(texts, lengths, options, constraints)
        job.deadline = job.enqueued + self.timeout_s
        with self._cv:
            self._drop_cancelled()  # given up by their callers: no room taken
            if len(self._queue) >= self.queue_size:
                waiting = sum(len(j.texts) for j in self._queue)
                raise QueueFull(max(1, math.ceil(waiting * self._seconds_per_sentence)))
            self._queue.append(job)
            self._cv.notify_all()
        return job.future

    # -- the worker's side -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._decode(batch)

    def _next_batch(self) -> Optional[list[Job]]:
        with self._cv:
            while True:
                self._drop_cancelled()
                if self._queue:
                    break
                if self._stopping:
                    return None
                self._cv.wait()
            first = self._queue[0]
            if self.max_batch_tokens == 0:
                return [self._queue.popleft()]
            # Wait from the later of the oldest arrival and the last answer: clients answered a
            # moment ago are about to send again, and without this pause the batches settle
            # into two alternating halves of the clients. Stop waiting once they are back.
            deadline = max(
                first.enqueued + self.max_wait,
                self._last_done + max(self.max_wait, self.comeback_share * self._last_decode_s),
            )
            free = time.monotonic()
            while True:
                batch, full = self._pick(first.options)
                left = deadline - time.monotonic()
                if full:
                    self.stats.closed_full += 1
                elif self._returned():
                    self.stats.closed_returned += 1
                elif left <= 0 or self._stopping:
                    self.stats.closed_max_wait += 1
                else:
                    self._cv.wait(left)
                    continue
                break
            self.stats.wait_s += time.monotonic() - free
            for job in batch:
                self._queue.remove(job)
            return batch

    def _returned(self) -> bool:
        """As many requests arrived since the last answer as it answered (lock held)."""
        back = sum(j.enqueued >= self._last_done for j in self._queue)
        return self._answered > 0 and back >= self._answered

    def _drop_cancelled(self) -> None:
        """Forget queued requests whose callers gave up (call with the lock held)."""
        if any(j.future.cancelled() for j in self._queue):
            kept = deque(j for j in self._queue if not j.future.cancelled())
            self.stats.cancelled += len(self._queue) - len(kept)
            self._queue = kept

    def _pick(self, options: Options) -> tuple[list[Job], bool]:
        """Queued jobs with these options, oldest first, within the token budget; and whether
        the budget is reached (no point waiting longer)."""
        batch: list[Job] = []
        n, longest = 0, 0
        for job in self._queue:
            if job.options != options or job.future.cancelled():
                continue
            n2, longest2 = n + len(job.texts), max([longest, *job.lengths])
            if batch and n2 * longest2 > self.max_batch_tokens:
                return batch, True
            batch.append(job)
            n, longest = n2, longest2
        return batch, n * longest >= self.max_batch_tokens

    def _decode(self, batch: list[Job]) -> None:
        live = [j for j in batch if j.future.set_running_or_notify_cancel()]
        self.stats.cancelled += len(batch) - len(live)
        start = time.monotonic()
        try:
            outcomes = self._translate(live) if live else []
        finally:
            self._busy = None
        with self._cv:  # marked before the answers go out: no comeback predates it
            self._last_done, self._answered = time.monotonic(), len(live)
            self._last_decode_s = self._last_done - start
        for job, ok, value in outcomes:
            if ok:
                job.future.set_result(value)
            else:
                job.future.set_exception(value)

    def _translate(self, jobs: list[Job]) -> list[tuple[Job, bool, object]]:
        """(job, succeeded, results or exception) for each job."""
        o = jobs[0].options
        texts = [t for j in jobs for t in j.texts]
        constraints = None  # texts without any are decoded as if no request had them
        if any(j.constraints is not None for j in jobs):
            constraints = [c for j in jobs for c in (j.constraints or [None] * len(j.texts))]
        start = time.monotonic()
        deadline = min(j.deadline for j in jobs)
        self._busy = (start, deadline)
        try:
            if start > deadline:
                raise DeadlinePassed("the request's time limit passed before its turn came")
            with within(deadline - start):
                results = self._call(texts, o, constraints)
        except Exception as e:  # noqa: BLE001 -- the worker must outlive any one request
            if len(jobs) > 1:  # find the culprit; the others still succeed
                return [out for j in jobs for out in self._translate([j])]
            if not isinstance(e, NmtError):
                log.exception("decoding a request failed")
            if isinstance(e, DeadlinePassed):
                self.stats.timed_out += 1
            else:
                self.stats.failed += 1
            return [(jobs[0], False, e)]
        per = (time.monotonic() - start) / max(1, len(texts))
        self._seconds_per_sentence = 0.8 * self._seconds_per_sentence + 0.2 * per
        self.stats.batches += 1
        self.stats.requests += len(jobs)
        self.stats.sentences += len(texts)
        outcomes, at = [], 0
        for j in jobs:
            outcomes.append((j, True, results[at : at + len(j.texts)]))
            at += len(j.texts)
        return outcomes

    def _call(self, texts: list[str], o: Options, constraints: Optional[list]) -> list:
        """`Translator.translate` of one batch with its options."""
        return self.translator.translate(
            texts,
            beam=o.beam,
            nbest=o.nbest,
            alignment=o.alignment,
            attention_layer=o.attention_layer,
            attention_head=o.attention_head,
            batch_tokens=self.max_batch_tokens or None,
            sampling=o.sampling,
            constraints=constraints,
            tgt_lang=o.tgt_lang,
            pivot=o.pivot,
        )
