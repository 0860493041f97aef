"""A stand-in HTTP shadow pipeline on 127.0.0.1 that records what it receives.

`behaviour` decides each reply: "answer" (200 {"answer": ...}), "error" (HTTP 500), "slow"
(sleeps past the client's timeout), "malformed" (200 with a body that is not JSON),
"no_answer" (200 {"text": ...}), "number" (200 {"answer": 42}), "hold" (waits for `release`
before answering, so a test can kill the worker while the pipeline is working).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer(ABC):
    """A threaded HTTP server on 127.0.0.1 for the life of a `with` block. Subclasses give
    `_handler()` (a BaseHTTPRequestHandler class) and the path of `url`; `received` and `release`
    let a test hold a reply while it does something else (kill a worker)."""

    path = "/"

    def __init__(self) -> None:
        self.received = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{self.path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @abstractmethod
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, closing over this server's state."""

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class StandInPipeline(LoopbackServer):
    path = "/answer"

    def __init__(self, behaviour: str = "answer", answer: str = "Stand-in answer.", delay: float = 0.0) -> None:
        self.behaviour = behaviour
        self.answer = answer
        self.delay = delay
        self.requests: list[dict] = []  # {"body": parsed JSON, "headers": {...}}
        super().__init__()

    @property
    def bodies(self) -> list[dict]:
        with self.lock:
            return [request["body"] for request in self.requests]

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                with standin.lock:
                    standin.requests.append({"body": body, "headers": dict(self.headers)})
                behaviour = standin.behaviour
                standin.received.set()
                if behaviour == "hold":
                    standin.release.wait(30)
                    behaviour = "answer"
                elif behaviour == "slow":
                    standin.release.wait(standin.delay or 5)
                elif standin.delay:
                    standin.release.wait(standin.delay)
                replies = {
                    "answer": (200, json.dumps({"answer": standin.answer})),
                    "slow": (200, json.dumps({"answer": "too late"})),
                    "error": (500, "internal error in the stand-in"),
                    "malformed": (200, '{"answer": "unterminated'),
                    "no_answer": (200, json.dumps({"text": "wrong member"})),
                    "number": (200, json.dumps({"answer": 42})),
                }
                status, text = replies[behaviour]
                payload = text.encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (timeout) or was killed
                    pass

        return Handler
