"""What the sync and the asyncio client share: a decision's wire form, the spool, the retry
schedule, how an ingest answer is read, and the policy cache. Nothing here touches the network:
the two clients drive the same steps with their own httpx client.

Why no retry library: tenacity (and backoff, stamina) retry a call by sleeping in front of it.
The worker here must keep draining the in-memory queue into the spool while the console is down,
so a retry is a point in time the worker checks between batches, not a sleep. What remains of a
library is the delay formula, which is a line (exponential, capped, equal jitter) plus
`Retry-After`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import httpx

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: one process per spool directory
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("abstention_console")

USER_AGENT = "abstention-console-client/0.1.0"
MAX_BATCH = 1000  # the ingest API's limit per call
DEAD_LETTER_FILE = "dead-letters.jsonl"
_SEGMENT_GLOB = "spool-*.jsonl"


class ConsoleError(Exception):
    """Base of every error this client raises."""


class PolicyUnavailable(ConsoleError):
    """No policy could be read for the route: the console did not answer, nothing is cached from
    an earlier answer (in memory or in the spool directory) and no `default_policy` is configured."""


class NoSignedPolicy(PolicyUnavailable):
    """The console answered that the route has no signed policy (404 `no_policy`) and no
    `default_policy` is configured."""


class PolicyRefused(ConsoleError):
    """The console refused to give the policy (401, 403, 404 for the route): a configuration error
    (wrong token, token without access, unknown route), so no fail-safe hides it."""


# -- a decision's wire form ---------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("datetimes in a decision need a timezone (the console stores UTC instants)")
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode_decision(decision: Mapping[str, Any]) -> bytes:
    """The decision as the JSON text that is queued, spooled and sent, fixed at `record()` time
    so a replay sends exactly what was recorded (the console compares content by request_id).

    `route` and `request_id` are required here rather than by a 400 later: without them a retry
    cannot be recognised as one. A missing `occurred_at` is the moment of recording.
    """
    if not isinstance(decision, Mapping):
        raise TypeError(f"a decision is a mapping, not {type(decision).__name__}")
    for key in ("route", "request_id"):
        value = decision.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"a decision needs a non-empty string {key!r}")
    if decision.get("occurred_at") is None:
        decision = {**decision, "occurred_at": datetime.now(UTC).isoformat()}
    text = json.dumps(decision, default=_json_default, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode()


def batch_body(items: list[bytes]) -> bytes:
    return b'{"decisions":[' + b",".join(items) + b"]}"


def route_of(item: bytes) -> str:
    try:
        return str(json.loads(item).get("route"))
    except (ValueError, AttributeError):
        return ""


def request_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Token {token}", "User-Agent": USER_AGENT, "Accept": "application/json"}


def policy_path(route: str) -> str:
    return f"/api/v1/routes/{quote(route, safe='')}/policy"


# -- retry schedule -----------------------------------------------------------------------------


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class Backoff:
    """Exponential delays with equal jitter (half fixed, half random, so clients that failed
    together do not retry together), never shorter than the server's `Retry-After`."""

    base: float = 0.5
    cap: float = 30.0
    max_retry_after: float = 3600.0
    failures: int = 0

    def next_delay(self, retry_after: float | None = None) -> float:
        self.failures += 1
        ceiling = min(self.cap, self.base * 2 ** (self.failures - 1))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def reset(self) -> None:
        self.failures = 0


# -- the spool ----------------------------------------------------------------------------------


class Spool:
    """Decisions waiting for the console, on disk: JSON lines in segment files, each append
    flushed and fsync'd before it returns.

    A client appends to one open segment of its own (locked with flock, so other processes
    sharing the directory leave it alone); a replay rotates it, then claims closed segments one
    at a time (again by flock), sends them and deletes each once all its lines are delivered. A
    crash in the middle of a replay re-sends part of a segment later, which the console answers
    as unchanged (idempotency by request_id), so nothing is stored twice.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._current: IO[bytes] | None = None
        self._claimed: set[Path] = set()

    @property
    def dead_letter_path(self) -> Path:
        return self.directory / DEAD_LETTER_FILE

    def append(self, items: list[bytes]) -> None:
        if not items:
            return
        with self._lock:
            if self._current is None:
                name = f"spool-{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
                handle = open(self.directory / name, "ab")  # noqa: SIM115 - stays open until rotate()
                _lock_file(handle, blocking=True)
                self._current = handle
            self._current.write(b"".join(item + b"\n" for item in items))
            self._current.flush()
            os.fsync(self._current.fileno())

    def rotate(self) -> None:
        """Close the open segment so a replay may take it."""
        with self._lock:
            if self._current is not None:
                self._current.close()
                self._current = None

    def segments(self) -> list[Path]:
        return sorted(self.directory.glob(_SEGMENT_GLOB))

    def claim(self, path: Path) -> IO[bytes] | None:
        """The segment opened and locked for replay, or None when another process holds it or it
        is gone (replayed and deleted by someone else)."""
        try:
            handle = open(path, "rb")  # noqa: SIM115 - released by release()
        except FileNotFoundError:
            return None
        if not _lock_file(handle, blocking=False) or os.fstat(handle.fileno()).st_nlink == 0:
            handle.close()
            return None
        self._claimed.add(path)
        return handle

    def read(self, handle: IO[bytes]) -> list[bytes]:
        items = []
        for line in handle.read().splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                json.loads(line)
            except ValueError:
                # Only a write cut by a crash leaves a broken line, and its record() never returned.
                logger.warning("skipped a torn line in spool segment %s", handle.name)
                continue
            items.append(line)
        return items

    def release(self, path: Path, handle: IO[bytes], *, delete: bool) -> None:
        if delete:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        handle.close()
        self._claimed.discard(path)

    def has_backlog(self) -> bool:
        """Whether anything this client could replay is on disk (segments locked by another live
        process are theirs to replay)."""
        with self._lock:
            if self._current is not None:
                return True
        for path in self.segments():
            if path in self._claimed:
                return True
            handle = self.claim(path)
            if handle is not None:
                self.release(path, handle, delete=False)
                return True
        return False

    def dead_letter(self, items: list[bytes], errors: list[Any], status: int | None) -> None:
        with self._lock, open(self.dead_letter_path, "ab") as handle:
            for item, error in zip(items, errors, strict=True):
                line = json.dumps({"status": status, "error": error, "decision": json.loads(item)}, ensure_ascii=False)
                handle.write(line.encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def forget_after_fork(self) -> None:
        """In a forked child: the open segment and claims are the parent's (closing the inherited
        descriptor would not release its lock, and writing to it would interleave with the parent)."""
        self._lock = threading.Lock()
        self._current = None
        self._claimed = set()

    def close(self) -> None:
        self.rotate()


def _lock_file(handle: IO[bytes], *, blocking: bool) -> bool:
    if fcntl is None:  # pragma: no cover
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def default_spool_dir(url: str, token: str) -> Path:
    """Per console and token under the user's state directory: it must outlive a reboot, which
    a temporary directory does not."""
    import hashlib

    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    key = hashlib.sha256(f"{url}\0{token}".encode()).hexdigest()[:16]
    return Path(state) / "abstention-console" / key


# -- reading an ingest answer -------------------------------------------------------------------

_RETRY_STATUSES = {408, 425, 429}


@dataclass
class DeliveryResult:
    delivered: int = 0
    dead_lettered: int = 0
    failed: list[bytes] = field(default_factory=list)  # to keep (spool) and send again later
    retry_after: float | None = None

    @property
    def progressed(self) -> bool:
        return bool(self.delivered or self.dead_lettered)


def _item_errors(response: httpx.Response, size: int) -> dict[int, list[Any]]:
    """The per-item problems of a 400/409 answer, by index in the batch sent."""
    try:
        details = response.json().get("error", {}).get("details")
    except (ValueError, AttributeError):
        return {}
    by_index: dict[int, list[Any]] = {}
    if isinstance(details, list):
        for detail in details:
            index = detail.get("index") if isinstance(detail, dict) else None
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < size:
                by_index.setdefault(index, []).append(detail)
    return by_index


def _error_of(response: httpx.Response) -> Any:
    try:
        return response.json().get("error")
    except (ValueError, AttributeError):
        return {"message": response.text[:500]}


def _split(batch: list[bytes]) -> list[list[bytes]]:
    """By route when the batch spans several (a token may ingest into some only), else in halves."""
    by_route: dict[str, list[bytes]] = {}
    for item in batch:
        by_route.setdefault(route_of(item), []).append(item)
    if len(by_route) > 1:
        return list(by_route.values())
    middle = len(batch) // 2
    return [batch[:middle], batch[middle:]]


def delivery(
    items: list[bytes], spool: Spool, batch_size: int = MAX_BATCH
) -> Generator[list[bytes], httpx.Response | Exception, DeliveryResult]:
    """The steps of delivering `items`: yields each batch to POST, is sent the answer (or the
    transport error), returns what was delivered and what must wait.

    - 2xx: delivered (the console stores new request_ids and answers repeats as unchanged).
    - no answer, 5xx, 408, 425, 429, 401, 404: the console is down, busy or misconfigured; the
      batch and everything not yet sent wait for a retry (`Retry-After` honoured). Nothing is
      dropped for a problem that is not the decision's own.
    - 400 or 409 naming items by index: those items go to the dead-letter file with the
      console's reasons (logged), the rest are sent again at once (nothing of the batch was
      written). Without indexes, or on 413 or 403, the batch is split (by route, else in
      halves) until the bad item stands alone and is dead-lettered.
    """
    result = DeliveryResult()
    pending = [items[i : i + batch_size] for i in range(0, len(items), batch_size)]
    pending.reverse()
    while pending:
        batch = pending.pop()
        answer = yield batch
        if isinstance(answer, Exception):
            logger.warning("console unreachable (%s); %d decision(s) wait for a retry", answer, len(batch))
            result.failed = batch + [item for rest in reversed(pending) for item in rest]
            return result
        status = answer.status_code
        if 200 <= status < 300:
            result.delivered += len(batch)
            continue
        if status >= 500 or status in _RETRY_STATUSES or status in (401, 404):
            level = logging.ERROR if status in (401, 404) else logging.WARNING
            logger.log(level, "console answered %d; %d decision(s) wait for a retry", status, len(batch))
            result.failed = batch + [item for rest in reversed(pending) for item in rest]
            result.retry_after = parse_retry_after(answer.headers.get("Retry-After"))
            return result
        bad = _item_errors(answer, len(batch)) if status in (400, 409, 422) else {}
        if bad:
            _dead_letter(spool, [batch[i] for i in sorted(bad)], [bad[i] for i in sorted(bad)], status, result)
            rest = [item for i, item in enumerate(batch) if i not in bad]
            if rest:
                pending.append(rest)
        elif len(batch) > 1:
            pending.extend(reversed(_split(batch)))
        else:
            _dead_letter(spool, batch, [_error_of(answer)], status, result)
    return result


def _dead_letter(spool: Spool, items: list[bytes], errors: list[Any], status: int, result: DeliveryResult) -> None:
    spool.dead_letter(items, errors, status)
    result.dead_lettered += len(items)
    for item, error in zip(items, errors, strict=True):
        logger.error(
            "console refused decision %s (%d): %s; kept in %s",
            item[:120].decode(errors="replace"),
            status,
            json.dumps(error)[:300],
            spool.dead_letter_path,
        )


# -- the policy cache ---------------------------------------------------------------------------


PolicyDefault = Mapping[str, Any] | Callable[[str], Mapping[str, Any]] | None


@dataclass
class _CachedPolicy:
    etag: str | None
    policy: dict[str, Any]
    checked_at: float


class PolicyCache:
    """The last policy read per route, in memory and (with a spool directory) on disk, so a
    restarted process still has its last known policy when the console is down.

    Fail-safe, in order, when the console cannot answer (no connection, timeout, 5xx, 429): the
    last known policy of the route; else `default_policy` (a mapping, or a function of the route);
    else `PolicyUnavailable`. A 404 `no_policy` answers the default or raises `NoSignedPolicy`.
    401, 403 and other refusals raise `PolicyRefused`: a wrong token must not pass silently.
    """

    def __init__(self, directory: Path | None, default_policy: PolicyDefault, ttl: float) -> None:
        self.directory = directory / "policies" if directory is not None else None
        self.default_policy = default_policy
        self.ttl = ttl
        self._entries: dict[str, _CachedPolicy] = {}
        self._lock = threading.Lock()

    def fresh(self, route: str) -> dict[str, Any] | None:
        entry = self._entry(route)
        if entry is not None and self.ttl > 0 and time.monotonic() - entry.checked_at < self.ttl:
            return dict(entry.policy)
        return None

    def headers(self, route: str) -> dict[str, str]:
        entry = self._entry(route)
        return {"If-None-Match": entry.etag} if entry is not None and entry.etag else {}

    def answer(self, route: str, response: httpx.Response | Exception) -> dict[str, Any]:
        if isinstance(response, Exception):
            return self._fallback(route, f"console unreachable: {response}")
        status = response.status_code
        if status == 200:
            policy = response.json()
            entry = _CachedPolicy(response.headers.get("ETag"), policy, time.monotonic())
            with self._lock:
                self._entries[route] = entry
            self._store(route, entry)
            return dict(policy)
        if status == 304:
            entry = self._entry(route)
            if entry is None:  # an ETag we did not send; read again without it
                return self._fallback(route, "304 without a cached policy")
            entry.checked_at = time.monotonic()
            return dict(entry.policy)
        error = _error_of(response) or {}
        code = error.get("code") if isinstance(error, dict) else None
        if status == 404 and code == "no_policy":
            default = self._default(route)
            if default is not None:
                return default
            raise NoSignedPolicy(f"route {route!r} has no signed policy and no default_policy is configured")
        if status >= 500 or status in _RETRY_STATUSES:
            return self._fallback(route, f"console answered {status}")
        message = error.get("message") if isinstance(error, dict) else None
        raise PolicyRefused(f"the console refused the policy of {route!r}: {status} {code}: {message}")

    def _fallback(self, route: str, reason: str) -> dict[str, Any]:
        entry = self._entry(route)
        if entry is not None:
            version = entry.policy.get("version")
            logger.warning("%s; using the last known policy of %r (version %s)", reason, route, version)
            return dict(entry.policy)
        default = self._default(route)
        if default is not None:
            logger.warning("%s; using the configured default policy for %r", reason, route)
            return default
        raise PolicyUnavailable(f"{reason}; no policy of {route!r} is known and no default_policy is configured")

    def _default(self, route: str) -> dict[str, Any] | None:
        if self.default_policy is None:
            return None
        if callable(self.default_policy):
            return dict(self.default_policy(route))
        return dict(self.default_policy)

    def _entry(self, route: str) -> _CachedPolicy | None:
        with self._lock:
            entry = self._entries.get(route)
        if entry is None and self.directory is not None:
            entry = self._load(route)
            if entry is not None:
                with self._lock:
                    entry = self._entries.setdefault(route, entry)
        return entry

    def _file(self, route: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{quote(route, safe='')}.json"

    def _load(self, route: str) -> _CachedPolicy | None:
        try:
            stored = json.loads(self._file(route).read_text())
            return _CachedPolicy(stored["etag"], stored["policy"], float("-inf"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, route: str, entry: _CachedPolicy) -> None:
        if self.directory is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            target = self._file(route)
            partial = target.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
            partial.write_text(json.dumps({"etag": entry.etag, "policy": entry.policy}))
            os.replace(partial, target)
        except OSError as exc:
            logger.warning("could not keep the policy of %r on disk: %s", route, exc)
