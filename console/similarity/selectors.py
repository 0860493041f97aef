"""Reads of the similarity app: a route's active vector space, nearest refusals, gap runs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from console.accounts import permissions
from console.accounts.models import Route
from console.core.replica import read_connection, replica_reads
from console.ledger.models import Decision, Outcome
from console.similarity import topics
from console.similarity.hooks import cluster_figures, neighbour_facts
from console.similarity.models import GapCluster, GapRun
from console.similarity.spaces import Space, active_space_and_vector
from console.similarity.spaces import active_space as active_space  # read by the views, the bench and tests


@dataclass
class Neighbour:
    decision: Decision
    similarity: float
    # Facts that apps above similarity registered (console/similarity/hooks.py), by name: "label"
    # (final label, "correct" | "incorrect") and "dispute" ({"status", "count"}); a name is present
    # only when the reader may see that fact, and its value is None when nothing is known.
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimilarRefusals:
    space: Space | None
    neighbours: list[Neighbour] = field(default_factory=list)
    has_vector: bool = False
    # "refused N times in 30 days in similar form": refusals within the window at or above the threshold
    similar_form_count: int = 0
    similar_form_capped: bool = False  # the count reached the search depth; the true count may be higher
    threshold: float = 0.0
    days: int = 30
    facts: tuple[str, ...] = ()  # the names of the facts each neighbour carries
    # Why there are no neighbours to give, when that is known in advance: NO_SPACE, NO_VECTOR or ZERO_VECTOR.
    reason: str | None = None


NO_SPACE = "no_vectors"  # the route has no question vectors yet
NO_VECTOR = "no_vector"  # the decision has none (sent without one, or not embedded yet)
# The decision's vector is all zeros: its question has no word or word piece the built-in embedder
# learnt (numbers, punctuation or emoji only), or the integrator sent zeros. A zero vector has no
# direction, so its cosine with anything is undefined (pgvector answers NaN).
ZERO_VECTOR = "zero_vector"


def is_zero_vector(text: str) -> bool:
    """Whether a vector in pgvector's text form ("[0,-0,0]") is all zeros: any other number's
    decimal form has a digit from 1 to 9."""
    return not any(digit in text for digit in "123456789")


def _nearest_sql(space: Space, outcome: str | None, *, literal: str, exclude: int, k: int) -> tuple[str, list, int]:
    """The nearest-k query of a walk, its parameters, and the candidates it asks the graph for.

    Refusals go through the space's HNSW index, whose expression the query repeats. A graph on the
    leading components (`space.graph_dimension`) gives its nearest max(SIMILARITY_GRAPH_CANDIDATES,
    2 x k) by those, and the outer query re-ranks them by the whole vector: the graph's order is
    approximate, its candidates hold the whole vector's nearest (bench/README.md). Other outcomes
    are an exact scan of the space."""
    dimension = int(space.dimension)
    expression = f"vector::halfvec({dimension})"
    where = space.refused_predicate if outcome == Outcome.REFUSED else space.predicate
    extra, extra_params = "", []
    if outcome not in (None, Outcome.REFUSED):
        extra, extra_params = " AND decision_id IN (SELECT id FROM ledger_decision WHERE outcome = %s)", [outcome]
    graphed = int(space.graph_dimension or dimension)
    if outcome == Outcome.REFUSED and graphed < dimension:
        # pgvector's hnsw.ef_search, which must cover the candidates, stops at 1,000.
        candidates = max(k, min(1000, max(settings.SIMILARITY_GRAPH_CANDIDATES, 2 * k)))
        prefix = f"subvector(%s::halfvec({dimension}), 1, {graphed})::halfvec({graphed})"
        sql = (
            f"SELECT decision_id, {expression} <=> %s::halfvec({dimension}) AS distance, occurred_at FROM ("
            f"SELECT decision_id, vector, occurred_at FROM similarity_questionvector "
            f"WHERE {where} AND decision_id <> %s "
            f"ORDER BY subvector(vector, 1, {graphed})::halfvec({graphed}) <=> {prefix} LIMIT %s"
            f") AS graphed ORDER BY distance LIMIT %s"
        )
        return sql, [literal, exclude, literal, candidates, k], candidates
    sql = (
        f"SELECT decision_id, {expression} <=> %s::halfvec({dimension}) AS distance, occurred_at "
        f"FROM similarity_questionvector WHERE {where} AND decision_id <> %s{extra} "
        f"ORDER BY {expression} <=> %s::halfvec({dimension}) LIMIT %s"
    )
    return sql, [literal, exclude, *extra_params, literal, k], k


def _literal(query: np.ndarray | str) -> str:
    if isinstance(query, str):  # already pgvector's text form, as read from the table
        return query
    return "[" + ",".join(repr(float(x)) for x in np.asarray(query, dtype=np.float32)) + "]"


def _walk(
    space: Space,
    query: np.ndarray | str,
    *,
    exclude: int,
    k: int,
    outcome: str | None,
    ef_search: int | None = None,
) -> list[tuple[int, float, datetime]]:
    sql, params, candidates = _nearest_sql(space, outcome, literal=_literal(query), exclude=exclude, k=k)
    with read_connection().cursor() as cursor:
        _set_ef_search(cursor, int(max(ef_search or settings.SIMILARITY_EF_SEARCH, candidates)))
        cursor.execute(sql, params)
        # A zero vector's distance to anything is NaN, which PostgreSQL sorts after every number:
        # dropping those rows here loses no neighbour that a number would have placed in the k.
        return [(row[0], 1.0 - float(row[1]), row[2]) for row in cursor.fetchall() if not math.isnan(row[1])]


def _set_ef_search(cursor, value: int) -> None:
    """hnsw.ef_search bounds how many candidates HNSW returns: at least k, and enough for recall.

    Outside a transaction it is set for the session and only when the connection holds another
    value, remembered on the database connection itself (a new connection starts unset): a lookup
    then costs one round trip instead of four (BEGIN, SET LOCAL, the query, COMMIT), which is most
    of its cost on a busy machine. Inside a transaction it is SET LOCAL, which ends with it (a
    session SET made there would be undone by a rollback behind the remembered value's back).
    """
    connection = cursor.db
    connection.ensure_connection()
    raw = connection.connection
    if connection.in_atomic_block:
        cursor.execute(f"SET LOCAL hnsw.ef_search = {value}")
    elif getattr(raw, "_console_ef_search", None) != value:
        cursor.execute(f"SET hnsw.ef_search = {value}")
        raw._console_ef_search = value


def nearest(
    space: Space,
    query: np.ndarray | str,
    *,
    exclude: int = 0,
    k: int = 10,
    outcome: str | None = Outcome.REFUSED,
    ef_search: int | None = None,
) -> list[tuple[int, float]]:
    """(decision id, cosine similarity) of the k nearest vectors of the space, nearest first.
    Refusals go through the space's HNSW index; other outcomes are an exact scan of the route."""
    found = _walk(space, query, exclude=exclude, k=k, outcome=outcome, ef_search=ef_search)
    return [(pk, similarity) for pk, similarity, _ in found]


@replica_reads()
def similar_refusals(
    decision: Decision,
    *,
    k: int = 10,
    outcome: str | None = Outcome.REFUSED,
    now: datetime | None = None,
    facts: tuple[str, ...] = (),
) -> SimilarRefusals:
    """The k questions of the decision's route nearest to its own, and how often the route
    refused one in similar form (cosine >= SIMILARITY_SAME_FORM_MIN) in the last 30 days; each
    neighbour with the registered `facts` asked for (the caller checks who may read which).

    Every query names the decision's route (or an embedder version of that route), so another
    route's decisions can never appear.

    The 30-day count reads the refusals nearest the question, nearest first: while they are all
    in similar form, more may follow, so a first walk of k that ends at or above the threshold is
    followed by one of SIMILARITY_SAME_FORM_DEPTH; otherwise every refusal in similar form is
    among the k already found (as far as the approximate index finds them at all). The walks
    return each neighbour's date from the vector table, so the count costs no other query.
    """
    # The vector comes as pgvector's text form and goes back into the query so, never parsed into floats.
    space, own = active_space_and_vector(decision.route, decision.pk)
    result = SimilarRefusals(space=space, threshold=settings.SIMILARITY_SAME_FORM_MIN, facts=tuple(facts))
    if space is None or own is None:
        result.reason = NO_SPACE if space is None else NO_VECTOR
        return result
    result.has_vector = True
    if is_zero_vector(own):
        result.reason = ZERO_VECTOR
        return result
    pool = _walk(space, own, exclude=decision.pk, k=k, outcome=Outcome.REFUSED)
    found = pool if outcome == Outcome.REFUSED else _walk(space, own, exclude=decision.pk, k=k, outcome=outcome)
    depth = settings.SIMILARITY_SAME_FORM_DEPTH
    if len(pool) == k and pool[-1][1] >= result.threshold and depth > k:
        pool = _walk(space, own, exclude=decision.pk, k=depth, outcome=Outcome.REFUSED, ef_search=depth)
    since = (now or timezone.now()) - timedelta(days=result.days)
    close = [at for _, similarity, at in pool if similarity >= result.threshold]
    result.similar_form_count = sum(1 for at in close if at >= since)
    result.similar_form_capped = len(close) == len(pool) == max(depth, k)
    wanted = neighbour_facts(result.facts)
    annotations = {key: expression for fact in wanted for key, expression in fact.annotations().items()}
    by_id = (
        Decision.objects.select_related("support")
        .only(
            "pk",
            "route_id",
            "request_id",
            "occurred_at",
            "outcome",
            "question",
            "support__status",
            "support__no_supporting_passage",
        )
        .annotate(**annotations)
        .in_bulk([pk for pk, _, _ in found])
    )
    result.neighbours = [
        Neighbour(by_id[pk], similarity, {fact.name: fact.read(by_id[pk]) for fact in wanted})
        for pk, similarity, _ in found
        if pk in by_id
    ]
    return result


def neighbour_fact_names(user, route: Route) -> tuple[str, ...]:
    """The facts about similar decisions this user may read: dispute status for whoever reads the
    route's disputes; the final label only for readers of its statistics (a `reader` reads refusals
    and disputes, never grades)."""
    names = []
    if permissions.can_read_disputes(user, route):
        names.append("dispute")
    if permissions.can_read_stats(user, route):
        names.append("label")
    return tuple(names)


def similar_refusals_for_user(user, decision: Decision, *, k: int = 10, outcome: str | None = Outcome.REFUSED):
    """Similar decisions for one user, with the facts that user may read; None when the user may
    not see other decisions of the route (graders never do; people without an account never get here)."""
    if not permissions.can_read_similar(user, decision.route):
        return None
    return similar_refusals(decision, k=k, outcome=outcome, facts=neighbour_fact_names(user, decision.route))


def similar_refusals_context(user, decision: Decision) -> dict[str, Any]:
    """The "similar refusals" panel of a refusal's page and of its dispute form."""
    return {"similar": similar_refusals_for_user(user, decision)}


@replica_reads()
def latest_gap_run(route: Route) -> GapRun | None:
    return GapRun.objects.filter(route=route).order_by("-computed_at", "-pk").first()


# Why a route's corpus gaps list no cluster (`gaps_reason`).
GAPS_NOT_COMPUTED = "not_computed"  # no run yet (the route may have no question vectors yet)
GAPS_NO_REFUSALS = "no_refusals"  # no refusal with a vector in the run's window
GAPS_TOO_FEW = "too_few_refusals"  # fewer than topics.MIN_REFUSALS: no group can form
GAPS_NO_GROUPS = "no_groups"  # enough refusals, but none close enough to others to form a group


def gaps_reason(run: GapRun | None, clusters: list[GapCluster]) -> str | None:
    """Why there is no cluster to show; None when there is one."""
    if run is None:
        return GAPS_NOT_COMPUTED
    if clusters:
        return None
    if run.refusals == 0:
        return GAPS_NO_REFUSALS
    if run.refusals < topics.MIN_REFUSALS:
        return GAPS_TOO_FEW
    return GAPS_NO_GROUPS


@replica_reads()
def gap_clusters(run: GapRun) -> list[GapCluster]:
    """The run's clusters by rank, each with `graded` and `correct_share` (members with a final
    label and the share graded correct-when-answered; None when none is graded) from the figures
    that apps above this one register."""
    clusters = list(run.clusters.defer("decision_ids").order_by("rank"))
    figures = cluster_figures(run.pk)
    for cluster in clusters:
        labels = figures.get(cluster.pk, {})
        cluster.graded = labels.get("graded", 0)
        cluster.correct_share = labels.get("correct_share")
    return clusters


@replica_reads()
def cluster_refusals(cluster: GapCluster, *, limit: int = 200) -> list[Decision]:
    return list(
        Decision.objects.filter(pk__in=cluster.decision_ids)
        .select_related("support")
        .order_by("-occurred_at", "-pk")[:limit]
    )
