"""The content hash and the passages' content keys are the SHA-256 of the same JSON text as when
they were first written with `json.dumps`: stored hashes decide whether a replay is unchanged, so
a faster way of writing that text must give it byte for byte."""

from __future__ import annotations

import hashlib
import json

from console.ledger.validation import validate_batch
from tests.factories import record


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def reference_hashes(item) -> tuple[str, list[str]]:
    """The hashes as json.dumps wrote them before (the decision's, and each passage's content key)."""
    corpus = item.versions.get("corpus", "")
    keys = [_sha(json.dumps([item.route, p.external_id, corpus, _sha(p.text), p.source, p.uri])) for p in item.passages]
    passages = [
        [
            _sha(json.dumps([p.external_id, corpus, _sha(p.text), p.source, p.uri])),
            p.rank,
            p.retrieval_score,
            p.embedding,
        ]
        for p in item.passages
    ]
    canonical = [
        item.route,
        item.request_id,
        item.occurred_at.isoformat(timespec="microseconds"),
        item.question,
        item.claim,
        item.gate_name,
        item.gate_score,
        item.cutoff,
        item.outcome,
        item.served_answer,
        item.versions,
        item.segments,
        passages,
    ]
    return _sha(json.dumps(canonical, sort_keys=True, separators=(",", ":"))), keys


AWKWARD = ['quote " and back\\slash', "tab\tnew\nline", "é ü 中文 😀", "\x01\x1f\u2028", "", "plain"]


def test_hashes_are_those_json_dumps_gave_for_awkward_text():
    records = []
    for text in AWKWARD:
        rec = record(
            request_id=f"awkward-{text}", versions={"model": "m", "corpus": text or "c"}, segments={"s": text, "n": 3.5}
        )
        rec["passages"] = [
            {"id": f"doc/{text}#{rank}", "text": f"{text} passage {rank}", "rank": rank, "source": text, "uri": text}
            for rank in (2, 1)
        ]
        records.append(rec)
    items, errors = validate_batch(records)
    assert not errors
    for item in items:
        expected_hash, expected_keys = reference_hashes(item)
        assert item.content_hash == expected_hash
        assert [p.content_key for p in item.passages] == expected_keys
