"""The decision record the tests start from, as the answering system posts it. Free of Django, so
the API fuzzer's hooks (loaded outside the test settings) can start from it too."""

from __future__ import annotations

from typing import Any

BASE_RECORD: dict[str, Any] = {
    "route": "it-support",
    "occurred_at": "2026-11-01T12:00:00Z",
    "question": "How do I reset MFA?",
    "claim": "Open Settings > Security and choose Reset.",
    "gate": {"name": "entailment", "score": 0.62, "cutoff": 0.85},
    "outcome": "refused",
    "served_answer": None,
    "passages": [
        {
            "id": "kb/mfa#2",
            "text": "To reset MFA, open Settings > Security and choose Reset.",
            "retrieval_score": 0.81,
            "rank": 1,
            "source": "runbook",
            "uri": "https://intranet/kb/mfa",
        },
        {
            "id": "kb/vpn#1",
            "text": "The VPN client is installed from the portal.",
            "retrieval_score": 0.42,
            "rank": 2,
            "source": "runbook",
            "uri": "https://intranet/kb/vpn",
        },
    ],
    "versions": {"model": "gen-2026-10", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"},
    "segments": {"query_type": "how-to", "language": "en"},
}
