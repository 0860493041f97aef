"""Leases of the blind queue: handing a grader the next item, skipping, and the live-lease check."""

import random
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.core.errors import Conflict, Forbidden
from console.core.locks import LockWaitExpired, lock_wait_at_most
from console.ledger.models import SERVED_ANSWER_SQL
from grading.models import (
    Assignment,
    GradingItem,
)

_rng = random.SystemRandom()


def lease_seconds() -> int:
    return settings.GRADING_LEASE_SECONDS


# The passages of the item, in rank order, read with it so that handing out an item is two statements.
# They come as stored (bytea, maybe deflated: console/ledger/compression.py); grading.selectors
# gives the grader their text. Their ids are an array of the decision's row, partitioned by month
# (console/ledger/partitions.py): naming the item's copy of its decision's occurred_at lets the
# executor probe that month's partition alone, where the id alone probes every month's.
_PASSAGES = """(SELECT coalesce(array_agg(p.text ORDER BY l.position), '{}') FROM ledger_decision d
    CROSS JOIN LATERAL unnest(d.passage_ids) WITH ORDINALITY AS l(id, position)
    JOIN ledger_passage p ON p.id = l.id
    WHERE d.id = i.decision_id AND d.occurred_at = i.decision_occurred_at)"""

# The item's question and answer: its own text, else its decision's (grading.models._item_texts
# says the same for the ORM). Read like the passages, by subqueries on the item's row, so no join
# changes how the item is chosen; each probes the decision by its primary key (id, occurred_at) in
# the one month partition that holds it, and only when the item holds no text of its own.
_DECISION_TEXT = (
    "(SELECT {field} FROM ledger_decision d WHERE d.id = i.decision_id AND d.occurred_at = i.decision_occurred_at)"
)
_TEXTS = f"""COALESCE(NULLIF(i.own_question, ''), {_DECISION_TEXT.format(field="d.question")}, '') AS question,
       COALESCE(NULLIF(i.own_answer, ''), CASE i.answer_source
           WHEN 'served' THEN {_DECISION_TEXT.format(field=SERVED_ANSWER_SQL)}
           WHEN 'claim' THEN {_DECISION_TEXT.format(field="d.claim")} END, '') AS answer"""

# The route's guidelines (grading's settings row; none without one), read for the chosen row only.
_GUIDELINES = "COALESCE((SELECT s.guidelines FROM grading_routegradingsettings s WHERE s.route_id = i.route_id), '')"

# A long route's items are graded claim by claim (console.ledger.models.RouteAnswerSettings): the
# route's answer form, and the decision's claims as ingested (only on a long route, and only for an
# item that shows its decision's answer), read for the chosen row only, like the texts.
_ANSWER_FORM = """COALESCE((SELECT s.answer_form FROM ledger_routeanswersettings s WHERE s.route_id = i.route_id),
       'short') AS answer_form,
       CASE WHEN i.own_answer = '' AND EXISTS (SELECT 1 FROM ledger_routeanswersettings s
           WHERE s.route_id = i.route_id AND s.answer_form = 'long')
       THEN (SELECT d.claims::text FROM ledger_decision d
             WHERE d.id = i.decision_id AND d.occurred_at = i.decision_occurred_at) END AS decision_claims"""

# The next item for one grader: open, not gold, never assigned to this grader, with fewer than k
# places taken (a grade or a running lease takes one), first in queue_key order. SKIP LOCKED lets
# concurrent graders pass over items another claim holds instead of waiting for it.
_CLAIM_SQL = """
SELECT i.id, i.public_id, i.route_id, i.decision_id, {texts}, i.grades_required,
       {guidelines} AS route_guidelines, COALESCE(p.gold_rate, 0) AS route_gold_rate,
       {passages} AS passage_texts, {answer_form}
FROM grading_gradingitem i
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
SELECT i.id, i.public_id, i.route_id, i.decision_id, {texts}, i.grades_required,
       {guidelines} AS route_guidelines, {passages} AS passage_texts, {answer_form}
FROM grading_gradingitem i
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
    claim_sql, params = _claim_statement(grader_id=grader.pk, route_ids=route_ids, now=now)
    with transaction.atomic(durable=True):
        # Each lost race passes over one more item, so the loop ends when the queue does.
        while True:
            [item] = list(GradingItem.objects.raw(claim_sql, params)) or [None]
            if item is None:
                item = _claim_waiting_for_locked(claim_sql, params)
            if item is None:
                return None
            if item.route_gold_rate and _rng.random() < item.route_gold_rate:
                gold = _gold_claim(grader=grader, route_id=item.route_id, now=now, expires=expires)
                if gold is not None:
                    return gold
            with connection.cursor() as cursor:
                cursor.execute(
                    _INSERT_LEASE_SQL,
                    {"item": item.pk, "grader": grader.pk, "now": now, "expires": expires, "k": item.grades_required},
                )
                row = cursor.fetchone()
            if row is None:  # lost a race for the item's last place: try the next item
                params["passed"].append(item.pk)
                continue
            return Assignment(pk=row[0], item=item, grader=grader, leased_at=now, lease_expires_at=expires)


def _claim_statement(*, grader_id: int, route_ids: list[int] | None, now) -> tuple[str, dict[str, Any]]:
    """The claim's SQL for the grader's routes (None: every route) and its parameters; `passed` is
    the list of items the grader lost a race for, which the caller extends."""
    if route_ids is None:
        route_clause = ""
    elif len(route_ids) == 1:  # equality lets the planner walk the (route, status, queue_key) index in order
        route_clause = "AND i.route_id = %(route)s"
    else:
        route_clause = "AND i.route_id = ANY(%(routes)s::bigint[])"
    params: dict[str, Any] = {
        "grader": grader_id,
        "now": now,
        "routes": route_ids,
        "passed": [],
        "route": route_ids[0] if route_ids else None,
    }
    claim_sql = _CLAIM_SQL.format(
        route_clause=route_clause, passages=_PASSAGES, texts=_TEXTS, guidelines=_GUIDELINES, answer_form=_ANSWER_FORM
    )
    return claim_sql, params


# SKIP LOCKED passes over items another claim or grade is deciding at this moment. When those are all
# that is left, the grader would be told the queue is empty while the other transaction may still
# leave a place free; so the claim is asked once more, waiting for those locks (a claim or a grade
# holds them for milliseconds), for at most this long.
CLAIM_LOCK_WAIT = "2s"


def _claim_waiting_for_locked(claim_sql: str, params: dict[str, Any]) -> GradingItem | None:
    try:
        with lock_wait_at_most(CLAIM_LOCK_WAIT):
            [item] = list(GradingItem.objects.raw(claim_sql.replace("SKIP LOCKED", ""), params)) or [None]
    except LockWaitExpired:
        return None
    return item


def _gold_claim(*, grader, route_id: int, now, expires) -> Assignment | None:
    items = list(
        GradingItem.objects.raw(
            _GOLD_SQL.format(passages=_PASSAGES, texts=_TEXTS, guidelines=_GUIDELINES, answer_form=_ANSWER_FORM),
            {"route": route_id, "grader": grader.pk},
        )
    )
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


def live_assignment(*, grader, public_id, now, for_update: bool = True) -> Assignment:
    """The grader's running lease on the item, or Conflict (409) without one.

    An unknown id is the same 409: a grader learns nothing about items they never held.
    """
    # with the route's answer settings: a long route's grade is checked claim by claim
    queryset = Assignment.objects.select_related("item", "item__route__answer_settings").filter(
        item__public_id=public_id, grader=grader
    )
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
    with transaction.atomic(durable=True):
        assignment = live_assignment(grader=grader, public_id=public_id, now=now)
        assignment.skipped = True
        assignment.save(update_fields=["skipped"])
        audit_record(
            actor=actor,
            action=Action.ITEM_SKIPPED,
            object_type="grading_item",
            object_id=assignment.item_id,
            route=assignment.item.route.slug,
            payload={"grader": grader.get_username(), "skipped": {"old": False, "new": True}},
        )
    return assignment
