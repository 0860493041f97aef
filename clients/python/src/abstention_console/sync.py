"""`Console`: the client for threaded code (a web app, a worker, a script)."""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from abstention_console._core import (
    Backoff,
    DeliveryResult,
    PolicyCache,
    PolicyDefault,
    Spool,
    batch_body,
    default_spool_dir,
    delivery,
    encode_decision,
    policy_path,
    request_headers,
)

logger = logging.getLogger("abstention_console")

_WAKE = object()


class Console:
    """Records gated decisions into the console and reads the signed policy of a route.

    `record()` only serialises the decision and puts it on a bounded in-memory queue (or, when
    the queue is full, appends it to the spool on disk); a background thread sends the queue in
    batches of `batch_size`, at least every `flush_interval` seconds. When the console cannot be
    reached (or answers 5xx/429), the batch goes to the spool and every following batch with it,
    until a retry (exponential backoff with jitter, never sooner than `Retry-After`) gets through;
    then the spool is replayed. Replays are safe because the console is idempotent by
    `request_id` within a route. Decisions the console rejects for their own content land in
    `dead_letter_path` with the console's reasons, and are logged.

    `spool_dir` defaults to a directory per console and token under `$XDG_STATE_HOME` (or
    `~/.local/state`)/abstention-console. A client started on a spool that holds decisions (a
    process that was stopped during an outage) replays them.

    `close()` (also run at interpreter exit) sends what it can within its timeout and spools the
    rest. Only decisions still in memory when the process is killed outright are lost.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        spool_dir: str | Path | None = None,
        batch_size: int = 500,
        flush_interval: float = 1.0,
        max_queue: int = 10_000,
        timeout: float = 30.0,
        policy_timeout: float = 2.0,
        policy_ttl: float = 0.0,
        default_policy: PolicyDefault = None,
        backoff: Backoff | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not 1 <= batch_size <= 1000:
            raise ValueError("batch_size is 1 to 1000 (the ingest API's limit per call)")
        if flush_interval <= 0:
            raise ValueError("flush_interval must be positive")
        self.url = url.rstrip("/")
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.policy_timeout = policy_timeout
        self.spool = Spool(Path(spool_dir) if spool_dir is not None else default_spool_dir(self.url, token))
        self._policies = PolicyCache(self.spool.directory, default_policy, policy_ttl)
        self._client_options = {
            "base_url": self.url,
            "headers": request_headers(token),
            "timeout": timeout,
            "transport": transport,
        }
        self._max_queue = max_queue
        self._backoff = backoff or Backoff()
        self._closed = False
        self._start()
        _close_at_exit(self)

    def _start(self) -> None:
        """The per-process half: HTTP connections, the queue and the worker thread."""
        self._http = httpx.Client(**self._client_options)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=self._max_queue)
        self._retry_at = 0.0  # monotonic time before which the console is not tried again
        self._state = threading.Condition()
        self._in_memory = 0  # recorded, not yet delivered, dead-lettered or spooled
        self._in_flight: list[bytes] = []
        self._replaying = False
        self._flushing = threading.Event()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="abstention-console-client", daemon=True)
        self._worker.start()

    def _after_fork(self) -> None:
        """A forked child (gunicorn --preload, a prefork pool) gets no thread and must not share the
        parent's connections or spool segment: it starts its own. What the parent had queued stays
        the parent's to send."""
        if self._closed:
            return
        self.spool.forget_after_fork()
        self._start()

    @property
    def dead_letter_path(self) -> Path:
        return self.spool.dead_letter_path

    # -- recording ------------------------------------------------------------------------------

    def record(self, decision: Mapping[str, Any]) -> None:
        """Queue one decision (the ingest record of the API). Never waits for the network; raises
        TypeError/ValueError at once for a decision that cannot be sent (not JSON, no route or
        request_id)."""
        if self._closed:
            raise RuntimeError("this Console is closed")
        item = encode_decision(decision)
        with self._state:
            self._in_memory += 1
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.spool.append([item])
            self._settled(1)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every decision recorded so far is delivered (or dead-lettered) and the spool
        is empty. True when it is; False when `timeout` ran out first (what is left stays queued
        or spooled and will still be sent)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._flushing.set()
        self._wake()
        try:
            with self._state:
                while not self._idle():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._state.wait(0.05 if remaining is None else min(remaining, 0.05))
            return True
        finally:
            self._flushing.clear()

    def close(self, timeout: float | None = 5.0) -> None:
        """Send what can be sent within `timeout`, spool the rest, stop the worker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush(timeout)
        finally:
            self._stop.set()
            self._wake()
            self._worker.join(timeout=(self._http.timeout.read or 10.0) + 1.0)
            leftover = [item for item in self._drain() if item is not _WAKE]
            with self._state:
                leftover = self._in_flight + leftover
            self.spool.append(leftover)
            self.spool.close()
            self._http.close()

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the policy -----------------------------------------------------------------------------

    def policy(self, route: str) -> dict[str, Any]:
        """The signed policy in force on `route` (`cutoff`, `band_lower`, `refusal_message`,
        `escalation`, `version`, ...), revalidated with If-None-Match (a 304 costs no body).
        When the console cannot answer: the last known policy, else `default_policy`, else
        `PolicyUnavailable` (see PolicyCache)."""
        cached = self._policies.fresh(route)
        if cached is not None:
            return cached
        try:
            response: httpx.Response | Exception = self._http.get(
                policy_path(route), headers=self._policies.headers(route), timeout=self.policy_timeout
            )
        except httpx.HTTPError as exc:
            response = exc
        return self._policies.answer(route, response)

    # -- the worker -----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            items = self._collect()
            if items:
                with self._state:
                    self._in_flight = items
                try:
                    if self._stop.is_set() or time.monotonic() < self._retry_at:
                        self.spool.append(items)
                    else:
                        self._send(items)
                except Exception:
                    # A worker that died would strand every later decision in memory.
                    logger.exception("unexpected error while sending; %d decision(s) spooled", len(items))
                    self.spool.append(items)
                    self._retry_at = time.monotonic() + self._backoff.next_delay()
                with self._state:
                    self._in_flight = []
                self._settled(len(items))
            if self._stop.is_set():
                return
            if time.monotonic() >= self._retry_at and self.spool.has_backlog():
                try:
                    self._replay()
                except Exception:
                    logger.exception("unexpected error while replaying the spool")
                    self._retry_at = time.monotonic() + self._backoff.next_delay()

    def _collect(self) -> list[bytes]:
        """Up to `batch_size` decisions: waits up to `flush_interval` for the first, then takes
        what arrives until the batch is full or the interval is over (at once when flushing)."""
        items: list[bytes] = []
        deadline = time.monotonic() + self.flush_interval
        while len(items) < self.batch_size:
            hurry = self._flushing.is_set() or self._stop.is_set()
            wait = 0 if hurry and items else max(0.0, deadline - time.monotonic())
            if hurry and not items:
                wait = min(wait, 0.05)
            try:
                item = self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _WAKE:
                if items:
                    break
                continue
            items.append(item)
        return items

    def _send(self, items: list[bytes], *, keep_failed: bool = True) -> DeliveryResult:
        """Deliver `items`; on failure schedule the retry and (with keep_failed) spool what is left."""
        steps = delivery(items, self.spool, self.batch_size)
        try:
            batch = next(steps)
            while True:
                try:
                    answer: httpx.Response | Exception = self._http.post(
                        "/api/v1/decisions", content=batch_body(batch), headers={"Content-Type": "application/json"}
                    )
                except httpx.HTTPError as exc:
                    answer = exc
                batch = steps.send(answer)
        except StopIteration as done:
            result: DeliveryResult = done.value
        if result.failed:
            if keep_failed:
                self.spool.append(result.failed)
            self._retry_at = time.monotonic() + self._backoff.next_delay(result.retry_after)
        else:
            self._backoff.reset()
        return result

    def _replay(self) -> None:
        self.spool.rotate()
        with self._state:
            self._replaying = True
        try:
            for path in self.spool.segments():
                handle = self.spool.claim(path)
                if handle is None:
                    continue
                try:
                    items = self.spool.read(handle)
                    result = self._send(items, keep_failed=False) if items else DeliveryResult()
                except BaseException:
                    self.spool.release(path, handle, delete=False)
                    raise
                if result.failed and not result.progressed:
                    # Nothing got through: the segment stays as it is rather than being copied anew.
                    self.spool.release(path, handle, delete=False)
                    return
                self.spool.append(result.failed)
                self.spool.release(path, handle, delete=True)
                if result.failed:
                    return
        finally:
            with self._state:
                self._replaying = False
                self._state.notify_all()

    def _settled(self, count: int) -> None:
        with self._state:
            self._in_memory -= count
            self._state.notify_all()

    def _idle(self) -> bool:
        return self._in_memory == 0 and not self._replaying and not self.spool.has_backlog()

    def _wake(self) -> None:
        try:
            self._queue.put_nowait(_WAKE)
        except queue.Full:
            pass

    def _drain(self) -> list[Any]:
        items = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items


def _close_at_exit(console: Console) -> None:
    ref = weakref.ref(console)

    def close() -> None:
        alive = ref()
        if alive is not None:
            alive.close()

    def restart_in_child() -> None:
        alive = ref()
        if alive is not None:
            alive._after_fork()

    atexit.register(close)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=restart_in_child)
