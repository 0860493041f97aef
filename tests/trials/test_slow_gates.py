"""A candidate gate that answers one byte at a time is cut off at the call's `timeout_s`, the
deadline of the whole call, not of each read: a gate that sent a byte every 1.5 s held one call
205 s with `timeout_s` 5 while only each read was bounded."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from console.trials import candidates

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"


class DrippingGate:
    """A listener on loopback that answers every connection with a status line and headers, then
    one byte of body every `every` seconds, for as long as the caller stays or `for_at_most` seconds
    (then it hangs up, so that a caller with no deadline ends too, late)."""

    def __init__(self, every: float = 0.5, for_at_most: float = 8.0) -> None:
        self.every, self.for_at_most = every, for_at_most
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                try:
                    connection.sendall(_HEAD)
                    until = time.monotonic() + self.for_at_most
                    while not self.stopping.wait(self.every) and time.monotonic() < until:
                        connection.sendall(b" ")
                except OSError:  # the caller hung up: what a deadline does
                    pass

    def __enter__(self) -> DrippingGate:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.listener.close()


def test_a_gate_dripping_a_byte_every_half_second_is_cut_off_at_timeout_s():
    request = candidates.CallRequest(request_id="r", question="q", passages=[], draft_answer="a")
    with DrippingGate(every=0.5) as gate:
        started = time.monotonic()
        with pytest.raises(candidates.CallFailed):
            candidates.call_http(request, url=gate.url, headers={}, timeout_s=1.5)
        elapsed = time.monotonic() - started
    # Every read gets its byte within 0.5 s, well inside 1.5 s: only a deadline on the whole call
    # ends it, at 1.5 s; bounded per read, it would last as long as the gate keeps dripping (8 s).
    # The upper bound leaves room for a loaded machine and still tells the two apart.
    assert 1.4 < elapsed < 6.0, elapsed
