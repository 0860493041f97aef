"""The blindness probe of a route: can a grader tell a refused item's answer from a served one?

Reads the route's pool items (question, answer under review, the decision's passages in rank
order: exactly what a grader is shown) with their origin, and runs `console.stats.blindness`. The
origin is the item's answer source: a shadow run's answer or the logged claim means the decision
was refused; the served answer means it was served. Gold items are left out (their answers are
written by hand).

At most `MAX_ITEMS` items are read, drawn in `queue_key` order (a random order fixed when each item
entered the pool, so the draw is a simple random sample of each origin and the same on every
request); each origin keeps at least half the places when it has that many items. The drawn items
go to the probe in decision order, so its folds depend on the data alone. The reading is
kept in the cache under the route's pool version (count and newest id of its pool items: items are
never edited after entry), so a page load after the first costs one count query.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Count, Max, Q

from console.accounts.models import Route
from console.ledger.compression import decompress_head, head_sql
from console.stats.blindness import (
    MIN_PER_CLASS,
    NO_VARIATION,
    SIGN_WARNING,
    SIGN_WEAK,
    TOO_FEW_ITEMS,
    BlindnessProbe,
    GraderView,
    blindness_probe,
)
from grading.models import AnswerSource, GradingItem

MAX_ITEMS = 2_000
CACHE_SECONDS = 6 * 3600
MAX_PASSAGE_CHARS = 20_000  # of each passage, for the features
REFUSED_SOURCES = (AnswerSource.SHADOW, AnswerSource.CLAIM)


def _pool(route: Route):
    return (
        GradingItem.objects.with_texts().filter(route=route, is_gold=False, decision__isnull=False).exclude(answer="")
    )


def _draw(route: Route, counts: dict[bool, int]) -> list[tuple[int, str, str, bool]]:
    """(decision id, question, answer, refused) for up to MAX_ITEMS items, at most half of them one origin
    unless the other has fewer."""
    refused_take = min(counts[True], max(MAX_ITEMS // 2, MAX_ITEMS - counts[False]))
    served_take = min(counts[False], MAX_ITEMS - refused_take)
    rows = []
    for refused, take in ((False, served_take), (True, refused_take)):
        origin = Q(answer_source__in=REFUSED_SOURCES) if refused else Q(answer_source=AnswerSource.SERVED)
        drawn = _pool(route).filter(origin).order_by("queue_key")[:take]
        rows += [(*row, refused) for row in drawn.values_list("decision_id", "question", "answer")]
    # The folds follow the row order: in ingest order, the same items always give the same reading.
    return sorted(rows)


# The head of each passage: whole for ordinary passages, and 2,000 decisions with very long ones
# (up to 10 x 100k characters each) cannot fill the worker's memory. The table may hold a passage
# deflated, so SQL cuts the stored bytes that hold the head, and Python inflates them.
_PASSAGE_HEADS_SQL = (
    f"SELECT d.id, {head_sql('p.text', MAX_PASSAGE_CHARS)} FROM ledger_decision d "
    "CROSS JOIN LATERAL unnest(d.passage_ids) WITH ORDINALITY AS l(id, position) "
    "JOIN ledger_passage p ON p.id = l.id WHERE d.id = ANY(%s) ORDER BY d.id, l.position"
)


def _passages(decision_ids: list[int]) -> dict[int, list[str]]:
    texts: dict[int, list[str]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(_PASSAGE_HEADS_SQL, [decision_ids])
        for decision_id, head in cursor.fetchall():
            texts[decision_id].append(decompress_head(head, MAX_PASSAGE_CHARS))
    return texts


def route_blindness(route: Route) -> dict[str, Any]:
    """The probe's reading for the route: {"n", "served", "refused", "enough", "reason", "auroc": {"value",
    "low", "high"} or None, "sign", "warning", "features": [{"feature", "weight", "leans"}], "method",
    "message"}. `reason` ("too_few_items", "no_variation") says why `auroc` is None; `sign` is "none",
    "weak" or "warning" when there is a reading (console.stats.blindness.probe_sign)."""
    summary = _pool(route).aggregate(
        served=Count("pk", filter=Q(answer_source=AnswerSource.SERVED)),
        refused=Count("pk", filter=Q(answer_source__in=REFUSED_SOURCES)),
        newest=Max("pk"),
    )
    counts = {False: summary["served"], True: summary["refused"]}
    if min(counts.values()) < MIN_PER_CLASS:  # answered from the counts alone: nothing worth caching
        return _compute(route, counts)
    # The cache is the database's, shared by every worker: a reading is computed once per pool version.
    # v2: documents carry "reason" and "sign"; one cached before them is not read.
    key = f"grading:blindness:v2:{route.pk}:{summary['served']}:{summary['refused']}:{summary['newest']}:{MAX_ITEMS}"
    document = cache.get(key)
    if document is None:
        document = _compute(route, counts)
        cache.set(key, document, CACHE_SECONDS)
    return document


def _compute(route: Route, counts: dict[bool, int]) -> dict[str, Any]:
    if min(counts.values()) < MIN_PER_CLASS:
        probe = BlindnessProbe.too_few(counts[False], counts[True])
    else:
        rows = _draw(route, counts)
        passages = _passages([decision_id for decision_id, *_ in rows])
        views = [
            GraderView(question, answer, tuple(passages.get(decision_id, ())))
            for decision_id, question, answer, _refused in rows
        ]
        probe = blindness_probe(views, [refused for *_, refused in rows])
    document = probe.as_dict()
    document["route"] = route.slug
    document["population"] = {"served": counts[False], "refused": counts[True]}
    document["message"] = _message(document)
    return document


def _message(document: dict[str, Any]) -> str:
    """The reading in words, in one of its states: no figure (and why), the warning, a weak sign, no sign."""
    minimum = document["method"]["min_per_class"]
    if document["reason"] == TOO_FEW_ITEMS:
        return (
            f"Not enough items to probe: {document['served']} served and {document['refused']} refused "
            f"answers in the pool; the probe needs at least {minimum} of each."
        )
    if document["reason"] == NO_VARIATION:
        return (
            "Every item shows graders the same answer form (identical answers, or answers without words, "
            "such as numbers, emoji or punctuation only), so the form cannot give the origin away; "
            "there is nothing to measure and no AUROC is given."
        )
    auroc = document["auroc"]
    reading = f"{auroc['value']:.2f} (interval {auroc['low']:.2f} to {auroc['high']:.2f})"
    if document["sign"] == SIGN_WARNING:
        strongest = "; ".join(f["feature"] for f in document["features"][:3])
        return (
            f"Graders can likely tell refused from served answers by their form: the probe's AUROC is "
            f"{reading}, above 0.6 with confidence. Grades of refused answers may be harsher than blind ones, "
            f"so the false-abstention rate may read too low. Strongest signs: {strongest}."
        )
    if document["sign"] == SIGN_WEAK:
        if auroc["low"] > 0.5:
            return (
                f"A weak sign that the answer's form gives its origin away: the probe's AUROC is {reading}, "
                f"above chance (0.5) but not above 0.6 with confidence. Worth a look at the strongest features."
            )
        return (
            f"A weak sign: the probe's AUROC is {reading}, below chance (0.5). Cross-validation reads a little "
            f"below 0.5 when there is no signal; well below it, the form differs but the model learned it the "
            f"wrong way round."
        )
    return f"No sign that the answer's form gives its origin away: the probe's AUROC is {reading} (0.5 is chance)."
