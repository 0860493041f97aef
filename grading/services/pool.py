"""Entering decisions into the grading pool, the sampling plan and gold items.

The queue is a table scan in `queue_key` order. `queue_key` is drawn at random when an item enters
the pool and never changes, so the items graded at any moment are a simple random sample of their
stratum (the statistics rely on it), and served and refused items come interleaved.
"""

import hashlib
import logging
import math
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.accounts.models import Route
from console.core.errors import Conflict, InvalidInput
from console.core.jobs import commit_without_waiting, enqueue
from console.core.pg_arrays import float_array, int_array, text_array, timestamp_array
from console.ledger.models import SERVED_ANSWER, Decision, Outcome
from console.ledger.validation import DecisionInput
from console.shadow.models import ShadowRun, ShadowStatus
from console.shadow.selectors import routes_with_pipeline
from grading.models import (
    AnswerSource,
    FinalLabel,
    GradingItem,
    GradingPlan,
    ItemStatus,
    RouteGradingSettings,
    Verdict,
)
from grading.selectors import route_grading_settings

logger = logging.getLogger(__name__)

# Pool entry takes this transaction-scoped lock, so two entry jobs never race for one decision.
_POOL_LOCK_KEY = 0x47726164  # "Grad"
POOL_BATCH = 1000


def _queue_key() -> int:
    return secrets.randbits(63)


def _draws(count: int) -> list[tuple[int, float]]:
    """A queue key (63 bits) and an inclusion draw in [0, 1) (53 bits, as `random.random`) for each
    of `count` items, from one read of the system's randomness: a call each cost two reads a
    decision, 2% of an ingest request."""
    entropy = secrets.token_bytes(16 * count)
    return [
        (
            int.from_bytes(entropy[at : at + 8]) >> 1,
            (int.from_bytes(entropy[at + 8 : at + 16]) >> 11) * 2.0**-53,
        )
        for at in range(0, 16 * count, 16)
    ]


@dataclass
class PoolEntryResult:
    entered: int = 0
    not_sampled: int = 0
    item_ids: list[int] = field(default_factory=list)


def _ready_for_pool(decision_ids: list[int] | None):
    """Rows of the decisions not in the pool whose answer under review exists, with that answer's parts.

    Served: the served answer. Refused: the shadow run's answer once it succeeded; the logged claim
    when the route has no shadow pipeline. A refused decision on a route with a pipeline waits.
    """
    shadow_answer = (
        ShadowRun.objects.filter(decision=OuterRef("pk"), status=ShadowStatus.SUCCEEDED)
        .order_by("-finished_at", "-pk")
        .values("answer")[:1]
    )
    queryset = (
        Decision.objects.filter(~Exists(GradingItem.objects.filter(decision=OuterRef("pk"), is_gold=False)))
        .annotate(
            served_answer=SERVED_ANSWER,
            shadow_answer=Subquery(shadow_answer),
            labelled=Exists(FinalLabel.objects.filter(decision=OuterRef("pk"))),
        )
        .filter(
            ~Q(outcome=Outcome.REFUSED)
            | Q(shadow_answer__isnull=False)
            | ~Q(route__shadow_settings__config__has_key="kind")
        )
        # Rows, not model instances: pool entry only reads their values, and a deferred-field
        # instance per decision cost about a quarter of the read.
        .values_list(
            "pk",
            "route_id",
            "gate_score",
            "outcome",
            "shadow_answer",
            "labelled",
            "occurred_at",
            named=True,
        )
        .order_by("pk")
    )
    if decision_ids is not None:
        queryset = queryset.filter(pk__in=decision_ids)
    return queryset


def _answer_under_review(decision) -> tuple[str, str]:
    """The item's own answer and the answer's source. The served answer and the logged claim are the
    decision's text, which the item reads from it (so its own answer is empty); a shadow run's answer
    is the item's own."""
    if decision.outcome != Outcome.REFUSED:
        return "", AnswerSource.SERVED
    if decision.shadow_answer is not None:
        return decision.shadow_answer, AnswerSource.SHADOW
    return "", AnswerSource.CLAIM


_ITEM_TABLE = GradingItem._meta.db_table
# A whole batch of items in one statement. (Django's bulk_create spent a second on the SQL of 500
# items before sending it.) The question is always the decision's, so own_question keeps its default.
# The decision's occurred_at is passed with it: the database confirms it in that month's partition
# (grading migration 0012) instead of looking it up in every month's.
_INSERT_ITEMS_SQL = (
    f"INSERT INTO {_ITEM_TABLE} (route_id, decision_id, decision_occurred_at, own_answer, answer_source, stratum, "
    "inclusion_probability, queue_key, grades_required, status, is_gold, gold_verdict, created_at) "
    "SELECT v.route_id, v.decision_id, v.decision_occurred_at, v.own_answer, v.answer_source, v.stratum, "
    "v.inclusion_probability, v.queue_key, v.grades_required, v.status, false, '', %s "
    "FROM unnest(%s::bigint[], %s::bigint[], %s::timestamptz[], %s::text[], %s::text[], %s::text[], "
    "%s::double precision[], %s::bigint[], %s::integer[], %s::text[]) WITH ORDINALITY "
    "AS v(route_id, decision_id, decision_occurred_at, own_answer, answer_source, stratum, inclusion_probability, "
    "queue_key, grades_required, status, position) ORDER BY v.position RETURNING id, decision_id"
)
# The columns _INSERT_ITEMS_SQL takes, in its order, and how each travels: as an array literal,
# which psycopg passes as one string instead of adapting a list element by element in Python
# (console/core/pg_arrays.py).
_ITEM_COLUMNS = {
    "route_id": int_array,
    "decision_id": int_array,
    "decision_occurred_at": timestamp_array,
    "own_answer": text_array,
    "answer_source": text_array,
    "stratum": text_array,
    "inclusion_probability": float_array,
    "queue_key": int_array,
    "grades_required": int_array,
    "status": text_array,
}


@dataclass
class _NewItem:
    """A pool item about to be inserted (the columns _INSERT_ITEMS_SQL takes); `pk` once it is."""

    route_id: int
    decision_id: int
    decision_occurred_at: datetime | None  # None: the database looks it up
    own_answer: str
    answer_source: str
    stratum: str
    inclusion_probability: float
    queue_key: int
    grades_required: int
    status: str
    pk: int | None = None


@dataclass
class _Ready:
    """A decision whose answer under review exists: the fields of `_ready_for_pool`'s rows."""

    pk: int
    route_id: int
    gate_score: float
    outcome: str
    shadow_answer: str | None = None
    labelled: bool = False
    occurred_at: datetime | None = None


def _insert_items(items: list[_NewItem]) -> None:
    """Insert the batch's items in one statement and set their ids."""
    now = timezone.now()
    columns = zip(*map(attrgetter(*_ITEM_COLUMNS), items), strict=True)
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_ITEMS_SQL,
            [now, *(literal(column) for literal, column in zip(_ITEM_COLUMNS.values(), columns, strict=True))],
        )
        ids = dict((decision_id, pk) for pk, decision_id in cursor.fetchall())
    for item in items:
        item.pk = ids[item.decision_id]


def grading_pool_enter(
    *, actor: Actor, decision_ids: list[int] | None = None, limit: int = POOL_BATCH
) -> PoolEntryResult:
    """Put decisions whose answer under review is ready into their route's pool (idempotent).

    `decision_ids` None sweeps: up to `limit` ready decisions not in the pool yet. Each decision
    gets exactly one item: `open` when its stratum's draw includes it, `excluded` when not (so
    the sweeper does not draw it again and the stratum's population stays countable). A decision
    that already holds a final label (an imported one) enters as `labelled`.
    """
    with transaction.atomic():
        commit_without_waiting()  # the daily sweep enters whatever a crash loses
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_POOL_LOCK_KEY])
        candidates = _ready_for_pool(decision_ids)
        decisions = list(candidates if decision_ids is not None else candidates[:limit])
        return _enter(actor, decisions)


def pool_enter_ingested(
    *, actor: Actor, items: list[DecisionInput], decision_ids: list[int], routes: dict[str, Route]
) -> None:
    """Enter an ingest batch's ready decisions into the pool, inside the ingest transaction (a
    ledger in-ingest hook): a decision is gradable the moment its batch commits, and no worker
    reads the batch back to do it.

    Ready, from the batch itself: served decisions, and refused ones on routes without a shadow
    pipeline (the others wait for their shadow run and enter through the sweeper). The batch's
    decisions are new and nobody else sees them before the commit, so the pool lock that keeps two
    entry jobs apart is not taken: ingest requests never wait on each other or on a job for it.
    Entry must never cost the batch: if it fails, the batch is stored without it, a job
    (`grading.grading_pool_enter`) is queued for the decisions after the commit, and the daily full
    sweep (`grading.grading_pool_sweep_all`) enters any a lost message left. The audit event is the
    system's, as when a job enters them.
    """
    del actor  # the integrator stores decisions; entering them is the system's sampling
    refusing = {routes[item.route].pk for item in items if item.outcome == Outcome.REFUSED}
    waiting_for_shadow = routes_with_pipeline(refusing) if refusing else set()
    ready = [
        _Ready(
            pk=decision_id,
            route_id=routes[item.route].pk,
            gate_score=item.gate_score,
            outcome=item.outcome,
            occurred_at=item.occurred_at,
        )
        for item, decision_id in zip(items, decision_ids, strict=True)
        if item.outcome != Outcome.REFUSED or routes[item.route].pk not in waiting_for_shadow
    ]
    if not ready:
        return
    try:
        with transaction.atomic():
            _enter(Actor.system("grading_pool_enter"), ready)
    except Exception:  # the batch itself must not fail for this: a job enters them after the commit
        logger.exception("entering %d ingested decisions into the pool failed; a job will", len(ready))
        enqueue("grading.grading_pool_enter", [decision.pk for decision in ready])


def shadow_answered_outside_pool(*, since, limit: int) -> list[int]:
    """Refusals whose shadow run (created since `since`) has succeeded and that hold no pool item:
    what the minute sweep enters. Read from the shadow runs of the window (their status and
    creation time are indexed), never by walking every decision for one without an item."""
    return list(
        ShadowRun.objects.filter(status=ShadowStatus.SUCCEEDED, created_at__gte=since)
        .filter(~Exists(GradingItem.objects.filter(decision_id=OuterRef("decision_id"), is_gold=False)))
        .order_by("decision_id")
        .values_list("decision_id", flat=True)[:limit]
    )


def _enter(actor: Actor, decisions: list) -> PoolEntryResult:
    """Draw and insert one item per decision (rows with `_Ready`'s fields), with one audit event per route."""
    result = PoolEntryResult()
    if not decisions:
        return result
    route_ids = {d.route_id for d in decisions}
    routes = {
        r.pk: r for r in Route.objects.filter(pk__in=route_ids).select_related("grading_plan", "grading_settings")
    }
    graders = {pk: route_grading_settings(route).graders_per_item for pk, route in routes.items()}
    items = []
    for decision, (queue_key, draw) in zip(decisions, _draws(len(decisions)), strict=True):
        route = routes[decision.route_id]
        plan = getattr(route, "grading_plan", None)
        stratum, probability = plan.stratum_for(decision.gate_score) if plan else ("all", 1.0)
        own_answer, source = _answer_under_review(decision)
        if decision.labelled:
            status = ItemStatus.LABELLED
        else:
            status = ItemStatus.OPEN if draw < probability else ItemStatus.EXCLUDED
        # Plain rows, not model instances run through clean_fields(): every value is made here
        # or by the route's validated plan, the database holds the lengths and constraints, and
        # building and checking an instance per decision cost half of pool entry's Python time.
        items.append(
            _NewItem(
                route_id=route.pk,
                decision_id=decision.pk,
                decision_occurred_at=decision.occurred_at,
                own_answer=own_answer,
                answer_source=source,
                stratum=stratum,
                inclusion_probability=probability,
                queue_key=queue_key,
                grades_required=graders[route.pk],
                status=status,
            )
        )
    _insert_items(items)
    by_route: dict[int, dict[str, list[int]]] = {}
    for item in items:
        group = by_route.setdefault(item.route_id, {"entered": [], "not_sampled": []})
        group["not_sampled" if item.status == ItemStatus.EXCLUDED else "entered"].append(item.decision_id)
    audit_record_many(
        actor=actor,
        events=[
            EventSpec(
                Action.POOL_ENTERED,
                "route",
                routes[route_id].slug,
                route=routes[route_id].slug,
                payload={
                    "objects": {"decision": group["entered"]},
                    "entered": len(group["entered"]),
                    "not_sampled": group["not_sampled"],
                },
            )
            for route_id, group in sorted(by_route.items())
        ],
    )
    result.item_ids = [item.pk for item in items]
    result.not_sampled = sum(item.status == ItemStatus.EXCLUDED for item in items)
    result.entered = len(items) - result.not_sampled
    return result


PLAN_WINDOW_DAYS = 30
MAX_WINDOW_DAYS = 366


def grading_plan_set(
    *,
    actor: Actor,
    route: Route,
    bands: list[tuple[float, float, int]],
    gold_rate: float | None = None,
    window_days: int | None = None,
) -> GradingPlan:
    """Set the route's stratified plan: per score band [low, high) a target count, turned into a rate.

    The rate of a band is target / (decisions of the route in that band over the last
    `window_days`), at most 1; it applies to decisions that enter the pool from now on. An empty
    `bands` list means everything enters. `gold_rate` and `window_days` None keep the plan's own
    (0 and 30 days for a new plan): a recheck that resizes the bands leaves the gold rate an admin set.
    The page (grading.views), `manage.py grading_plan` and monitoring's rechecks all set plans here.
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
    existing = GradingPlan.objects.filter(route=route).first()
    if gold_rate is None:
        gold_rate = existing.gold_rate if existing else 0.0
    if window_days is None:
        window_days = existing.window_days if existing else PLAN_WINDOW_DAYS
    if not (math.isfinite(gold_rate) and 0 <= gold_rate <= 0.5):
        raise InvalidInput("The gold rate must lie between 0 and 0.5.")
    if not 1 <= window_days <= MAX_WINDOW_DAYS:
        raise InvalidInput(f"The window must be between 1 and {MAX_WINDOW_DAYS} days.")
    since = timezone.now() - timedelta(days=window_days)
    counts = (
        Decision.objects.filter(route=route, occurred_at__gte=since).aggregate(
            **{
                f"band{i}": Count("pk", filter=Q(gate_score__gte=low, gate_score__lt=high))
                for i, (low, high, _target) in enumerate(bands)
            }
        )
        if bands
        else {}
    )
    strata = []
    for i, (low, high, target) in enumerate(bands):
        population = counts[f"band{i}"]
        strata.append(
            {
                "name": f"{low:g}-{high:g}",
                "low": low,
                "high": high,
                "target": target,
                "population": population,
                "rate": min(1.0, target / population) if population else 1.0,
            }
        )
    with transaction.atomic():
        plan = GradingPlan.objects.select_for_update().filter(route=route).first() or GradingPlan(route=route)
        new = {"strata": strata, "gold_rate": gold_rate, "window_days": window_days}
        # A new plan's fields were nothing before (no plan: everything entered).
        old = {name: getattr(plan, name) if plan.pk else None for name in new}
        changes = {name: {"old": old[name], "new": value} for name, value in new.items() if old[name] != value}
        if not changes:
            return plan
        plan.strata, plan.gold_rate, plan.window_days = strata, gold_rate, window_days
        plan.full_clean()
        plan.save()
        audit_record(
            actor=actor,
            action=Action.GRADING_PLAN_SET,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload=changes,
        )
    return plan


def grading_plan_retire(*, actor: Actor, route: Route) -> GradingPlan | None:
    """Take the route's plan away: every decision entering the pool from now on enters (rate 1), and
    no gold item is handed out. Items already in the pool keep the stratum and probability they
    entered with. Returns the retired plan, or None when the route had none (nothing changes)."""
    with transaction.atomic(durable=True):
        plan = GradingPlan.objects.select_for_update().filter(route=route).first()
        if plan is None:
            return None
        fields = {"strata": plan.strata, "gold_rate": plan.gold_rate, "window_days": plan.window_days}
        plan.delete()
        audit_record(
            actor=actor,
            action=Action.GRADING_PLAN_RETIRED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload={name: {"old": value, "new": None} for name, value in fields.items()},
        )
    return plan


def gold_item_create(*, actor: Actor, decision: Decision, verdict: str, answer: str | None = None) -> GradingItem:
    """A gold item: the decision's question and passages with an answer whose right verdict is known.

    Graders cannot tell gold items from others; every grader may grade each gold item once, and
    their verdicts measure them instead of labelling a decision.
    """
    if verdict not in (Verdict.CORRECT, Verdict.INCORRECT):
        raise InvalidInput("A gold item's verdict must be 'correct' or 'incorrect'.")
    if answer is None:
        pool_item = GradingItem.objects.with_texts().filter(decision=decision, is_gold=False).first()
        answer = pool_item.answer if pool_item else (decision.served_answer or decision.claim)
    if not answer:
        raise InvalidInput("A gold item needs an answer.")
    # The question is the decision's; the answer is the gold item's own, whatever it was taken from.
    item = GradingItem(
        route_id=decision.route_id,
        decision=decision,
        own_answer=answer,
        answer_source=AnswerSource.GOLD,
        stratum="gold",
        queue_key=_queue_key(),
        grades_required=route_grading_settings(decision.route).graders_per_item,
        is_gold=True,
        gold_verdict=verdict,
    )
    item.full_clean(exclude=["public_id"])
    with transaction.atomic(durable=True):
        item.save()
        audit_record(
            actor=actor,
            action=Action.GOLD_ITEM_CREATED,
            object_type="grading_item",
            object_id=item.pk,
            route=decision.route.slug,
            payload={
                "decision": {"old": None, "new": decision.pk},
                "verdict": {"old": None, "new": verdict},
                "answer": {"old": None, "new": answer},
            },
        )
    return item


def gold_item_remove(*, actor: Actor, item: GradingItem) -> GradingItem:
    """Stop handing a gold item out. It is not deleted: the grades it already has still measure their
    graders (the agreement page's accuracy on gold items). A grader holding it now may still grade it.
    Removing one already removed is a Conflict."""
    with transaction.atomic(durable=True):
        item = GradingItem.objects.select_for_update().select_related("route").get(pk=item.pk, is_gold=True)
        if item.status != ItemStatus.OPEN:
            raise Conflict("This gold item was already removed.", code="gold_item_removed")
        item.status = ItemStatus.EXCLUDED
        item.save(update_fields=["status"])
        audit_record(
            actor=actor,
            action=Action.GOLD_ITEM_REMOVED,
            object_type="grading_item",
            object_id=item.pk,
            route=item.route.slug,
            payload={"status": {"old": ItemStatus.OPEN.value, "new": item.status}},
        )
    return item


def guidelines_sha256(text: str) -> str:
    """Names one version of a route's guidelines, so a publish can say which text it replaces."""
    return hashlib.sha256(text.encode()).hexdigest()


def route_guidelines_update(*, actor: Actor, route: Route, guidelines: str, base_sha256: str | None = None) -> bool:
    """Replace a route's grading guidelines (Markdown, shown to its graders); True when they changed.

    With `base_sha256` (the text the editor reviewed the change against), a text published by
    someone else in the meantime is a Conflict rather than silently overwritten.
    """
    return route_grading_set(actor=actor, route=route, guidelines=guidelines, base_sha256=base_sha256)


def route_grading_set(
    *,
    actor: Actor,
    route: Route,
    guidelines: str | None = None,
    graders_per_item: int | None = None,
    base_sha256: str | None = None,
) -> bool:
    """Change a route's grading settings (None leaves one as it is); True when something changed.

    They are grading's own row of the route (`RouteGradingSettings`), created on the first change;
    until then the route has the defaults. One `route_updated` event names each changed field.
    Items already in the pool keep the graders per item they entered with; new items take the new
    number. `base_sha256` guards the guidelines as in `route_guidelines_update`.
    """
    with transaction.atomic():
        # The route's row is the lock concurrent changes of its settings queue on.
        Route.objects.select_for_update().filter(pk=route.pk).first()
        settings = RouteGradingSettings.objects.filter(route_id=route.pk).first()
        if settings is None:
            settings = RouteGradingSettings(route=route)
        if base_sha256 is not None and base_sha256 != guidelines_sha256(settings.guidelines):
            raise Conflict(
                "The guidelines were changed by someone else since you reviewed your change; "
                "review it against their text.",
                code="guidelines_changed",
            )
        wanted = {"guidelines": guidelines, "graders_per_item": graders_per_item}
        changes = {
            name: {"old": getattr(settings, name), "new": value}
            for name, value in wanted.items()
            if value is not None and getattr(settings, name) != value
        }
        if not changes:
            return False
        for name, change in changes.items():
            setattr(settings, name, change["new"])
        settings.full_clean(validate_unique=False)
        settings.save()
        route.grading_settings = settings
        audit_record(
            actor=actor,
            action=Action.ROUTE_UPDATED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload=changes,
        )
    return True
