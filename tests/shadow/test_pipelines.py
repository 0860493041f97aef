import hashlib
import json

import pytest

from console.core.errors import InvalidInput
from console.shadow.pipelines import (
    HttpPipeline,
    PipelineError,
    PipelinePassage,
    PipelineRequest,
    ReferencePipeline,
    passages_sha256,
    pipeline_for,
    validate_shadow_config,
)
from tests.standin import StandInPipeline

REQUEST = PipelineRequest(
    request_id="q-1",
    question="How do I reset MFA on my phone?",
    passages=(
        PipelinePassage("kb/vpn#1", "The VPN client is installed from the portal."),
        PipelinePassage("kb/mfa#2", "Passwords expire yearly. To reset MFA, open Settings. Your phone must be near."),
    ),
)


def _http(url: str, **kwargs) -> HttpPipeline:
    options = {"timeout": 0.5, "retries": 2, "backoff": 0.0}
    options.update(kwargs)
    return HttpPipeline(url, **options)


def test_the_reference_pipeline_answers_with_the_sentences_sharing_most_words():
    assert ReferencePipeline().run(REQUEST) == "To reset MFA, open Settings. Your phone must be near."


def test_the_reference_pipeline_says_a_sentence_two_passages_share_once():
    """Overlapping chunks (or two snapshots of one page) share sentences: the answer keeps the first
    occurrence, in rank order, and the second-best sentence is a different one."""
    shared = "To reset MFA, open Settings."
    request = PipelineRequest(
        "q-4",
        "How do I reset MFA on my phone?",
        (
            PipelinePassage("kb/mfa#1", f"{shared} Ask the desk."),
            PipelinePassage("kb/mfa#2", f"{shared.upper()}  Your phone must be near."),
            PipelinePassage("kb/mfa#3", f"Passwords expire. {shared}"),
        ),
    )
    assert ReferencePipeline().run(request) == f"{shared} Your phone must be near."


def test_the_reference_pipeline_falls_back_to_the_top_passage_and_never_invents():
    unrelated = PipelineRequest("q-2", "Zebra?", REQUEST.passages)
    assert ReferencePipeline().run(unrelated) == "The VPN client is installed from the portal."
    with pytest.raises(PipelineError, match="nothing to answer from"):
        ReferencePipeline().run(PipelineRequest("q-3", "Anything?", ()))


def test_the_passages_checksum_is_sha256_over_canonical_json_in_rank_order():
    canonical = json.dumps(
        [{"id": "kb/vpn#1", "text": REQUEST.passages[0].text}, {"id": "kb/mfa#2", "text": REQUEST.passages[1].text}],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert passages_sha256(REQUEST.passages) == hashlib.sha256(canonical.encode()).hexdigest()
    assert passages_sha256(REQUEST.passages[::-1]) != passages_sha256(REQUEST.passages)
    assert (
        passages_sha256([PipelinePassage("ä", "Straße")])
        == hashlib.sha256('[{"id":"ä","text":"Straße"}]'.encode()).hexdigest()
    )


@pytest.mark.parametrize(
    "config, expected",
    [
        ({}, {}),
        (None, {}),
        ({"kind": "reference"}, {"kind": "reference"}),
        (
            {"kind": "http", "url": " https://pipeline.internal/answer "},
            {"kind": "http", "url": "https://pipeline.internal/answer"},
        ),
        ({"kind": "http", "url": "http://127.0.0.1:8080/x"}, {"kind": "http", "url": "http://127.0.0.1:8080/x"}),
    ],
)
def test_valid_shadow_configs_are_normalised(config, expected):
    assert validate_shadow_config(config) == expected


@pytest.mark.parametrize(
    "config",
    [
        {"kind": "http"},
        {"kind": "http", "url": "ftp://files/x"},
        {"kind": "http", "url": "not a url"},
        {"kind": "http", "url": "https://x.example/" + "a" * 2000},
        {"kind": "http", "url": "https://user:secret@x.example/answer"},
        {"kind": "http", "url": "https://x.example", "timeout": 3},
        {"kind": "reference", "url": "https://x.example"},
        {"kind": "llm"},
        ["reference"],
    ],
)
def test_invalid_shadow_configs_are_refused_with_a_reason(config):
    with pytest.raises(InvalidInput) as caught:
        validate_shadow_config(config)
    assert caught.value.code == "invalid_shadow_config"


def test_pipeline_for_builds_the_configured_adapter(settings):
    settings.SHADOW_HTTP_TIMEOUT_MS = 1500
    assert pipeline_for({}) is None
    assert pipeline_for({"kind": "reference"}).name == "reference"
    http = pipeline_for({"kind": "http", "url": "http://127.0.0.1:9/x"})
    assert (http.name, http.timeout) == ("http", 1.5)
    with pytest.raises(PipelineError, match="invalid"):
        pipeline_for({"kind": "nope"})


def test_the_http_adapter_posts_the_logged_passages_with_the_gate_disabled():
    with StandInPipeline(answer="Use the portal.") as standin:
        assert _http(standin.url, auth_header="Authorization: Bearer s3cret").run(REQUEST) == "Use the portal."
    [received] = standin.requests
    assert received["body"] == {
        "request_id": "q-1",
        "question": REQUEST.question,
        "gate": "disabled",
        "passages": [{"id": p.id, "text": p.text} for p in REQUEST.passages],
    }
    assert received["headers"]["Authorization"] == "Bearer s3cret"
    assert received["headers"]["Content-Type"] == "application/json"


def test_the_http_adapter_retries_a_500_with_backoff_then_fails_with_the_error():
    pauses = []
    with StandInPipeline("error") as standin:
        with pytest.raises(PipelineError) as caught:
            _http(standin.url, retries=2, backoff=0.25, sleep=pauses.append).run(REQUEST)
    assert len(standin.requests) == 3 and pauses == [0.25, 0.5]
    assert "HTTP 500" in str(caught.value) and "internal error in the stand-in" in str(caught.value)
    assert "gave up after 3 tries" in str(caught.value)


def test_the_http_adapter_gives_up_on_a_pipeline_that_does_not_answer_in_time():
    with StandInPipeline("slow", delay=3) as standin:
        with pytest.raises(PipelineError, match=r"no answer within 0.2 s .*gave up after 2 tries"):
            _http(standin.url, timeout=0.2, retries=1).run(REQUEST)
    assert len(standin.requests) == 2


@pytest.mark.parametrize(
    "behaviour, message",
    [
        ("malformed", "Malformed JSON"),
        ("no_answer", 'no "answer" member'),
        ("number", '"answer" is int, not a string'),
    ],
)
def test_a_reply_that_breaks_the_contract_fails_at_once_without_retry(behaviour, message):
    with StandInPipeline(behaviour) as standin:
        with pytest.raises(PipelineError, match=message):
            _http(standin.url).run(REQUEST)
    assert len(standin.requests) == 1


@pytest.mark.parametrize("answer, message", [("   ", "empty"), ("a\x00b", "NUL"), ("x" * 20_001, "20000")])
def test_unusable_answers_are_failures_not_answers(answer, message):
    with StandInPipeline(answer=answer) as standin:
        with pytest.raises(PipelineError, match=message):
            _http(standin.url).run(REQUEST)


def test_an_unreachable_pipeline_is_a_failure_after_retries():
    with StandInPipeline() as standin:
        url = standin.url
    with pytest.raises(PipelineError, match="could not reach the pipeline.*gave up after 2 tries"):
        _http(url, retries=1).run(REQUEST)
