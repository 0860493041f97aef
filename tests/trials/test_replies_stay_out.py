"""A candidate gate's reply is never shown beyond a parsed verdict and a short reason: the trial
page's errors say what was wrong with the reply, not what it said, and one reason covers refused,
unreachable and silent destinations."""

from __future__ import annotations

import socket

import pytest

from console.core import outbound
from console.trials import candidates

SECRET = "root:x:0:0:SECRET-FROM-THE-FAR-SIDE"


@pytest.mark.parametrize(
    "raw",
    [
        SECRET.encode(),
        f'["{SECRET}"]'.encode(),
        f'{{"verdict": "{SECRET}"}}'.encode(),
        f'{{"verdict": "answer", "score": "{SECRET}"}}'.encode(),
        f'{{"verdict": "answer", "citations": "{SECRET}"}}'.encode(),
    ],
)
def test_a_reply_that_breaks_the_contract_is_described_never_quoted(raw):
    with pytest.raises(candidates.CallFailed) as failed:
        candidates.reply_from(raw, {"p1"})
    assert "SECRET" not in str(failed.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_and_a_silent_listener_read_the_same(settings):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        reasons = set()
        for port in (_closed_port(), silent.getsockname()[1]):
            request = candidates.CallRequest(request_id="r", question="q", passages=[], draft_answer="a")
            with pytest.raises(candidates.CallFailed) as failed:
                candidates.call_http(request, url=f"http://127.0.0.1:{port}/", headers={}, timeout_s=0.5)
            reasons.add(str(failed.value))
    assert reasons == {"the candidate could not be reached, or did not answer in time"}


@pytest.mark.parametrize("kind", [outbound.CONNECT, outbound.TIMEOUT, outbound.BROKEN, outbound.MALFORMED])
def test_every_way_of_not_answering_has_one_public_reason(kind):
    error = outbound.OutboundError("connection refused by 10.0.0.5:6379 after 3 ms", kind=kind)
    assert outbound.public_reason(error, "the webhook") == "the webhook could not be reached, or did not answer in time"


def test_an_http_error_says_its_status_and_not_its_body():
    error = outbound.OutboundError(
        "HTTP 500 from the webhook: Traceback ... password=hunter2", kind=outbound.STATUS, status=500
    )
    assert outbound.public_reason(error, "the webhook") == "the webhook answered HTTP 500"
