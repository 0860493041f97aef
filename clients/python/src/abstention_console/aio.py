"""`AsyncConsole`: the same client for asyncio code, on httpx.AsyncClient."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
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


class AsyncConsole:
    """`Console` for an event loop: the same behaviour and arguments, every method a coroutine.

    The sender is a task on the loop that first calls `record()`; spool writes (fsync) run in a
    thread so the loop never waits on the disk either. Close it (`await console.close()` or
    `async with`) before the loop ends: an event loop that is gone cannot flush at exit.
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
        transport: httpx.AsyncBaseTransport | None = None,
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
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=request_headers(token), timeout=timeout, transport=transport
        )
        self._max_queue = max_queue
        self._queue: asyncio.Queue[bytes] | None = None
        self._task: asyncio.Task[None] | None = None
        self._backoff = backoff or Backoff()
        self._retry_at = 0.0
        self._in_memory = 0
        self._in_flight: list[bytes] = []
        self._replaying = False
        self._flushing = False
        self._closed = False

    @property
    def dead_letter_path(self) -> Path:
        return self.spool.dead_letter_path

    async def record(self, decision: Mapping[str, Any]) -> None:
        """Queue one decision; never waits for the network (see `Console.record`)."""
        if self._closed:
            raise RuntimeError("this AsyncConsole is closed")
        item = encode_decision(decision)
        queue = self._started()
        self._in_memory += 1
        try:
            queue.put_nowait(item)
        except asyncio.QueueFull:
            try:
                await asyncio.to_thread(self.spool.append, [item])
            finally:
                self._in_memory -= 1

    async def flush(self, timeout: float | None = None) -> bool:
        """True once everything recorded is delivered (or dead-lettered) and the spool is empty;
        False when `timeout` ran out first."""
        self._started()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._flushing = True
        try:
            while not await self._idle():
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                await asyncio.sleep(0.02)
            return True
        finally:
            self._flushing = False

    async def close(self, timeout: float | None = 5.0) -> None:
        """Send what can be sent within `timeout`, spool the rest, stop the sender. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._task is not None:
                await self.flush(timeout)
        finally:
            leftover: list[bytes] = []
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                leftover = list(self._in_flight)
            if self._queue is not None:
                while not self._queue.empty():
                    leftover.append(self._queue.get_nowait())
            await asyncio.to_thread(self.spool.append, leftover)
            self.spool.close()
            await self._http.aclose()

    async def __aenter__(self) -> AsyncConsole:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def policy(self, route: str) -> dict[str, Any]:
        """The signed policy of `route`, ETag-revalidated, with the fail-safe of `Console.policy`."""
        cached = self._policies.fresh(route)
        if cached is not None:
            return cached
        try:
            response: httpx.Response | Exception = await self._http.get(
                policy_path(route), headers=self._policies.headers(route), timeout=self.policy_timeout
            )
        except httpx.HTTPError as exc:
            response = exc
        return self._policies.answer(route, response)

    # -- the sender -----------------------------------------------------------------------------

    def _started(self) -> asyncio.Queue[bytes]:
        if self._queue is None:
            self._queue = asyncio.Queue(maxsize=self._max_queue)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="abstention-console-client")
        return self._queue

    async def _run(self) -> None:
        while True:
            items = await self._collect()
            if items:
                self._in_flight = items
                try:
                    if time.monotonic() < self._retry_at:
                        await asyncio.to_thread(self.spool.append, items)
                    else:
                        await self._send(items)
                except Exception:
                    # A sender that died would strand every later decision in memory.
                    logger.exception("unexpected error while sending; %d decision(s) spooled", len(items))
                    await asyncio.to_thread(self.spool.append, items)
                    self._retry_at = time.monotonic() + self._backoff.next_delay()
                self._in_flight = []
                self._in_memory -= len(items)
            if time.monotonic() >= self._retry_at and await asyncio.to_thread(self.spool.has_backlog):
                try:
                    await self._replay()
                except Exception:
                    logger.exception("unexpected error while replaying the spool")
                    self._retry_at = time.monotonic() + self._backoff.next_delay()

    async def _collect(self) -> list[bytes]:
        assert self._queue is not None
        items: list[bytes] = []
        deadline = time.monotonic() + self.flush_interval
        while len(items) < self.batch_size:
            if self._flushing and items:
                wait = 0.0
            else:
                wait = max(0.0, deadline - time.monotonic())
                if self._flushing:
                    wait = min(wait, 0.02)
            try:
                if wait > 0:
                    items.append(await asyncio.wait_for(self._queue.get(), wait))
                else:
                    items.append(self._queue.get_nowait())
            except (TimeoutError, asyncio.QueueEmpty):
                break
        return items

    async def _send(self, items: list[bytes], *, keep_failed: bool = True) -> DeliveryResult:
        """Deliver `items`; on failure schedule the retry and (with keep_failed) spool what is left."""
        steps = delivery(items, self.spool, self.batch_size)
        try:
            batch = next(steps)
            while True:
                try:
                    answer: httpx.Response | Exception = await self._http.post(
                        "/api/v1/decisions", content=batch_body(batch), headers={"Content-Type": "application/json"}
                    )
                except httpx.HTTPError as exc:
                    answer = exc
                batch = steps.send(answer)
        except StopIteration as done:
            result: DeliveryResult = done.value
        if result.failed:
            if keep_failed:
                await asyncio.to_thread(self.spool.append, result.failed)
            self._retry_at = time.monotonic() + self._backoff.next_delay(result.retry_after)
        else:
            self._backoff.reset()
        return result

    async def _replay(self) -> None:
        self.spool.rotate()
        self._replaying = True
        try:
            for path in self.spool.segments():
                handle = self.spool.claim(path)
                if handle is None:
                    continue
                try:
                    items = self.spool.read(handle)
                    result = await self._send(items, keep_failed=False) if items else DeliveryResult()
                except BaseException:
                    self.spool.release(path, handle, delete=False)
                    raise
                if result.failed and not result.progressed:
                    # Nothing got through: the segment stays as it is rather than being copied anew.
                    self.spool.release(path, handle, delete=False)
                    return
                await asyncio.to_thread(self.spool.append, result.failed)
                self.spool.release(path, handle, delete=True)
                if result.failed:
                    return
        finally:
            self._replaying = False

    async def _idle(self) -> bool:
        if self._in_memory or self._replaying:
            return False
        return not await asyncio.to_thread(self.spool.has_backlog)
