"""Reads of blind grading. What a grader may see is built here, in `GraderItem`, and nowhere else."""

from __future__ import annotations

import difflib
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, time
from itertools import combinations
from statistics import median
from typing import Any

from django.db import connection
from django.db.models import Count, F, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import detail
from console.ledger.claims import claim_texts
from console.ledger.compression import decompress_text
from console.ledger.models import AnswerForm, Decision
from console.ledger.selectors import answer_settings, logged_passages
from console.stats import agreement
from grading.models import (
    Assignment,
    ClaimGrade,
    FinalLabel,
    Grade,
    GradingItem,
    GradingPlan,
    ItemStatus,
    RouteGradingSettings,
    Verdict,
)
from grading.services.claims import disputed_claims, grade_claim_verdicts
from grading.validation import LabelInput


@dataclass(frozen=True)
class GraderItem:
    """Everything a grader is shown about an item. It has no field for the score, outcome, cutoff,
    the answer's origin, verifier results or other grades, so no page or response can leak them.

    Passage ids are positions 1..n in rank order, never database ids (which follow ingest order).
    """

    id: str
    question: str
    answer: str
    passages: list[dict[str, Any]]
    guidelines: str
    lease_expires_at: datetime
    # A long route's answer split into its claims, graded one by one; None on a short route. Only the
    # texts: an ingested claim's citations are left out, as passage ids are.
    claims: list[str] | None = None

    def as_dict(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "passages": self.passages,
            "guidelines": self.guidelines,
        }
        if self.claims is not None:  # a short route's item keeps exactly its documented shape
            item["claims"] = [{"index": index, "text": text} for index, text in enumerate(self.claims)]
        return {"item": item, "lease_expires_at": self.lease_expires_at.isoformat()}


def route_is_long(route: Route) -> bool:
    """Whether the route's answers are graded claim by claim."""
    return answer_settings(route).answer_form == AnswerForm.LONG


_UNREAD = object()


def item_claims(item: GradingItem) -> list[str]:
    """The claims of the answer a grader reads on the item, in the order their indices follow.

    An item that shows its decision's answer takes the decision's claims as ingested
    (`console.ledger.claims.answer_claims` reads the same list, so grades and imported claim labels
    share indices); otherwise (no claims were sent, a shadow run's or a gold item's own answer) the
    answer is split as the span verifier splits a claim into units. A claim read by the queue's
    claim comes as `decision_claims` (JSON text); otherwise from the item's decision.
    """
    stored = item.__dict__.get("decision_claims", _UNREAD)  # the claim's SQL leaves it NULL for an own answer
    if stored is _UNREAD:
        stored = None if item.own_answer or item.decision_id is None else item.decision.claims
    # the shown answer, not always the decision's claim: a served answer may differ from it
    return claim_texts(json.loads(stored) if isinstance(stored, str) else stored, item.answer)


def _passages(decision_id: int | None) -> list[dict[str, Any]]:
    if decision_id is None:
        return []
    passages = logged_passages(decision_id)
    return [{"id": position, "text": passage.text} for position, passage in enumerate(passages, start=1)]


def grader_item(assignment: Assignment) -> GraderItem:
    """The grader's view of a leased item; `assignment.item` must carry `route_guidelines`.

    A freshly claimed item also carries `passage_texts` (the claim read them in rank order, as the
    passage table stores them).
    """
    item = assignment.item
    texts = getattr(item, "passage_texts", None)
    guidelines = getattr(item, "route_guidelines", None)
    if guidelines is None:  # an item given back by an undo comes with its route
        guidelines = route_grading_settings(item.route).guidelines
    passages = (
        _passages(item.decision_id)
        if texts is None
        else [{"id": position, "text": decompress_text(stored)} for position, stored in enumerate(texts, start=1)]
    )
    answer_form = getattr(item, "answer_form", None)  # read by the queue's claim
    long = route_is_long(item.route) if answer_form is None else answer_form == AnswerForm.LONG
    return GraderItem(
        id=str(item.public_id),
        question=item.question,
        answer=item.answer,
        passages=passages,
        guidelines=guidelines,
        lease_expires_at=assignment.lease_expires_at,
        claims=item_claims(item) if long else None,
    )


def route_grading_settings(route: Route) -> RouteGradingSettings:
    """The route's grading settings: its row, or an unsaved row of the defaults when it has none.
    Read once per route instance (cached on it; `select_related("grading_settings")` saves the query)."""
    settings = getattr(route, "grading_settings", None)
    return settings if settings is not None else RouteGradingSettings(route_id=route.pk)


def published_guidelines(route: Route) -> str:
    """The route's guidelines as stored now (read afresh, not from a row cached on `route`)."""
    return RouteGradingSettings.objects.filter(route_id=route.pk).values_list("guidelines", flat=True).first() or ""


SLUG = re.compile(r"[-a-zA-Z0-9_]{1,64}")


def gradable_routes(user) -> QuerySet[Route]:
    return permissions.visible(Route.objects.all(), user, permissions.GRADERS, field="pk")


def reviewable_routes(user) -> QuerySet[Route]:
    # with the answer settings: a long route's agreement is also reported claim by claim
    return permissions.visible(
        Route.objects.select_related("answer_settings"), user, permissions.LABEL_REVIEWERS, field="pk"
    )


def gradable_route_ids(user, route: Route | None = None) -> list[int] | None:
    """Route ids to draw from: one route, or None for "every route" when the grader's role is global."""
    if route is not None:
        return [route.pk]
    condition = permissions.route_filter(user, permissions.GRADERS, field="pk")
    if condition is None:
        return None
    return list(Route.objects.filter(condition).values_list("pk", flat=True))


def current_lease(grader, route_ids: list[int] | None) -> Assignment | None:
    """The grader's running, ungraded lease (the page shows it again after a reload)."""
    queryset = Assignment.objects.filter(
        grader=grader, skipped=False, graded_at__isnull=True, lease_expires_at__gt=timezone.now()
    )
    if route_ids is not None:
        queryset = queryset.filter(item__route_id__in=route_ids)
    # with the item's decision, whose texts the item reads unless it holds its own
    assignment = (
        queryset.select_related("item__route__grading_settings", "item__route__answer_settings", "item__decision")
        .order_by("leased_at")
        .first()
    )
    if assignment is not None:
        assignment.item.route_guidelines = route_grading_settings(assignment.item.route).guidelines
    return assignment


def grader_progress(grader, route_ids: list[int] | None) -> dict[str, int]:
    """Grades the grader gave today (UTC), and open items in these routes they have not been handed."""
    midnight = timezone.make_aware(datetime.combine(timezone.now().date(), time.min))
    graded_today = Grade.objects.filter(grader=grader, created_at__gte=midnight).count()
    open_items = GradingItem.objects.filter(status=ItemStatus.OPEN, is_gold=False)
    if route_ids is not None:
        open_items = open_items.filter(route_id__in=route_ids)
    left = open_items.exclude(assignments__grader=grader).count()
    return {"graded_today": graded_today, "left": left}


@dataclass(frozen=True)
class SavedGrade:
    """What the queue says about the grade just given: the grader's own verdict, and whether they
    may still take it back. Nothing about the item's other grades, its label or its decision."""

    item_id: str
    verdict: str
    undoable: bool
    # A claim-by-claim grade: "k of m claims supported" in the grader's own verdicts; "" otherwise.
    claims: str = ""


def grade_withdrawable(item: GradingItem) -> bool:
    """Whether a grade on the item may still be taken back: the item still waits for grades, and
    (for a pool item) its decision holds no final label from any source."""
    if item.status != ItemStatus.OPEN:
        return False
    return item.is_gold or not FinalLabel.objects.filter(decision_id=item.decision_id).exists()


def latest_grade_id(grader) -> int | None:
    """The grader's most recent grade, the only one Undo may take back."""
    return Grade.objects.filter(grader=grader).order_by("-created_at", "-pk").values_list("pk", flat=True).first()


def saved_grade(grader, public_id) -> SavedGrade | None:
    """The grader's grade on the item, if any; undoable only while it is their latest grade and
    the item still waits for grades (the same rules `grade_withdraw` applies)."""
    if public_id is None:
        return None
    grade = (
        Grade.objects.filter(grader=grader, item__public_id=public_id)
        .select_related("item")
        .prefetch_related("claim_grades")
        .first()
    )
    if grade is None:
        return None
    verdicts = grade_claim_verdicts(grade)
    return SavedGrade(
        item_id=str(grade.item.public_id),
        verdict=grade.verdict,
        undoable=grade.pk == latest_grade_id(grader) and grade_withdrawable(grade.item),
        claims="" if verdicts is None else f"{verdicts.count('supported')} of {len(verdicts)} claims supported",
    )


# --------------------------------------------------------------------------- reviewers


def adjudication_queue(user) -> QuerySet[GradingItem]:
    """Items the graders did not agree on, in routes the user reviews, oldest first."""
    return (
        permissions.visible(
            GradingItem.objects.with_texts().filter(status=ItemStatus.ADJUDICATION), user, permissions.LABEL_REVIEWERS
        )
        .select_related("route")
        .annotate(grade_count=Count("grades"))
        .order_by("created_at", "pk")
    )


@dataclass(frozen=True)
class AdjudicationView:
    """What a reviewer sees to adjudicate: the item and every grade, still without score or outcome."""

    item: GradingItem
    passages: list[dict[str, Any]]
    grades: list[Grade]
    label: FinalLabel | None = None
    guidelines: str = ""
    # A long route's item: the claims the graders disagreed on, and only those, each with its index,
    # text and every grader's verdict on it: [{"index", "text", "grades": [{"grader", "verdict"}]}].
    claims: list[dict[str, Any]] | None = None


def adjudication_item(user, public_id) -> AdjudicationView:
    item = (
        permissions.visible(
            GradingItem.objects.with_texts().filter(public_id=public_id, is_gold=False),
            user,
            permissions.LABEL_REVIEWERS,
        )
        .select_related("route__grading_settings", "route__answer_settings", "final_label__decided_by", "decision")
        .first()
    )
    if item is None:
        raise Http404("No such item.")
    long = route_is_long(item.route)
    grades = item.grades.select_related("grader").order_by("created_at", "pk")
    grades = list(grades.prefetch_related("claim_grades") if long else grades)
    label = getattr(item, "final_label", None)
    if label is None and item.status == ItemStatus.LABELLED:
        # a label imported before the decision entered the pool is tied to the decision alone
        label = FinalLabel.objects.filter(decision_id=item.decision_id).select_related("decided_by").first()
    return AdjudicationView(
        item=item,
        passages=_passages(item.decision_id),
        grades=grades,
        label=label,
        guidelines=route_grading_settings(item.route).guidelines,
        claims=_disputed_claims(item, grades) if long else None,
    )


def _disputed_claims(item: GradingItem, grades: list[Grade]) -> list[dict[str, Any]]:
    texts = item_claims(item)
    per_grade = [grade_claim_verdicts(g) for g in grades]
    return [
        {
            "index": index,
            "text": texts[index],
            "grades": [
                {"grader": g.grader.get_username(), "verdict": None if verdicts is None else verdicts[index]}
                for g, verdicts in zip(grades, per_grade, strict=True)
            ],
        }
        for index in disputed_claims(per_grade, len(texts))
    ]


def decision_grading(decision_id: int) -> dict[str, Any]:
    """Grades and final label of a decision, for readers of decisions (never for graders)."""
    grades = (
        Grade.objects.filter(item__decision_id=decision_id, item__is_gold=False)
        .select_related("grader")
        .order_by("created_at", "pk")
    )
    label = FinalLabel.objects.filter(decision_id=decision_id).select_related("decided_by").first()
    return {
        "grades": [
            {
                "grader": g.grader.get_username(),
                "verdict": g.verdict,
                "note": g.note,
                "seconds_spent": g.seconds_spent,
                "created_at": g.created_at.isoformat(),
            }
            for g in grades
        ],
        "final_label": None
        if label is None
        else {
            "verdict": label.verdict,
            "method": label.method,
            "source": label.source or None,
            "decided_by": label.decided_by.get_username() if label.decided_by else None,
            "note": label.note,
            "decided_at": label.decided_at.isoformat(),
        },
    }


# --------------------------------------------------------------------------- agreement

# Fewer common items than this and a coefficient is noise (one disagreement reads as kappa -1): the
# page says "too few items" instead of a figure (docs/statistics.md).
AGREEMENT_MIN_ITEMS = 10
# Below this share for the rarest verdict-in-use, or above it for the commonest, kappa's chance term
# nears 1 and kappa collapses while graders still agree; AC1 is then the coefficient to read.
EXTREME_PREVALENCE = 0.8
MAX_PAIRS = 20


def route_agreement(route: Route, *, confidence: float = 0.95) -> dict[str, Any]:
    """Agreement between the route's graders, their counts, agreement with final labels, gold accuracy.

    Regular items with two or more grades feed Fleiss' kappa and Gwet's AC1 (unsure is a category
    of its own there); each pair of graders with common items gets Cohen's kappa.
    """
    rows = list(
        Grade.objects.filter(item__route=route)
        .values_list("item_id", "item__is_gold", "item__gold_verdict", "grader__username", "verdict", "seconds_spent")
        .order_by("item_id", "pk")
    )
    labels = dict(FinalLabel.objects.filter(item__route=route).values_list("item_id", "correct"))
    per_item: dict[int, dict[str, str]] = defaultdict(dict)
    graders: dict[str, dict[str, Any]] = {}
    for item_id, is_gold, gold_verdict, grader, verdict, seconds in rows:
        entry = graders.setdefault(
            grader,
            {
                "grader": grader,
                "grades": 0,
                "seconds": [],
                **{v: 0 for v in Verdict.values},
                "gold": ([], []),
                "label": ([], []),
            },
        )
        entry["grades"] += 1
        entry[verdict] += 1
        if seconds is not None:
            entry["seconds"].append(seconds)
        if is_gold:
            entry["gold"][0].append(verdict)
            entry["gold"][1].append(gold_verdict)
            continue
        per_item[item_id][grader] = verdict
        if item_id in labels:
            entry["label"][0].append(verdict)
            entry["label"][1].append(Verdict.CORRECT if labels[item_id] else Verdict.INCORRECT)
    multi = [list(by_grader.values()) for by_grader in per_item.values() if len(by_grader) >= 2]
    result: dict[str, Any] = {
        "route": route.slug,
        "confidence": confidence,
        "items_graded": len(per_item),
        "items_multiply_graded": len(multi),
        "min_items": AGREEMENT_MIN_ITEMS,
        "fleiss_kappa": None,
        "gwet_ac1": None,
        "prevalence": None,
        "extreme_prevalence": False,
    }
    if multi:
        counts = agreement.verdict_counts(multi)
        shares = counts.sum(axis=0) / counts.sum()
        result["prevalence"] = dict(zip(agreement.VERDICTS, (float(s) for s in shares), strict=True))
        result["extreme_prevalence"] = bool(shares.max() >= EXTREME_PREVALENCE)
        result["fleiss_kappa"] = agreement.fleiss_kappa(counts, confidence=confidence)
        result["gwet_ac1"] = agreement.gwet_ac1(counts, confidence=confidence)
    result["pairs"] = _cohen_pairs(per_item, confidence)
    result["graders"] = [_grader_summary(entry, confidence) for _name, entry in sorted(graders.items())]
    if route_is_long(route):
        result["claims"] = claim_agreement(route, confidence=confidence)
    return result


def claim_agreement(route: Route, *, confidence: float = 0.95) -> dict[str, Any]:
    """Agreement claim by claim on the route's regular items: Fleiss' kappa over every claim graded
    twice or more (unverifiable is a verdict of its own), with a cluster bootstrap interval over the
    answers those claims belong to (`console.stats.agreement.clustered_fleiss_kappa`)."""
    rows = ClaimGrade.objects.filter(grade__item__route=route, grade__item__is_gold=False).values_list(
        "grade__item_id", "index", "verdict"
    )
    per_claim: dict[tuple[int, int], list[str]] = defaultdict(list)
    for item_id, index, verdict in rows.iterator():
        per_claim[(item_id, index)].append(verdict)
    multi = sorted((key, verdicts) for key, verdicts in per_claim.items() if len(verdicts) >= 2)
    result: dict[str, Any] = {
        "claims_graded": len(per_claim),
        "claims_multiply_graded": len(multi),
        "answers": len({item_id for (item_id, _index), _ in multi}),
        "fleiss_kappa": None,
        "prevalence": None,
    }
    if multi:
        counts = agreement.verdict_counts([verdicts for _, verdicts in multi], agreement.CLAIM_VERDICTS)
        shares = counts.sum(axis=0) / counts.sum()
        result["prevalence"] = dict(zip(agreement.CLAIM_VERDICTS, (float(s) for s in shares), strict=True))
        result["fleiss_kappa"] = agreement.clustered_fleiss_kappa(
            counts, [item_id for (item_id, _index), _ in multi], confidence=confidence
        )
    return result


def _cohen_pairs(per_item: dict[int, dict[str, str]], confidence: float) -> list[dict[str, Any]]:
    common: dict[tuple[str, str], tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for by_grader in per_item.values():
        for a, b in combinations(sorted(by_grader), 2):
            common[(a, b)][0].append(by_grader[a])
            common[(a, b)][1].append(by_grader[b])
    pairs = sorted(common.items(), key=lambda kv: (-len(kv[1][0]), kv[0]))[:MAX_PAIRS]
    return [
        {
            "graders": [a, b],
            "items": len(first),
            "cohen_kappa": agreement.cohen_kappa(first, second, confidence=confidence),
        }
        for (a, b), (first, second) in pairs
        if len(first) >= 2
    ]


def _grader_summary(entry: dict[str, Any], confidence: float) -> dict[str, Any]:
    gold_verdicts, gold = entry.pop("gold")
    label_verdicts, label = entry.pop("label")
    seconds = entry.pop("seconds")
    entry["median_seconds"] = median(seconds) if seconds else None
    entry["gold_accuracy"] = (
        agreement.rater_accuracy_on_gold(gold_verdicts, gold, confidence=confidence) if gold else None
    )
    # Agreement with the final label is accuracy against it: the same Wilson proportion over votes.
    entry["label_agreement"] = (
        agreement.rater_accuracy_on_gold(label_verdicts, label, confidence=confidence) if label else None
    )
    return entry


def decisions_for_labels(items: list[LabelInput], routes: dict[str, Route]) -> tuple[dict[int, int], list[dict]]:
    """Map item index -> decision id; one error per item whose decision is not stored."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k.position, d.id FROM unnest(%s::int[], %s::bigint[], %s::text[]) AS k(position, route_id, "
            "request_id) JOIN ledger_decision d ON d.route_id = k.route_id AND d.request_id = k.request_id",
            [[i.index for i in items], [routes[i.route].pk for i in items], [i.request_id for i in items]],
        )
        found = dict(cursor.fetchall())
    errors = [
        detail(
            "request_id",
            "unknown_decision",
            f"no decision {i.request_id!r} on route {i.route!r}",
            index=i.index,
            value=f"{i.route}/{i.request_id}",
        )
        for i in items
        if i.index not in found
    ]
    return found, errors


def claim_label_errors(items: list[LabelInput], decision_ids: dict[int, int]) -> list[dict]:
    """One error per claims-form label whose verdicts do not cover its decision's claims
    (`answer_claims`: the claims sent, else the claim's units) exactly once each. One query, for
    the claims-form items only."""
    wanted = {decision_ids[i.index] for i in items if i.claims is not None}
    if not wanted:
        return []
    counts = {
        pk: len(claim_texts(claims, claim))
        for pk, claim, claims in Decision.objects.filter(pk__in=wanted).values_list("pk", "claim", "claims")
    }
    errors = []
    for item in items:
        if item.claims is None:
            continue
        count = counts[decision_ids[item.index]]
        given = {claim_index for claim_index, _ in item.claims}
        for position, (claim_index, _) in enumerate(item.claims):
            if claim_index >= count:
                errors.append(
                    detail(
                        f"claims[{position}].index",
                        "unknown_claim",
                        f"the answer has {count} claims (0 to {count - 1}); there is no claim {claim_index}",
                        index=item.index,
                    )
                )
        missing = sorted(set(range(count)) - given)
        if missing:
            shown = ", ".join(map(str, missing[:20])) + (" ..." if len(missing) > 20 else "")
            errors.append(
                detail("claims", "missing_claims", f"every claim needs a verdict; missing: {shown}", index=item.index)
            )
    return errors


# --------------------------------------------------------------------------- guidelines


def guidelines_diff(old: str, new: str) -> list[dict[str, str]]:
    """Line changes from the published guidelines to the new text, with two lines of context:
    [{"kind": "hunk" | "added" | "removed" | "same", "text"}]; empty when nothing changed."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2))
    kinds = {"@": "hunk", "+": "added", "-": "removed", " ": "same"}
    # The first two lines name the files; a removed Markdown rule ("---") must not be taken for one.
    return [{"kind": kinds[line[0]], "text": line} for line in lines[2:]]


# --------------------------------------------------------------------------- admins: plans and gold items


def managed_routes(user) -> QuerySet[Route]:
    """Routes whose sampling plan and gold items the user may set (admins: every route), each with
    its plan (or None) and how many gold items are handed out now: one query for the whole list."""
    if not permissions.can_manage_grading(user):
        return Route.objects.none()
    active_gold = Count("grading_items", filter=Q(grading_items__is_gold=True, grading_items__status=ItemStatus.OPEN))
    return Route.objects.select_related("grading_plan").annotate(active_gold=active_gold).order_by("name", "pk")


def managed_route(user, slug: str) -> Route:
    """The route an admin page manages; 404 for a route that does not exist."""
    route = managed_routes(user).filter(slug=slug).first()
    if route is None:
        raise Http404("No such route.")
    return route


def route_plan(route: Route) -> GradingPlan | None:
    return GradingPlan.objects.filter(route=route).first()


def gold_items(route: Route) -> list[GradingItem]:
    """The route's gold items handed out now, newest first, with their texts, their decision's request
    id, and how graders did on them so far (grades, and how many matched the known verdict)."""
    return list(
        GradingItem.objects.with_texts()
        .filter(route=route, is_gold=True, status=ItemStatus.OPEN)
        .annotate(
            request_id=F("decision__request_id"),
            grades_given=Count("grades", distinct=True),
            grades_matching=Count("grades", filter=Q(grades__verdict=F("gold_verdict")), distinct=True),
        )
        .order_by("-created_at", "-pk")
    )


def removed_gold_count(route: Route) -> int:
    return GradingItem.objects.filter(route=route, is_gold=True).exclude(status=ItemStatus.OPEN).count()


def gold_item_of_route(route: Route, pk: int) -> GradingItem:
    item = GradingItem.objects.filter(route=route, is_gold=True, pk=pk).first()
    if item is None:
        raise Http404("No such gold item.")
    return item
