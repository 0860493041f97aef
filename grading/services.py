"""Writes of blind grading: the pool, leases, grades, final labels. One transaction each, with its audit.

The queue is a table scan in `queue_key` order. `queue_key` is drawn at random when an item enters
the pool and never changes, so the items graded at any moment are a simple random sample of their
stratum (the statistics rely on it), and served and refused items come interleaved.
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.accounts import permissions
from console.errors import Conflict, Forbidden, InvalidInput
from console.ledger.models import Decision, Outcome, Route
from console.shadow.models import ShadowRun, ShadowStatus
from grading.models import (
    AnswerSource,
    Assignment,
    FinalLabel,
    Grade,
    GradingItem,
    GradingPlan,
    ItemStatus,
    LabelMethod,
    Verdict,
)
from grading.validation import LabelInput

# Pool entry takes this transaction-scoped lock, so two entry jobs never race for one decision.
_POOL_LOCK_KEY = 0x47726164  # "Grad"
_rng = random.SystemRandom()
POOL_BATCH = 1000
MAX_NOTE = 2000
MAX_SECONDS = 86_400


def _queue_key() -> int:
    return secrets.randbits(63)


def lease_seconds() -> int:
    return settings.GRADING_LEASE_SECONDS


# --------------------------------------------------------------------------- pool entry


@dataclass
class PoolEntryResult:
    entered: int = 0
    not_sampled: int = 0
    item_ids: list[int] = field(default_factory=list)


def _ready_for_pool(decision_ids: list[int] | None):
    """Decisions not in the pool whose answer under review exists, with that answer's parts.

    Served: the served answer. Refused: the shadow run's answer once it succeeded; the logged claim
    when the route has no shadow pipeline. A refused decision on a route with a pipeline waits.
    """
    shadow_answer = (ShadowRun.objects.filter(decision=OuterRef("pk"), status=ShadowStatus.SUCCEEDED)
                     .order_by("-finished_at", "-pk").values("answer")[:1])
    queryset = (
        Decision.objects
        .filter(~Exists(GradingItem.objects.filter(decision=OuterRef("pk"), is_gold=False)))
        .annotate(shadow_answer=Subquery(shadow_answer),
                  labelled=Exists(FinalLabel.objects.filter(decision=OuterRef("pk"))))
        .filter(~Q(outcome=Outcome.REFUSED) | Q(shadow_answer__isnull=False)
                | ~Q(route__shadow_config__has_key="kind"))
        .only("pk", "route_id", "gate_score", "outcome", "question", "claim", "served_answer")
        .order_by("pk")
    )
    if decision_ids is not None:
        queryset = queryset.filter(pk__in=decision_ids)
    return queryset


def _answer_under_review(decision) -> tuple[str, str]:
    if decision.outcome != Outcome.REFUSED:
        return decision.served_answer, AnswerSource.SERVED
    if decision.shadow_answer is not None:
        return decision.shadow_answer, AnswerSource.SHADOW
    return decision.claim, AnswerSource.CLAIM


def grading_pool_enter(*, actor: Actor, decision_ids: list[int] | None = None,
                       limit: int = POOL_BATCH) -> PoolEntryResult:
    """Put decisions whose answer under review is ready into their route's pool (idempotent).

    `decision_ids` None sweeps: up to `limit` ready decisions not in the pool yet. Each decision
    gets exactly one item: `open` when its stratum's draw includes it, `excluded` when not (so
    the sweeper does not draw it again and the stratum's population stays countable). A decision
    that already holds a final label (an imported one) enters as `labelled`.
    """
    result = PoolEntryResult()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_POOL_LOCK_KEY])
        candidates = _ready_for_pool(decision_ids)
        decisions = list(candidates if decision_ids is not None else candidates[:limit])
        if not decisions:
            return result
        route_ids = {d.route_id for d in decisions}
        routes = {r.pk: r for r in Route.objects.filter(pk__in=route_ids).select_related("grading_plan")}
        items = []
        for decision in decisions:
            route = routes[decision.route_id]
            plan = getattr(route, "grading_plan", None)
            stratum, probability = plan.stratum_for(decision.gate_score) if plan else ("all", 1.0)
            answer, source = _answer_under_review(decision)
            if decision.labelled:
                status = ItemStatus.LABELLED
            else:
                status = ItemStatus.OPEN if _rng.random() < probability else ItemStatus.EXCLUDED
            item = GradingItem(route_id=route.pk, decision_id=decision.pk, question=decision.question,
                               answer=answer or "", answer_source=source, stratum=stratum,
                               inclusion_probability=probability, queue_key=_queue_key(),
                               grades_required=route.graders_per_item, status=status)
            # Field checks only: the unique and check constraints hold in the database for the batch.
            item.clean_fields(exclude=["public_id", "route", "decision"])
            items.append(item)
        GradingItem.objects.bulk_create(items)
        by_route: dict[int, dict[str, list[int]]] = {}
        for item in items:
            group = by_route.setdefault(item.route_id, {"entered": [], "not_sampled": []})
            group["not_sampled" if item.status == ItemStatus.EXCLUDED else "entered"].append(item.decision_id)
        audit_record_many(actor=actor, events=[
            EventSpec(Action.POOL_ENTERED, "route", routes[route_id].slug,
                      {"objects": {"decision": group["entered"]}, "entered": len(group["entered"]),
                       "not_sampled": group["not_sampled"]})
            for route_id, group in sorted(by_route.items())
        ])
    result.item_ids = [item.pk for item in items]
    result.not_sampled = sum(item.status == ItemStatus.EXCLUDED for item in items)
    result.entered = len(items) - result.not_sampled
    return result


# --------------------------------------------------------------------------- plan and gold items


def grading_plan_set(*, actor: Actor, route: Route, bands: list[tuple[float, float, int]],
                     gold_rate: float = 0.0, window_days: int = 30) -> GradingPlan:
    """Set the route's stratified plan: per score band [low, high) a target count, turned into a rate.

    The rate of a band is target / (decisions of the route in that band over the last
    `window_days`), at most 1; it applies to decisions that enter the pool from now on. An empty
    `bands` list means everything enters.
    """
    bands = sorted(bands)
    for position, (low, high, target) in enumerate(bands):
        following = bands[position + 1] if position + 1 < len(bands) else None
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InvalidInput(f"Band [{low}, {high}) must have finite edges with low < high.")
        if target < 1:
            raise InvalidInput(f"Band [{low}, {high}) needs a target of at least 1.")
        if following and following[0] < high:
            raise InvalidInput(f"Bands [{low}, {high}) and [{following[0]}, {following[1]}) overlap.")
    if not 0 <= gold_rate <= 0.5:
        raise InvalidInput("The gold rate must lie between 0 and 0.5.")
    since = timezone.now() - timedelta(days=window_days)
    counts = Decision.objects.filter(route=route, occurred_at__gte=since).aggregate(**{
        f"band{i}": Count("pk", filter=Q(gate_score__gte=low, gate_score__lt=high))
        for i, (low, high, _target) in enumerate(bands)
    }) if bands else {}
    strata = []
    for i, (low, high, target) in enumerate(bands):
        population = counts[f"band{i}"]
        strata.append({"name": f"{low:g}-{high:g}", "low": low, "high": high, "target": target,
                       "population": population, "rate": min(1.0, target / population) if population else 1.0})
    with transaction.atomic():
        plan = GradingPlan.objects.select_for_update().filter(route=route).first() or GradingPlan(route=route)
        old = {"strata": plan.strata, "gold_rate": plan.gold_rate} if plan.pk else None
        plan.strata, plan.gold_rate, plan.window_days = strata, gold_rate, window_days
        plan.full_clean()
        plan.save()
        audit_record(actor=actor, action=Action.GRADING_PLAN_SET, object_type="route", object_id=route.slug,
                     payload={"old": old, "new": {"strata": strata, "gold_rate": gold_rate,
                                                  "window_days": window_days}})
    return plan


def gold_item_create(*, actor: Actor, decision: Decision, verdict: str, answer: str | None = None) -> GradingItem:
    """A gold item: the decision's question and passages with an answer whose right verdict is known.

    Graders cannot tell gold items from others; every grader may grade each gold item once, and
    their verdicts measure them instead of labelling a decision.
    """
    if verdict not in (Verdict.CORRECT, Verdict.INCORRECT):
        raise InvalidInput("A gold item's verdict must be 'correct' or 'incorrect'.")
    if answer is None:
        pool_item = GradingItem.objects.filter(decision=decision, is_gold=False).first()
        answer = pool_item.answer if pool_item else (decision.served_answer or decision.claim)
    item = GradingItem(route_id=decision.route_id, decision=decision, question=decision.question, answer=answer,
                       answer_source=AnswerSource.GOLD, stratum="gold", queue_key=_queue_key(),
                       grades_required=decision.route.graders_per_item, is_gold=True, gold_verdict=verdict)
    item.full_clean(exclude=["public_id"])
    with transaction.atomic():
        item.save()
        audit_record(actor=actor, action=Action.GOLD_ITEM_CREATED, object_type="grading_item", object_id=item.pk,
                     payload={"new": {"decision": decision.pk, "verdict": verdict}})
    return item


def route_guidelines_update(*, actor: Actor, route: Route, guidelines: str) -> Route:
    """Replace a route's grading guidelines (Markdown, shown to its graders)."""
    with transaction.atomic():
        route = Route.objects.select_for_update().get(pk=route.pk)
        old = route.guidelines
        if old == guidelines:
            return route
        route.guidelines = guidelines
        route.full_clean()
        route.save(update_fields=["guidelines"])
        audit_record(actor=actor, action=Action.ROUTE_UPDATED, object_type="route", object_id=route.slug,
                     payload={"old": {"guidelines": old}, "new": {"guidelines": guidelines}})
    return route


# --------------------------------------------------------------------------- leases

# The passages of the item, in rank order, read with it so that handing out an item is two statements.
_PASSAGES = """(SELECT coalesce(json_agg(p.text ORDER BY dp.rank), '[]') FROM ledger_decisionpassage dp
    JOIN ledger_passage p ON p.id = dp.passage_id WHERE dp.decision_id = i.decision_id)"""

# The next item for one grader: open, not gold, never assigned to this grader, with fewer than k
# places taken (a grade or a running lease takes one), first in queue_key order. SKIP LOCKED lets
# concurrent graders pass over items another claim holds instead of waiting for it.
_CLAIM_SQL = """
SELECT i.id, i.public_id, i.route_id, i.decision_id, i.question, i.answer, i.grades_required,
       r.guidelines AS route_guidelines, COALESCE(p.gold_rate, 0) AS route_gold_rate, {passages} AS passage_texts
FROM grading_gradingitem i
JOIN ledger_route r ON r.id = i.route_id
LEFT JOIN grading_gradingplan p ON p.route_id = i.route_id
WHERE i.status = 'open' AND NOT i.is_gold {route_clause}
  AND NOT (i.id = ANY(%(passed)s::bigint[]))
  AND NOT EXISTS (SELECT 1 FROM grading_assignment a WHERE a.item_id = i.id AND a.grader_id = %(grader)s)
  AND (SELECT count(*) FROM grading_assignment a WHERE a.item_id = i.id AND NOT a.skipped
       AND (a.graded_at IS NOT NULL OR a.lease_expires_at > %(now)s)) < i.grades_required
ORDER BY i.queue_key
LIMIT 1
FOR UPDATE OF i SKIP LOCKED
"""

# Counted again in a statement of its own: the claim above read places taken as of its snapshot,
# and a claim that committed after that snapshot but before our lock would be missed. Holding the
# row lock, this count is exact.
_INSERT_LEASE_SQL = """
INSERT INTO grading_assignment (item_id, grader_id, leased_at, lease_expires_at, skipped)
SELECT %(item)s, %(grader)s, %(now)s, %(expires)s, false
WHERE (SELECT count(*) FROM grading_assignment a WHERE a.item_id = %(item)s AND NOT a.skipped
       AND (a.graded_at IS NOT NULL OR a.lease_expires_at > %(now)s)) < %(k)s
ON CONFLICT DO NOTHING
RETURNING id
"""

_GOLD_SQL = """
SELECT i.id, i.public_id, i.route_id, i.decision_id, i.question, i.answer, i.grades_required,
       r.guidelines AS route_guidelines, {passages} AS passage_texts
FROM grading_gradingitem i
JOIN ledger_route r ON r.id = i.route_id
WHERE i.route_id = %(route)s AND i.is_gold AND i.status = 'open'
  AND NOT EXISTS (SELECT 1 FROM grading_assignment a WHERE a.item_id = i.id AND a.grader_id = %(grader)s)
ORDER BY i.queue_key
LIMIT 1
"""


def assignment_claim(*, actor: Actor, grader, route_ids: list[int] | None, now=None) -> Assignment | None:
    """Lease the grader's next item, or None when nothing is left for them.

    `route_ids` None means every route. The assignment's `item` carries `route_guidelines`. At the
    route's gold rate a gold item the grader has not seen replaces the regular one.

    A lease is not an audit event (so `actor` is unused here): it changes no result, ends by
    itself, and its row already says who held what from when to when; the grade or skip that ends
    it is audited with the time it took. Auditing every hand-out would also put the audit chain's
    single lock on the queue's hot path, serialising all graders.
    """
    now = now or timezone.now()
    expires = now + timedelta(seconds=lease_seconds())
    if route_ids is None:
        route_clause = ""
    elif len(route_ids) == 1:  # equality lets the planner walk the (route, status, queue_key) index in order
        route_clause = "AND i.route_id = %(route)s"
    else:
        route_clause = "AND i.route_id = ANY(%(routes)s::bigint[])"
    params: dict[str, Any] = {"grader": grader.pk, "now": now, "routes": route_ids, "passed": [],
                              "route": route_ids[0] if route_ids else None}
    claim_sql = _CLAIM_SQL.format(route_clause=route_clause, passages=_PASSAGES)
    with transaction.atomic():
        for _attempt in range(5):
            [item] = list(GradingItem.objects.raw(claim_sql, params)) or [None]
            if item is None:
                return None
            if item.route_gold_rate and _rng.random() < item.route_gold_rate:
                gold = _gold_claim(grader=grader, route_id=item.route_id, now=now, expires=expires)
                if gold is not None:
                    return gold
            with connection.cursor() as cursor:
                cursor.execute(_INSERT_LEASE_SQL, {"item": item.pk, "grader": grader.pk, "now": now,
                                                   "expires": expires, "k": item.grades_required})
                row = cursor.fetchone()
            if row is None:  # lost a race for the item's last place: try the next item
                params["passed"].append(item.pk)
                continue
            return Assignment(pk=row[0], item=item, grader=grader, leased_at=now, lease_expires_at=expires)
    return None


def _gold_claim(*, grader, route_id: int, now, expires) -> Assignment | None:
    items = list(GradingItem.objects.raw(_GOLD_SQL.format(passages=_PASSAGES), {"route": route_id,
                                                                                 "grader": grader.pk}))
    if not items:
        return None
    assignment = Assignment(item=items[0], grader=grader, leased_at=now, lease_expires_at=expires)
    assignment.full_clean(validate_unique=False, validate_constraints=False)
    try:
        with transaction.atomic():
            assignment.save()
    except IntegrityError:  # the same grader's concurrent call took it
        return None
    return assignment


def _live_assignment(*, grader, public_id, now, for_update: bool = True) -> Assignment:
    """The grader's running lease on the item, or Conflict (409) without one.

    An unknown id is the same 409: a grader learns nothing about items they never held.
    """
    queryset = Assignment.objects.select_related("item", "item__route").filter(
        item__public_id=public_id, grader=grader)
    if for_update:
        queryset = queryset.select_for_update(of=("self", "item"))
    assignment = queryset.first()
    if assignment is not None and assignment.graded_at is not None:
        raise Conflict("You have already graded this item.", code="already_graded")
    if assignment is None or assignment.skipped or assignment.lease_expires_at <= now:
        raise Conflict("You hold no running lease on this item; ask for the next item.", code="no_lease")
    if not permissions.can_grade(grader, assignment.item.route):
        raise Forbidden("Your role does not allow grading on this route.")
    return assignment


def assignment_skip(*, actor: Actor, grader, public_id) -> Assignment:
    """Pass on a leased item: it returns to the queue for others and is never offered to this grader again."""
    now = timezone.now()
    with transaction.atomic():
        assignment = _live_assignment(grader=grader, public_id=public_id, now=now)
        assignment.skipped = True
        assignment.save(update_fields=["skipped"])
        audit_record(actor=actor, action=Action.ITEM_SKIPPED, object_type="grading_item",
                     object_id=assignment.item_id, payload={"new": {"grader": grader.get_username()}})
    return assignment


# --------------------------------------------------------------------------- grades and labels


def grade_submit(*, actor: Actor, grader, public_id, verdict: str, note: str = "",
                 seconds_spent: float | None = None) -> Grade:
    """Record the grader's verdict on an item they hold a running lease on (else 409).

    With the item's k-th grade in, a non-gold item gets its final label when the graders' votes
    agree (`unsure` is no vote), and goes to adjudication when they differ or nobody voted.
    """
    if verdict not in Verdict.values:
        raise InvalidInput("The verdict must be 'correct', 'incorrect' or 'unsure'.", code="invalid_verdict")
    if len(note or "") > MAX_NOTE:
        raise InvalidInput(f"The note is longer than {MAX_NOTE:,} characters.")
    if seconds_spent is not None and not (math.isfinite(seconds_spent) and 0 <= seconds_spent <= MAX_SECONDS):
        raise InvalidInput(f"seconds_spent must lie between 0 and {MAX_SECONDS:,}.")
    now = timezone.now()
    with transaction.atomic():
        assignment = _live_assignment(grader=grader, public_id=public_id, now=now)
        item = assignment.item
        if seconds_spent is None:
            seconds_spent = (now - assignment.leased_at).total_seconds()
        grade = Grade(item=item, grader=grader, verdict=verdict, note=note or "", seconds_spent=seconds_spent)
        grade.full_clean(exclude=["item", "grader"], validate_unique=False, validate_constraints=False)
        grade.save()
        assignment.graded_at = now
        assignment.save(update_fields=["graded_at"])
        payload: dict[str, Any] = {"new": {"grader": grader.get_username(), "verdict": verdict,
                                           "seconds_spent": round(seconds_spent, 3)}}
        if item.decision_id and not item.is_gold:
            payload["objects"] = {"decision": [item.decision_id]}
        audit_record(actor=actor, action=Action.GRADE_SUBMITTED, object_type="grading_item", object_id=item.pk,
                     payload=payload)
        if not item.is_gold and item.status == ItemStatus.OPEN:
            _item_resolve(actor=actor, item=item)
    return grade


def _item_resolve(*, actor: Actor, item: GradingItem) -> None:
    verdicts = list(Grade.objects.filter(item=item).values_list("verdict", flat=True))
    if len(verdicts) < item.grades_required:
        return
    votes = {v for v in verdicts if v != Verdict.UNSURE}
    objects = {"decision": [item.decision_id]}
    if len(votes) == 1 and not FinalLabel.objects.filter(decision_id=item.decision_id).exists():
        [verdict] = votes
        label = FinalLabel(decision_id=item.decision_id, item=item, correct=verdict == Verdict.CORRECT,
                           method=LabelMethod.UNANIMOUS)
        label.full_clean(exclude=["decision", "item"], validate_unique=False, validate_constraints=False)
        label.save()
        item.status = ItemStatus.LABELLED
        item.save(update_fields=["status"])
        audit_record(actor=actor, action=Action.LABEL_DECIDED, object_type="grading_item", object_id=item.pk,
                     payload={"objects": objects, "new": {"verdict": verdict, "method": LabelMethod.UNANIMOUS},
                              "grades": sorted(verdicts)})
        return
    item.status = ItemStatus.ADJUDICATION
    item.save(update_fields=["status"])
    audit_record(actor=actor, action=Action.ADJUDICATION_REQUESTED, object_type="grading_item", object_id=item.pk,
                 payload={"objects": objects, "reason": "disagreement" if votes else "all_unsure",
                          "grades": sorted(verdicts)})


def label_adjudicate(*, actor: Actor, reviewer, item: GradingItem, verdict: str, note: str = "") -> FinalLabel:
    """A reviewer decides an item the graders did not agree on. A reviewer who graded it may not."""
    if verdict not in (Verdict.CORRECT, Verdict.INCORRECT):
        raise InvalidInput("The verdict must be 'correct' or 'incorrect'.", code="invalid_verdict")
    if len(note or "") > MAX_NOTE:
        raise InvalidInput(f"The note is longer than {MAX_NOTE:,} characters.")
    with transaction.atomic():
        item = GradingItem.objects.select_for_update().select_related("route").get(pk=item.pk)
        if not permissions.can_review_labels(reviewer, item.route):
            raise Forbidden("Only a reviewer of this route may adjudicate.")
        if item.status != ItemStatus.ADJUDICATION:
            raise Conflict("This item is not waiting for adjudication.", code="not_in_adjudication")
        grades = list(item.grades.select_related("grader").order_by("pk"))
        if any(g.grader_id == reviewer.pk for g in grades):
            raise Forbidden("You graded this item; another reviewer must adjudicate it.", code="own_grade")
        if FinalLabel.objects.filter(decision_id=item.decision_id).exists():
            raise Conflict("This decision already has a final label.", code="already_labelled")
        label = FinalLabel(decision_id=item.decision_id, item=item, correct=verdict == Verdict.CORRECT,
                           method=LabelMethod.ADJUDICATED, decided_by=reviewer, note=note or "")
        label.full_clean(exclude=["decision", "item", "decided_by"], validate_unique=False,
                         validate_constraints=False)
        label.save()
        item.status = ItemStatus.LABELLED
        item.save(update_fields=["status"])
        audit_record(actor=actor, action=Action.LABEL_ADJUDICATED, object_type="grading_item", object_id=item.pk,
                     payload={"objects": {"decision": [item.decision_id]},
                              "old": None, "new": {"verdict": verdict, "method": LabelMethod.ADJUDICATED},
                              "grades": [{"grader": g.grader.get_username(), "verdict": g.verdict} for g in grades],
                              "note": note or ""})
    return label


# --------------------------------------------------------------------------- label import


@dataclass
class LabelImportResult:
    created: int = 0
    unchanged: int = 0


def labels_import(*, actor: Actor, items: list[LabelInput], routes: dict[str, Route],
                  decision_ids: dict[int, int]) -> LabelImportResult:
    """Store an existing graded set as final labels (method `imported`), all or nothing.

    Replaying a label already stored with the same verdict and source is `unchanged`; a decision
    labelled otherwise (another verdict or source, or by console graders) is a conflict and
    nothing is written. Pool items of newly labelled decisions leave the queue.
    """
    wanted: dict[int, LabelInput] = {}
    repeats, conflicts = 0, []
    for item in items:
        decision_id = decision_ids[item.index]
        first = wanted.get(decision_id)
        if first is None:
            wanted[decision_id] = item
        elif (first.verdict, first.source) == (item.verdict, item.source):
            repeats += 1
        else:
            conflicts.append({"index": item.index, "route": item.route, "request_id": item.request_id,
                              "message": f"differs from item {first.index} for the same decision"})
    for attempt in range(3):
        try:
            with transaction.atomic():
                return _labels_import_once(actor, wanted, routes, repeats, conflicts)
        except IntegrityError:  # a concurrent import stored one of these labels first: compare again
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _labels_import_once(actor, wanted: dict[int, LabelInput], routes, repeats, conflicts) -> LabelImportResult:
    conflicts = list(conflicts)
    existing = {label.decision_id: label for label in FinalLabel.objects.filter(decision_id__in=wanted)}
    fresh = {}
    for decision_id, item in wanted.items():
        label = existing.get(decision_id)
        if label is None:
            fresh[decision_id] = item
        elif not (label.method == LabelMethod.IMPORTED and label.correct == item.correct
                  and label.source == item.source):
            conflicts.append({"index": item.index, "route": item.route, "request_id": item.request_id,
                              "message": f"already labelled {label.verdict} ({label.method}"
                                         f"{', ' + label.source if label.source else ''})"})
    if conflicts:
        raise Conflict("Some decisions already hold another label; nothing was written.",
                       details=sorted(conflicts, key=lambda c: c["index"]))
    result = LabelImportResult(unchanged=len(wanted) - len(fresh) + repeats, created=len(fresh))
    if not fresh:
        return result
    pool_items = {i.decision_id: i for i in GradingItem.objects.select_for_update().filter(
        decision_id__in=fresh, is_gold=False)}
    labels = []
    for decision_id, item in fresh.items():
        label = FinalLabel(decision_id=decision_id, item=pool_items.get(decision_id), correct=item.correct,
                           method=LabelMethod.IMPORTED, source=item.source)
        label.clean_fields(exclude=["decision", "item", "decided_by"])
        labels.append(label)
    FinalLabel.objects.bulk_create(labels)
    GradingItem.objects.filter(pk__in=[i.pk for i in pool_items.values()],
                               status__in=[ItemStatus.OPEN, ItemStatus.ADJUDICATION]).update(status=ItemStatus.LABELLED)
    by_route: dict[str, list[int]] = {}
    sources: dict[str, set[str]] = {}
    for decision_id, item in fresh.items():
        by_route.setdefault(item.route, []).append(decision_id)
        sources.setdefault(item.route, set()).add(item.source)
    audit_record_many(actor=actor, events=[
        EventSpec(Action.LABELS_IMPORTED, "route", slug,
                  {"objects": {"decision": sorted(ids)}, "created": len(ids), "sources": sorted(sources[slug])})
        for slug, ids in sorted(by_route.items())
    ])
    return result
