"""A stand-in for the console's ingest and policy endpoints, reachable through httpx's
MockTransport or a real local HTTP server that can be stopped and started again on its port.
Nothing of the server's code is imported: the client is tested against the API as documented."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

Answer = tuple[int, dict[str, str], bytes]


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode()


class FakeConsole:
    """Ingest with the console's rules that the client relies on: all or nothing per batch, 400
    naming bad items by index, idempotent by (route, request_id), 409 on different content."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], str] = {}
        self.records: dict[str, dict[str, Any]] = {}  # request_id -> the decision as first stored
        self.accepted: Counter[str] = Counter()  # request_id -> times sent in a batch that was accepted
        self.batches: list[int] = []  # sizes of accepted batches
        self.attempts: list[float] = []  # time of every ingest request
        self.forced: list[Answer] = []  # answers given before any real handling, first first
        self.max_items: int | None = None
        self.hang: threading.Event | None = None
        self.policies: dict[str, dict[str, Any]] = {}
        self.policy_requests: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        if self.hang is not None:
            self.hang.wait(30)
        if headers.get("authorization") != "Token secret":
            return _json(401, {"error": {"code": "not_authenticated", "message": "no", "details": None}})
        if method == "POST" and path == "/api/v1/decisions":
            return self._ingest(body)
        if method == "GET" and path.startswith("/api/v1/routes/") and path.endswith("/policy"):
            return self._policy(path.split("/")[4], headers)
        return _json(404, {"error": {"code": "not_found", "message": path, "details": None}})

    def _ingest(self, body: bytes) -> Answer:
        with self.lock:
            self.attempts.append(time.monotonic())
            if self.forced:
                return self.forced.pop(0)
            items = json.loads(body)["decisions"]
            if self.max_items is not None and len(items) > self.max_items:
                return _json(413, {"error": {"code": "too_large", "message": "too many", "details": None}})
            details = [
                {"index": i, "field": "question", "code": "required", "message": "is required"}
                for i, item in enumerate(items)
                if not item.get("question")
            ]
            if details:
                return _json(400, {"error": {"code": "invalid", "message": "bad", "details": details}})
            conflicts = []
            for i, item in enumerate(items):
                key = (item["route"], item["request_id"])
                digest = hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()
                if key in self.stored and self.stored[key] != digest:
                    conflicts.append({"index": i, "request_id": item["request_id"], "message": "differs"})
            if conflicts:
                return _json(409, {"error": {"code": "conflict", "message": "differs", "details": conflicts}})
            created = 0
            for item in items:
                key = (item["route"], item["request_id"])
                if key not in self.stored:
                    created += 1
                    self.records[item["request_id"]] = item
                    self.stored[key] = hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()
                self.accepted[item["request_id"]] += 1
            self.batches.append(len(items))
            return _json(201, {"created": created, "unchanged": len(items) - created})

    def _policy(self, slug: str, headers: dict[str, str]) -> Answer:
        self.policy_requests.append(headers)
        policy = self.policies.get(slug)
        if policy is None:
            return _json(404, {"error": {"code": "no_policy", "message": "none signed", "details": None}})
        etag = '"' + hashlib.sha256(json.dumps(policy).encode()).hexdigest()[:16] + '"'
        if headers.get("if-none-match") == etag:
            return 304, {"ETag": etag}, b""
        return _json(200, policy, {"ETag": etag})

    def transport(self, *, down: Callable[[], bool] = lambda: False) -> httpx.MockTransport:
        def handler(request: httpx.Request) -> httpx.Response:
            if down():
                raise httpx.ConnectError("connection refused", request=request)
            status, headers, body = self.handle(
                request.method, request.url.path, {k.lower(): v for k, v in request.headers.items()}, request.read()
            )
            return httpx.Response(status, headers=headers, content=body)

        return httpx.MockTransport(handler)


class LocalServer:
    """The fake console behind a real socket on 127.0.0.1, stoppable and restartable on one port."""

    def __init__(self, console: FakeConsole) -> None:
        self.console = console
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        console = self.console

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, out_headers, out = console.handle(self.command, self.path, headers, body)
                self.send_response(status)
                for name, value in out_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@pytest.fixture
def fake() -> FakeConsole:
    return FakeConsole()


@pytest.fixture
def server(fake: FakeConsole) -> Iterator[LocalServer]:
    local = LocalServer(fake)
    local.start()
    yield local
    local.stop()


def _decision(n: int, **overrides: Any) -> dict[str, Any]:
    return {
        "request_id": f"q-{n:05d}",
        "route": "it-support",
        "occurred_at": "2026-11-01T12:00:00Z",
        "question": f"How do I reset password {n}?",
        "claim": "Use the self-service portal.",
        "gate": {"name": "nli", "score": 0.42, "cutoff": 0.5},
        "outcome": "refused",
        **overrides,
    }


def _wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture
def decision() -> Callable[..., dict[str, Any]]:
    """A valid ingest record numbered n."""
    return _decision


@pytest.fixture
def wait_until() -> Callable[..., bool]:
    return _wait_until
