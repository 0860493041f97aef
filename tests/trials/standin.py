"""A stand-in candidate gate on 127.0.0.1 whose replies are planted per request id and repeat.

`plan[request_id]` lists one reply per call in the order the calls arrive: a verdict
("answer", "abstain", ...), or a failure: "500", "malformed", "unknown" (a verdict outside the
contract), "cite-unknown" (cites a passage that was not sent), "slow" (answers after the client
gave up). With `hold_first`, the first call waits for `release` before replying. Every received
body is kept, so a test can count calls per request id.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

from console.stats.trials import VERDICTS
from tests.standin import LoopbackServer


class StandInCandidate(LoopbackServer):
    path = "/gate"

    def __init__(
        self, plan: dict[str, list[str]], *, delay: float = 0.0, slow_seconds: float = 1.0, hold_first: bool = False
    ) -> None:
        self.plan = plan
        self.hold_first = hold_first  # the first call waits for `release` (a test kills the worker meanwhile)
        self.delay = delay
        self.slow_seconds = slow_seconds
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        super().__init__()

    def calls_per_request(self) -> Counter:
        with self.lock:
            return Counter(body["request_id"] for body in self.bodies)

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode("utf-8"))
                with standin.lock:
                    index = sum(1 for b in standin.bodies if b["request_id"] == body["request_id"])
                    standin.bodies.append(body)
                    standin.headers.append(dict(self.headers))
                if standin.hold_first and not standin.received.is_set():
                    standin.received.set()
                    standin.release.wait(30)
                planned = standin.plan.get(body["request_id"], ["abstain"])
                reply = planned[index % len(planned)]
                if standin.delay:
                    time.sleep(standin.delay)
                sent = [p["id"] for p in body["passages"]]
                if reply in VERDICTS:
                    status, text = 200, json.dumps({"verdict": reply, "score": 0.5, "citations": sent[:1]})
                elif reply == "500":
                    status, text = 500, "boom"
                elif reply == "malformed":
                    status, text = 200, '{"verdict": "answer"'
                elif reply == "unknown":
                    status, text = 200, json.dumps({"verdict": "refuse"})
                elif reply == "cite-unknown":
                    status, text = 200, json.dumps({"verdict": "answer", "citations": ["kb/not-sent"]})
                elif reply == "slow":
                    time.sleep(standin.slow_seconds)
                    status, text = 200, json.dumps({"verdict": "answer"})
                else:
                    raise AssertionError(reply)
                payload = text.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

        return Handler
