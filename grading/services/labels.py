"""Grades, final labels (unanimous, majority, adjudicated) and the import of an existing graded set."""

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Conflict, Forbidden, InvalidInput, detail
from grading import selectors
from grading.models import (
    Assignment,
    ClaimGrade,
    FinalClaimLabel,
    FinalLabel,
    Grade,
    GradingItem,
    ItemStatus,
    LabelMethod,
    Verdict,
)
from grading.services import claims as long_answers
from grading.services.queue import lease_seconds, live_assignment
from grading.validation import LabelInput

MAX_NOTE = 2000
MAX_SECONDS = 86_400


def grade_submit(
    *,
    actor: Actor,
    grader,
    public_id,
    verdict: str | None = None,
    claims: list[dict[str, Any]] | None = None,
    note: str = "",
    seconds_spent: float | None = None,
) -> Grade:
    """Record the grader's verdict on an item they hold a running lease on (else 409).

    On a short route, one `verdict`. On a long route, `claims`: `[{"index", "verdict"}]` naming
    every claim of the answer once (supported, unsupported, unverifiable); the grade's own verdict is
    the one they imply (`claims.answer_verdict`), and each claim gets a ClaimGrade row. The other
    form is refused (400) so no grade is half of each.

    With the item's k-th grade in, a non-gold item gets its final label when the graders' votes
    agree (`unsure` is no vote; on a long route, every claim's verdicts agree), and goes to
    adjudication when they differ or nobody voted.
    """
    if verdict is not None and verdict not in Verdict.values:
        raise InvalidInput("The verdict must be 'correct', 'incorrect' or 'unsure'.", code="invalid_verdict")
    if len(note or "") > MAX_NOTE:
        raise InvalidInput(f"The note is longer than {MAX_NOTE:,} characters.")
    if seconds_spent is not None and not (math.isfinite(seconds_spent) and 0 <= seconds_spent <= MAX_SECONDS):
        raise InvalidInput(f"seconds_spent must lie between 0 and {MAX_SECONDS:,}.")
    now = timezone.now()
    with transaction.atomic(durable=True):
        assignment = live_assignment(grader=grader, public_id=public_id, now=now)
        item = assignment.item
        claim_verdicts = _submitted_claims(item, verdict=verdict, claims=claims)
        if claim_verdicts is not None:
            verdict = long_answers.answer_verdict(claim_verdicts)
        if seconds_spent is None:
            seconds_spent = (now - assignment.leased_at).total_seconds()
        grade = Grade(item=item, grader=grader, verdict=verdict, note=note or "", seconds_spent=seconds_spent)
        grade.full_clean(exclude=["item", "grader"], validate_unique=False, validate_constraints=False)
        grade.save()
        new = {"grader": grader.get_username(), "verdict": verdict, "seconds_spent": round(seconds_spent, 3)}
        if claim_verdicts is not None:
            ClaimGrade.objects.bulk_create(
                [ClaimGrade(grade=grade, index=index, verdict=v) for index, v in enumerate(claim_verdicts)]
            )
            new["claims"] = claim_verdicts
        assignment.graded_at = now
        assignment.save(update_fields=["graded_at"])
        _grade_audit(actor=actor, action=Action.GRADE_SUBMITTED, item=item, payload=field_changes(new=new))
        if not item.is_gold and item.status == ItemStatus.OPEN:
            _item_resolve(actor=actor, item=item)
    return grade


def _submitted_claims(item: GradingItem, *, verdict: str | None, claims) -> list[str] | None:
    """The claim verdicts of a long route's grade in index order, None on a short route; 400 for
    the form the route does not take."""
    if not selectors.route_is_long(item.route):
        if claims is not None:
            raise InvalidInput(
                "This route grades whole answers: send one verdict, not claims.",
                code="claims_not_expected",
                details=[detail("claims", "not_expected", "this route grades whole answers")],
            )
        if verdict is None:
            raise InvalidInput("The verdict must be 'correct', 'incorrect' or 'unsure'.", code="invalid_verdict")
        return None
    if verdict is not None or claims is None:
        raise InvalidInput(
            "This route grades answers claim by claim: send a verdict for every claim.",
            code="claims_required",
            details=[detail("claims", "required", "a verdict for every claim of the answer")],
        )
    return long_answers.claim_verdicts_checked(claims, len(selectors.item_claims(item)))


def grade_withdraw(*, actor: Actor, grader, public_id) -> Assignment:
    """Take back the grader's last grade while its item still waits for grades, and hand the item
    back to them on a fresh lease so they can grade it again at once.

    The grade row goes (every statistic reads grade rows, so it counts nowhere after this); the
    audit event keeps what it said. Leases the grader took after that grade (the item the queue
    handed out next) are released so the item given back is the one in hand; they return to the
    queue for everyone, this grader included.

    Refused (409) when the grader has no grade on the item (unknown ids, other graders' items: the
    same answer, so nothing is learnt about them), when it is not their latest grade, and when the
    item's grades are complete (a final label, or with a reviewer): one message for both, since
    which of the two it is would tell the grader how the others voted.
    """
    now = timezone.now()
    with transaction.atomic(durable=True):
        # The item row first: grade_submit holds it while it counts grades and resolves the item.
        item = (
            GradingItem.objects.with_texts()  # handed back to the grader with its texts
            .select_for_update(of=("self",))
            .select_related("route__grading_settings")  # the guidelines go back with the item
            .filter(public_id=public_id)
        ).first()
        grade = Grade.objects.filter(item=item, grader=grader).first() if item is not None else None
        if grade is None:
            raise Conflict("You have no grade on this item to undo.", code="no_grade")
        if not permissions.can_grade(grader, item.route):
            raise Forbidden("Your role does not allow grading on this route.")
        if grade.pk != selectors.latest_grade_id(grader):
            raise Conflict("Only your last grade can be undone.", code="not_last_grade")
        if not selectors.grade_withdrawable(item):
            raise Conflict(
                "This item has all its grades now; your grade can no longer be undone.", code="grades_complete"
            )
        withdrawn_claims = long_answers.grade_claim_verdicts(grade)
        grade.delete()  # its ClaimGrade rows go with it
        Assignment.objects.filter(
            grader=grader, skipped=False, graded_at__isnull=True, leased_at__gte=grade.created_at
        ).exclude(item=item).delete()
        assignment, _ = Assignment.objects.update_or_create(
            item=item,
            grader=grader,
            defaults={
                "leased_at": now,
                "lease_expires_at": now + timedelta(seconds=lease_seconds()),
                "graded_at": None,
                "skipped": False,
            },
        )
        assignment.item = item  # an updated lease comes back without it: the grader is shown this one
        seconds = grade.seconds_spent
        old = {
            "grader": grader.get_username(),
            "verdict": grade.verdict,
            "seconds_spent": None if seconds is None else round(seconds, 3),
        }
        if withdrawn_claims is not None:
            old["claims"] = withdrawn_claims
        _grade_audit(actor=actor, action=Action.GRADE_WITHDRAWN, item=item, payload=field_changes(old=old))
    return assignment


def _grade_audit(*, actor: Actor, action: Action, item: GradingItem, payload: dict[str, Any]) -> None:
    """A grade's event, on the item; a pool item's also names its decision, so the decision's history
    shows it (a gold item's grade says nothing about the decision it was copied from)."""
    if item.decision_id and not item.is_gold:
        payload = {**payload, "objects": {"decision": [item.decision_id]}}
    audit_record(
        actor=actor,
        action=action,
        object_type="grading_item",
        object_id=item.pk,
        route=item.route.slug,
        payload=payload,
    )


def _item_resolve(*, actor: Actor, item: GradingItem) -> None:
    if selectors.route_is_long(item.route):
        _long_item_resolve(actor=actor, item=item)
        return
    verdicts = list(Grade.objects.filter(item=item).values_list("verdict", flat=True))
    if len(verdicts) < item.grades_required:
        return
    votes = {v for v in verdicts if v != Verdict.UNSURE}
    objects = {"decision": [item.decision_id]}
    if len(votes) == 1 and not FinalLabel.objects.filter(decision_id=item.decision_id).exists():
        [verdict] = votes
        label = FinalLabel(
            decision_id=item.decision_id, item=item, correct=verdict == Verdict.CORRECT, method=LabelMethod.UNANIMOUS
        )
        label.full_clean(exclude=["decision", "item"], validate_unique=False, validate_constraints=False)
        label.save()
        item.status = ItemStatus.LABELLED
        item.save(update_fields=["status"])
        audit_record(
            actor=actor,
            action=Action.LABEL_DECIDED,
            object_type="grading_item",
            object_id=item.pk,
            route=item.route.slug,
            payload={
                "objects": objects,
                **field_changes(new={"verdict": verdict, "method": LabelMethod.UNANIMOUS}),
                "grades": sorted(verdicts),
            },
        )
        return
    _adjudication_requested(
        actor=actor,
        item=item,
        payload={"objects": objects, "reason": "disagreement" if votes else "all_unsure", "grades": sorted(verdicts)},
    )


def _adjudication_requested(*, actor: Actor, item: GradingItem, payload: dict) -> None:
    """The item waits for a reviewer; the event says why (the graders' verdicts, the claims they split on)."""
    item.status = ItemStatus.ADJUDICATION
    item.save(update_fields=["status"])
    audit_record(
        actor=actor,
        action=Action.ADJUDICATION_REQUESTED,
        object_type="grading_item",
        object_id=item.pk,
        route=item.route.slug,
        payload=payload,
    )


def _long_item_resolve(*, actor: Actor, item: GradingItem) -> None:
    """A long answer's k-th grade: the label when every claim's verdicts agree, else adjudication of
    the claims they differ on (and only those)."""
    grades = list(Grade.objects.filter(item=item).prefetch_related("claim_grades").order_by("pk"))
    if len(grades) < item.grades_required:
        return
    per_grade = [long_answers.grade_claim_verdicts(g) for g in grades]
    count = len(selectors.item_claims(item))
    disputed = long_answers.disputed_claims(per_grade, count)
    objects = {"decision": [item.decision_id]}
    if not disputed and not FinalLabel.objects.filter(decision_id=item.decision_id).exists():
        verdicts = per_grade[0] or []
        label = long_answers.long_label_write(item=item, verdicts=verdicts, method=LabelMethod.UNANIMOUS)
        item.status = ItemStatus.LABELLED
        item.save(update_fields=["status"])
        new = {
            "verdict": label.verdict,
            "method": LabelMethod.UNANIMOUS,
            "claims_supported": label.claims_supported,
            "claims_verifiable": label.claims_verifiable,
            "claims": verdicts,
        }
        audit_record(
            actor=actor,
            action=Action.LABEL_DECIDED,
            object_type="grading_item",
            object_id=item.pk,
            route=item.route.slug,
            payload={"objects": objects, **field_changes(new=new), "grades": sorted(g.verdict for g in grades)},
        )
        return
    _adjudication_requested(
        actor=actor,
        item=item,
        payload={
            "objects": objects,
            "reason": "claims_disagree" if disputed else "already_labelled",
            "claims": disputed,
            "grades": sorted(g.verdict for g in grades),
        },
    )


def label_adjudicate(
    *,
    actor: Actor,
    reviewer,
    item: GradingItem,
    verdict: str | None = None,
    claims: list[dict[str, Any]] | None = None,
    note: str = "",
) -> FinalLabel:
    """A reviewer decides an item the graders did not agree on. A reviewer who graded it may not.

    On a long route the reviewer sends `claims`, a verdict for each claim the graders disagreed on
    and no other; the claims they agreed on keep the graders' verdict."""
    if verdict is not None and verdict not in (Verdict.CORRECT, Verdict.INCORRECT):
        raise InvalidInput("The verdict must be 'correct' or 'incorrect'.", code="invalid_verdict")
    if len(note or "") > MAX_NOTE:
        raise InvalidInput(f"The note is longer than {MAX_NOTE:,} characters.")
    with transaction.atomic(durable=True):
        item = GradingItem.objects.select_for_update().select_related("route").get(pk=item.pk)
        if not permissions.can_review_labels(reviewer, item.route):
            raise Forbidden("Only a reviewer of this route may adjudicate.")
        if item.status != ItemStatus.ADJUDICATION:
            raise Conflict("This item is not waiting for adjudication.", code="not_in_adjudication")
        grades = list(item.grades.select_related("grader").prefetch_related("claim_grades").order_by("pk"))
        if any(g.grader_id == reviewer.pk for g in grades):
            raise Forbidden("You graded this item; another reviewer must adjudicate it.", code="own_grade")
        if FinalLabel.objects.filter(decision_id=item.decision_id).exists():
            raise Conflict("This decision already has a final label.", code="already_labelled")
        if selectors.route_is_long(item.route):
            label, changes = _long_adjudicate(
                item=item, grades=grades, reviewer=reviewer, verdict=verdict, claims=claims, note=note
            )
            verdict = label.verdict
        else:
            if claims is not None or verdict is None:
                raise InvalidInput(
                    "This route grades whole answers: send one verdict, correct or incorrect.",
                    code="invalid_verdict",
                )
            label = FinalLabel(
                decision_id=item.decision_id,
                item=item,
                correct=verdict == Verdict.CORRECT,
                method=LabelMethod.ADJUDICATED,
                decided_by=reviewer,
                note=note or "",
            )
            label.full_clean(
                exclude=["decision", "item", "decided_by"], validate_unique=False, validate_constraints=False
            )
            label.save()
            changes = {"verdict": verdict, "method": LabelMethod.ADJUDICATED}
        item.status = ItemStatus.LABELLED
        item.save(update_fields=["status"])
        audit_record(
            actor=actor,
            action=Action.LABEL_ADJUDICATED,
            object_type="grading_item",
            object_id=item.pk,
            route=item.route.slug,
            payload={
                "objects": {"decision": [item.decision_id]},
                **field_changes(new=changes),
                "grades": [{"grader": g.grader.get_username(), "verdict": g.verdict} for g in grades],
                "note": note or "",
            },
        )
    return label


def _long_adjudicate(
    *, item: GradingItem, grades: list[Grade], reviewer, verdict, claims, note: str
) -> tuple[FinalLabel, dict[str, Any]]:
    if verdict is not None or claims is None:
        raise InvalidInput(
            "This route grades answers claim by claim: send a verdict for each claim the graders disagreed on.",
            code="claims_required",
            details=[detail("claims", "required", "a verdict for each disputed claim")],
        )
    per_grade = [long_answers.grade_claim_verdicts(g) for g in grades]
    count = len(selectors.item_claims(item))
    disputed = long_answers.disputed_claims(per_grade, count)
    decided = long_answers.claim_verdicts_checked(claims, count, indices=disputed)
    verdicts = [None] * count
    for index, claim_verdict in zip(disputed, decided, strict=True):
        verdicts[index] = claim_verdict
    for index in range(count):
        if verdicts[index] is None:  # agreed: every grade holds the same verdict
            verdicts[index] = per_grade[0][index]
    label = long_answers.long_label_write(
        item=item, verdicts=verdicts, method=LabelMethod.ADJUDICATED, decided_by=reviewer, note=note or ""
    )
    changes = {
        "verdict": label.verdict,
        "method": LabelMethod.ADJUDICATED,
        "claims_supported": label.claims_supported,
        "claims_verifiable": label.claims_verifiable,
        "claims": verdicts,
        "claims_adjudicated": disputed,
    }
    return label, changes


@dataclass
class LabelImportResult:
    created: int = 0
    unchanged: int = 0


def labels_import(
    *, actor: Actor, items: list[LabelInput], routes: dict[str, Route], decision_ids: dict[int, int]
) -> LabelImportResult:
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
        elif (first.verdict, first.source, first.claims) == (item.verdict, item.source, item.claims):
            repeats += 1
        else:
            conflicts.append(
                detail(
                    "request_id",
                    "request_id_conflict",
                    f"differs from item {first.index} for the same decision",
                    index=item.index,
                    route=item.route,
                    request_id=item.request_id,
                )
            )
    for attempt in range(3):
        try:
            with transaction.atomic():
                return _labels_import_once(actor, wanted, routes, repeats, conflicts)
        except IntegrityError:  # a concurrent import stored one of these labels first: compare again
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _claim_verdicts(label: FinalLabel) -> tuple[tuple[int, str], ...] | None:
    """A stored label's claim verdicts as a LabelInput holds them; None for a short answer's label."""
    if label.claims_verifiable is None:
        return None
    return tuple(sorted((c.index, c.verdict) for c in label.claim_labels.all()))


def _labels_import_once(actor, wanted: dict[int, LabelInput], routes, repeats, conflicts) -> LabelImportResult:
    conflicts = list(conflicts)
    existing = {
        label.decision_id: label
        for label in FinalLabel.objects.filter(decision_id__in=wanted).prefetch_related("claim_labels")
    }
    fresh = {}
    for decision_id, item in wanted.items():
        label = existing.get(decision_id)
        if label is None:
            fresh[decision_id] = item
        elif not (
            label.method == LabelMethod.IMPORTED
            and label.correct == item.correct
            and label.source == item.source
            and _claim_verdicts(label) == item.claims
        ):
            conflicts.append(
                detail(
                    "verdict",
                    "already_labelled",
                    f"already labelled {label.verdict} ({label.method}{', ' + label.source if label.source else ''})",
                    index=item.index,
                    route=item.route,
                    request_id=item.request_id,
                )
            )
    if conflicts:
        raise Conflict(
            "Some decisions already hold another label; nothing was written.",
            details=sorted(conflicts, key=lambda c: c["index"]),
        )
    result = LabelImportResult(unchanged=len(wanted) - len(fresh) + repeats, created=len(fresh))
    if not fresh:
        return result
    pool_items = {
        i.decision_id: i for i in GradingItem.objects.select_for_update().filter(decision_id__in=fresh, is_gold=False)
    }
    labels = []
    for decision_id, item in fresh.items():
        label = FinalLabel(
            decision_id=decision_id,
            item=pool_items.get(decision_id),
            correct=item.correct,
            method=LabelMethod.IMPORTED,
            source=item.source,
            claims_supported=item.claims_supported,
            claims_verifiable=item.claims_verifiable,
        )
        label.clean_fields(exclude=["decision", "item", "decided_by"])
        labels.append(label)
    FinalLabel.objects.bulk_create(labels)
    # A long answer's verdict per claim, beside its label (the ids came back from the insert).
    claim_labels = [
        FinalClaimLabel(label=label, index=claim_index, verdict=verdict)
        for label, item in zip(labels, fresh.values(), strict=True)
        for claim_index, verdict in item.claims or ()
    ]
    FinalClaimLabel.objects.bulk_create(claim_labels)
    GradingItem.objects.filter(
        pk__in=[i.pk for i in pool_items.values()], status__in=[ItemStatus.OPEN, ItemStatus.ADJUDICATION]
    ).update(status=ItemStatus.LABELLED)
    by_route: dict[str, list[int]] = {}
    sources: dict[str, set[str]] = {}
    claim_counts: dict[str, int] = {}
    for decision_id, item in fresh.items():
        by_route.setdefault(item.route, []).append(decision_id)
        sources.setdefault(item.route, set()).add(item.source)
        claim_counts[item.route] = claim_counts.get(item.route, 0) + len(item.claims or ())
    audit_record_many(
        actor=actor,
        events=[
            EventSpec(
                Action.LABELS_IMPORTED,
                "route",
                slug,
                route=slug,
                payload={
                    "objects": {"decision": sorted(ids)},
                    "created": len(ids),
                    "sources": sorted(sources[slug]),
                    **({"claim_labels": claim_counts[slug]} if claim_counts.get(slug) else {}),
                },
            )
            for slug, ids in sorted(by_route.items())
        ],
    )
    return result
