"""Shadow pipelines: answer a refused question with the gate disabled, on the logged passages.

Every pipeline has the same small interface (`Pipeline`): a name, a version and
`run(request) -> answer`, raising `PipelineError` with a message a person can act on when it
cannot answer. It never invents an answer: a pipeline that fails leaves the run failed.

A route chooses its pipeline in the shadow app's own row of it, `RouteShadowSettings.config`
(no row: none):
- ``{}``: none; refusals of the route get no shadow run.
- ``{"kind": "reference"}``: the built-in extractive pipeline (no model, deterministic).
- ``{"kind": "http", "url": "https://..."}``: the integrator's own pipeline, called over HTTP.

The passages handed to a pipeline are exactly the ones logged with the decision, in rank
order; nothing is retrieved again (re-retrieving against a corpus that has grown since finds
passages the gate never saw, and the false-abstention rate comes out too low). Their checksum is `passages_sha256`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from console.core import outbound
from console.core.errors import InvalidInput
from console.verification.spans import split_claim_units

PIPELINE_KINDS = ("reference", "http")
MAX_ANSWER_CHARS = 20_000  # the same bound as a logged claim or served answer
MAX_URL_CHARS = 2_000
_ERROR_EXCERPT_CHARS = 300


class PipelineError(Exception):
    """The pipeline gave no usable answer; the message says why and is kept on the run."""


@dataclass(frozen=True)
class PipelinePassage:
    id: str
    text: str


@dataclass(frozen=True)
class PipelineRequest:
    request_id: str
    question: str
    passages: tuple[PipelinePassage, ...]

    def payload(self) -> dict[str, Any]:
        """The JSON body an HTTP pipeline receives (README "Shadow evaluation")."""
        return {
            "request_id": self.request_id,
            "question": self.question,
            "passages": passages_payload(self.passages),
            "gate": "disabled",
        }


class Pipeline(Protocol):
    name: str
    version: str

    def run(self, request: PipelineRequest) -> str: ...


def passages_payload(passages: Sequence[PipelinePassage]) -> list[dict[str, str]]:
    return [{"id": passage.id, "text": passage.text} for passage in passages]


def passages_sha256(passages: Sequence[PipelinePassage]) -> str:
    """SHA-256 of the passages handed to a pipeline, as lowercase hex.

    Serialisation: the JSON array ``[{"id": <external id>, "text": <text>}, ...]`` in rank order
    (exactly the ``passages`` member of the HTTP body), written with sorted keys, no whitespace
    (separators ``,`` and ``:``) and non-ASCII characters as themselves (``ensure_ascii=False``),
    encoded as UTF-8. Anyone holding the logged passages (or the body a pipeline received) can
    recompute it with ``json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
    """
    canonical = json.dumps(passages_payload(passages), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def validate_shadow_config(config: Any) -> dict[str, str]:
    """The normalised config, or InvalidInput naming what is wrong."""
    if config in (None, {}):
        return {}
    if not isinstance(config, dict):
        raise InvalidInput("The shadow pipeline config must be an object.", code="invalid_shadow_config")
    kind = config.get("kind")
    if kind == "reference":
        extra = set(config) - {"kind"}
        if extra:
            raise InvalidInput(
                f"The reference pipeline takes no options; got {sorted(extra)}.", code="invalid_shadow_config"
            )
        return {"kind": "reference"}
    if kind == "http":
        extra = set(config) - {"kind", "url"}
        if extra:
            raise InvalidInput(
                f"The HTTP pipeline takes only a url; got {sorted(extra)}.", code="invalid_shadow_config"
            )
        return {"kind": "http", "url": validate_pipeline_url(config.get("url"))}
    raise InvalidInput(
        f'"kind" must be one of {", ".join(PIPELINE_KINDS)}; got {kind!r}.', code="invalid_shadow_config"
    )


def validate_pipeline_url(url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("The HTTP pipeline needs a url.", code="invalid_shadow_config")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise InvalidInput(f"The url is longer than {MAX_URL_CHARS} characters.", code="invalid_shadow_config")
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise InvalidInput(f"Not an http(s) URL: {url!r}.", code="invalid_shadow_config") from None
    problem = outbound.url_problem(url)
    if problem:
        raise InvalidInput(f"The url {problem}.", code="invalid_shadow_config")
    return url


def pipeline_for(config: Any) -> Pipeline | None:
    """The pipeline a route's config names; None for no pipeline. Raises PipelineError if invalid."""
    try:
        config = validate_shadow_config(config)
    except InvalidInput as exc:
        raise PipelineError(f"The route's shadow pipeline config is invalid: {exc.message}") from None
    if not config:
        return None
    if config["kind"] == "reference":
        return ReferencePipeline()
    return HttpPipeline(
        config["url"],
        timeout=settings.SHADOW_HTTP_TIMEOUT_MS / 1000,
        retries=settings.SHADOW_HTTP_RETRIES,
        backoff=settings.SHADOW_HTTP_BACKOFF_MS / 1000,
        auth_header=settings.SHADOW_HTTP_AUTH_HEADER,
    )


# ---------------------------------------------------------------------------------------------
# The built-in extractive reference pipeline

_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it my of on or the this to was what when "
    "where which who why will with you your".split()
)
_REFERENCE_SENTENCES = 2


class ReferencePipeline:
    """Extractive: answers with the passage sentences sharing the most words with the question.

    Sentences are the claim units of `split_claim_units` (the same rule as span verification).
    Each sentence scores the number of distinct non-stopword words (case-folded) it shares with
    the question; the best two with a positive score are returned in reading order (passage rank,
    then position). Ties go to the higher-ranked passage, then the earlier sentence. A sentence
    that occurs more than once (case and runs of white space aside: overlapping chunks, two
    snapshots of one page) is taken at its first occurrence only. When no
    sentence shares a word, the answer is the top-ranked passage's first sentence, which is what
    an answering system with its gate disabled would have leaned on. No passages: PipelineError.

    A stand-in for the demo and tests, whose served answers it writes too. On a route whose served
    answers come from another generator its answers look different (copied sentences), graders can
    tell refused items by their form and the false-abstention rate reads too low: such a route needs
    its own generator with the gate disabled (the HTTP pipeline); the blindness probe shows the leak.
    """

    name = "reference"
    version = "extractive-2"

    def run(self, request: PipelineRequest) -> str:
        sentences = []
        seen: set[str] = set()
        for rank, passage in enumerate(request.passages):
            for position, sentence in enumerate(split_claim_units(passage.text)):
                key = _SPACE.sub(" ", sentence.casefold())
                if key not in seen:  # overlapping chunks share sentences; an answer says each once
                    seen.add(key)
                    sentences.append((rank, position, sentence))
        if not sentences:
            raise PipelineError("No passages (or only empty ones) were logged; there is nothing to answer from.")
        wanted = _content_words(request.question)
        scored = [
            (len(wanted & _content_words(sentence)), rank, position, sentence) for rank, position, sentence in sentences
        ]
        best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1], s[2]))[:_REFERENCE_SENTENCES]
        if not best:
            return sentences[0][2]
        best.sort(key=lambda s: (s[1], s[2]))
        return " ".join(sentence for _, _, _, sentence in best)


def _content_words(text: str) -> set[str]:
    return {word for word in _WORD.findall(text.casefold()) if word not in _STOPWORDS}


# ---------------------------------------------------------------------------------------------
# The HTTP adapter


class HttpPipeline:
    """POSTs the request as JSON to the route's URL and expects ``{"answer": "<text>"}`` back.

    The call goes through the console's one outbound client (`console.core.outbound`: egress
    policy, no redirects, no environment proxies, bounded body). Each try has `timeout` seconds in
    all. Failures to connect, timeouts, broken connections and HTTP 5xx / 408 / 429 are tried again
    after `backoff`, 2 x `backoff`, 4 x `backoff` ... up to `retries` more times (a shadow run
    only reads, so asking twice is harmless); other 4xx, redirects, a refused destination,
    malformed JSON, a missing, non-string, empty or over-long answer fail at once (asking again
    would get the same reply). `auth_header` is "Name: value" and is sent on every request, never
    logged or stored.
    """

    name = "http"
    version = "http-1"

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        auth_header: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "abstention-review-console/shadow",
        }
        if auth_header:
            name, _, value = auth_header.partition(":")
            self.headers[name.strip()] = value.strip()

    def run(self, request: PipelineRequest) -> str:
        body = json.dumps(request.payload(), ensure_ascii=False).encode("utf-8")
        retry = outbound.Retry(tries=self.retries + 1, backoff=self.backoff, on=outbound.IDEMPOTENT)
        try:
            response = outbound.post(
                self.url,
                body,
                headers=self.headers,
                target="the pipeline",
                timeout=self.timeout,
                retry=retry,
                sleep=self.sleep,
            )
        except outbound.OutboundError as exc:
            raise PipelineError(str(exc)) from None
        return _answer_from(response.body)


def _answer_from(raw: bytes) -> str:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PipelineError(f"Malformed JSON in the response ({exc}): {_excerpt(raw)}") from None
    if not isinstance(data, dict) or "answer" not in data:
        raise PipelineError(f'The response has no "answer" member: {_excerpt(raw)}')
    answer = data["answer"]
    if not isinstance(answer, str):
        raise PipelineError(f'"answer" is {type(answer).__name__}, not a string.')
    if not answer.strip():
        raise PipelineError('"answer" is empty.')
    if len(answer) > MAX_ANSWER_CHARS:
        raise PipelineError(f'"answer" has {len(answer)} characters; at most {MAX_ANSWER_CHARS} are kept.')
    if "\x00" in answer:
        raise PipelineError('"answer" contains a NUL character.')
    try:
        answer.encode("utf-8")
    except UnicodeEncodeError:
        raise PipelineError('"answer" contains a lone surrogate and is not valid Unicode text.') from None
    return answer


def _excerpt(raw: bytes) -> str:
    text = raw[:_ERROR_EXCERPT_CHARS].decode("utf-8", "replace").strip()
    return text + ("…" if len(raw) > _ERROR_EXCERPT_CHARS else "")
