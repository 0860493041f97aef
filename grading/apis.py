"""API v1 of blind grading: the queue for graders, adjudication and agreement for reviewers, label import."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.accounts import permissions
from console.accounts.models import Route
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.batches import batch_records, raise_batch_invalid
from console.core.errors import Conflict, Forbidden, InvalidInput, detail
from console.core.openapi import link, links
from console.core.paging import Keyset, page_parameters, page_schema
from console.core.parsers import body_checked
from console.ledger.services import routes_for_items
from grading import schemas, selectors
from grading.blindness import route_blindness
from grading.models import ClaimVerdict, GradingItem, Verdict
from grading.selectors import SLUG
from grading.services import labels as labels_services
from grading.services import queue as queue_services
from grading.validation import validate_labels

_GRADER_ITEM = inline_serializer(
    "GraderItem",
    {
        "item": inline_serializer(
            "GraderItemBody",
            {
                "id": serializers.CharField(),
                "question": serializers.CharField(),
                "answer": serializers.CharField(),
                "passages": serializers.ListField(
                    child=inline_serializer(
                        "GraderPassage", {"id": serializers.IntegerField(), "text": serializers.CharField()}
                    )
                ),
                "guidelines": serializers.CharField(),
                "claims": serializers.ListField(
                    required=False,
                    help_text="Long routes only: the answer split into its claims, each graded on its own.",
                    child=inline_serializer(
                        "GraderClaim", {"index": serializers.IntegerField(), "text": serializers.CharField()}
                    ),
                ),
            },
        ),
        "lease_expires_at": serializers.DateTimeField(),
    },
)


class ClaimVerdictInput(serializers.Serializer):
    """One claim's verdict: its index in the item's `claims` and supported / unsupported / unverifiable."""

    class Meta:
        ref_name = "ClaimVerdictInput"

    index = serializers.IntegerField(min_value=0)
    verdict = serializers.ChoiceField(choices=ClaimVerdict.values)


_NO_STORE = {"Cache-Control": "no-store"}


def _item_uuid(item_id: str) -> uuid.UUID:
    """Item ids are opaque; one that is not even well formed is as unheld as any other (409)."""
    try:
        return uuid.UUID(item_id)
    except ValueError:
        raise Conflict("You hold no running lease on this item; ask for the next item.", code="no_lease") from None


def _require_grader(user) -> None:
    if not permissions.can_grade(user):
        raise Forbidden("Your role does not allow grading.")


def _route_or_400(slug) -> Route:
    if not isinstance(slug, str) or not SLUG.fullmatch(slug):
        raise InvalidInput('"route" must be a route slug.', details=[detail("route", "invalid", "must be a slug")])
    route = Route.objects.filter(slug=slug).first()
    if route is None:
        raise InvalidInput(
            f"Unknown route: {slug[:64]}.",
            code="unknown_route",
            details=[detail("route", "unknown_route", f"unknown route {slug[:64]!r}")],
        )
    return route


class GradingNextApi(APIView):
    """Lease the next item to grade. The answer is shown blind: no score, outcome or origin."""

    @extend_schema(
        request={"application/json": schemas.GRADING_NEXT_BODY},
        responses={
            200: _GRADER_ITEM,
            204: OpenApiResponse(description="Nothing left for you (no body)."),
            400: ERROR,
            401: ERROR,
            403: ERROR,
        },
        summary="Lease the next item to grade",
        extensions=links(
            {
                200: {
                    "GradeIt": link(
                        "/api/v1/grading/items/{item_id}/grades",
                        method="post",
                        parameters={"item_id": "$response.body#/item/id"},
                    ),
                    "SkipIt": link(
                        "/api/v1/grading/items/{item_id}/skip",
                        method="post",
                        parameters={"item_id": "$response.body#/item/id"},
                    ),
                }
            }
        ),
        examples=[
            OpenApiExample("Any route", value={}, request_only=True),
            OpenApiExample("One route", value={"route": "it-support"}, request_only=True),
            OpenApiExample(
                "An item, blind",
                response_only=True,
                status_codes=["200"],
                value={
                    "item": {
                        "id": "0af66f46-c822-4057-8d8c-00eac3bd43b4",
                        "question": "How do I reset MFA?",
                        "answer": "Open Settings > Security and choose Reset.",
                        "passages": [{"id": 12, "text": "To reset MFA, open Settings > Security and choose Reset."}],
                        "guidelines": "Correct only if the passages support every step.",
                    },
                    "lease_expires_at": "2026-11-02T10:15:00+00:00",
                },
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        _require_grader(request.user)
        body = request.data if request.data is not None else {}
        if not isinstance(body, dict) or body.keys() - {"route"}:
            raise InvalidInput('Body must be {} or {"route": "slug"}.', code="invalid_body")
        route = None
        if body.get("route") is not None:
            route = _route_or_400(body["route"])
            if not permissions.can_grade(request.user, route):
                raise Forbidden("Your role does not allow grading on this route.")
        assignment = queue_services.assignment_claim(
            actor=Actor.from_request(request),
            grader=request.user,
            route_ids=selectors.gradable_route_ids(request.user, route),
        )
        if assignment is None:
            return Response(status=204, headers=_NO_STORE)
        return Response(selectors.grader_item(assignment).as_dict(), headers=_NO_STORE)


class GradeCreateApi(APIView):
    """Grade an item you hold a running lease on; 409 without one, or the second time.

    A short route's item takes one `verdict`; a long route's item takes `claims`, a verdict for each
    of its claims (every index of the item's `claims` once), and no `verdict`."""

    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"verdict", "claims", "note", "seconds_spent"}

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "GradeInput"

        verdict = serializers.ChoiceField(choices=Verdict.values, required=False)
        claims = ClaimVerdictInput(many=True, required=False, max_length=1000)
        note = serializers.CharField(required=False, allow_blank=True, max_length=labels_services.MAX_NOTE, default="")
        seconds_spent = serializers.FloatField(required=False, min_value=0, max_value=labels_services.MAX_SECONDS)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "GradeOutput"

        item = serializers.CharField()
        verdict = serializers.CharField(help_text="On a long route, the verdict the claims imply.")
        note = serializers.CharField()
        claims = ClaimVerdictInput(many=True, required=False, help_text="Long routes only: as sent.")

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR},
        summary="Grade a leased item",
        examples=[
            OpenApiExample(
                "Correct", request_only=True, value={"verdict": "correct", "note": "", "seconds_spent": 41.5}
            ),
            OpenApiExample(
                "Claim by claim (a long route)",
                request_only=True,
                value={
                    "claims": [
                        {"index": 0, "verdict": "supported"},
                        {"index": 1, "verdict": "unsupported"},
                        {"index": 2, "verdict": "unverifiable"},
                    ]
                },
            ),
            OpenApiExample(
                "Recorded",
                response_only=True,
                status_codes=["201"],
                value={"item": "0af66f46-c822-4057-8d8c-00eac3bd43b4", "verdict": "correct", "note": ""},
            ),
        ],
    )
    def post(self, request: Request, item_id: str) -> Response:
        _require_grader(request.user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        claims = data.pop("claims", None)
        grade = labels_services.grade_submit(
            actor=Actor.from_request(request),
            grader=request.user,
            public_id=_item_uuid(item_id),
            claims=None if claims is None else [dict(c) for c in claims],
            **data,
        )
        # Only what the grader sent: whether the item is now labelled would tell them how others graded.
        body = {"item": item_id, "verdict": grade.verdict, "note": grade.note}
        if claims is not None:
            body["claims"] = sorted(({"index": c["index"], "verdict": c["verdict"]} for c in claims), key=_by_index)
        return Response(body, status=201, headers=_NO_STORE)


def _by_index(claim: dict) -> int:
    return claim["index"]


class SkipApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset()

    @extend_schema(
        request=None,
        responses={204: OpenApiResponse(description="Skipped (no body)."), 401: ERROR, 403: ERROR, 409: ERROR},
        summary="Skip a leased item (never offered to you again)",
    )
    def post(self, request: Request, item_id: str) -> Response:
        body_checked(request)
        _require_grader(request.user)
        queue_services.assignment_skip(
            actor=Actor.from_request(request), grader=request.user, public_id=_item_uuid(item_id)
        )
        return Response(status=204)


# --------------------------------------------------------------------------- reviewers


def _adjudication_dict(view: selectors.AdjudicationView) -> dict:
    item = view.item
    return {
        "id": str(item.public_id),
        "route": item.route.slug,
        "question": item.question,
        "answer": item.answer,
        "passages": view.passages,
        "grades": [{"grader": g.grader.get_username(), "verdict": g.verdict, "note": g.note} for g in view.grades],
        **({} if view.claims is None else {"claims": view.claims}),
    }


_WAITING_EXAMPLE = {"id": "0af66f46-c822-4057-8d8c-00eac3bd43b4", "route": "it-support", "grades": 2}
# Oldest first, as the queue is worked.
_ADJUDICATION_PAGES = Keyset("grading.adjudications", "created_at", "pk")


class AdjudicationListApi(APIView):
    @extend_schema(
        parameters=[schemas.ROUTE_FILTER, *page_parameters(500)],
        responses={
            200: page_schema("AdjudicationList", schemas.AdjudicationSummary(), also_as="items"),
            400: ERROR,
            403: ERROR,
        },
        examples=[
            OpenApiExample(
                "One waiting",
                response_only=True,
                value={"results": [_WAITING_EXAMPLE], "next": None, "items": [_WAITING_EXAMPLE]},
            )
        ],
        summary="Items the graders disagreed on",
    )
    def get(self, request: Request) -> Response:
        if not permissions.can_review_labels(request.user):
            raise Forbidden("Only reviewers adjudicate.")
        queryset = selectors.adjudication_queue(request.user)
        slug = request.query_params.get("route")
        if slug:
            if not SLUG.fullmatch(slug):
                raise InvalidInput('"route" must be a route slug.')
            queryset = queryset.filter(route__slug=slug)
        page, next_url = _ADJUDICATION_PAGES.page(request, queryset, default_limit=500)
        rows = [{"id": str(i.public_id), "route": i.route.slug, "grades": i.grade_count} for i in page]
        return Response({"results": rows, "next": next_url, "items": rows})


class AdjudicateApi(APIView):
    """A short route's item takes one `verdict`; a long route's item takes `claims`, a verdict for
    each claim listed in its `claims` (the ones the graders disagreed on) and no other."""

    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"verdict", "claims", "note"}

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "AdjudicationInput"

        verdict = serializers.ChoiceField(choices=[Verdict.CORRECT, Verdict.INCORRECT], required=False)
        claims = ClaimVerdictInput(many=True, required=False, max_length=1000)
        note = serializers.CharField(required=False, allow_blank=True, max_length=labels_services.MAX_NOTE, default="")

    @extend_schema(
        responses={200: schemas.AdjudicationItem, 403: ERROR, 404: ERROR},
        examples=[
            OpenApiExample(
                "Two graders disagree",
                response_only=True,
                value={
                    "id": "0af66f46-c822-4057-8d8c-00eac3bd43b4",
                    "route": "it-support",
                    "question": "How do I reset MFA?",
                    "answer": "Open Settings > Security and choose Reset.",
                    "passages": [{"id": 12, "text": "To reset MFA, open Settings > Security and choose Reset."}],
                    "grades": [
                        {"grader": "ann", "verdict": "correct", "note": ""},
                        {"grader": "bo", "verdict": "incorrect", "note": "Wrong menu."},
                    ],
                },
            )
        ],
        summary="An item waiting for adjudication",
    )
    def get(self, request: Request, item_id: str) -> Response:
        if not permissions.can_review_labels(request.user):
            raise Forbidden("Only reviewers adjudicate.")
        return Response(_adjudication_dict(selectors.adjudication_item(request.user, _uuid_or_404(item_id))))

    @extend_schema(
        request=InputSerializer,
        responses={201: schemas.AdjudicationResult, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
        examples=[
            OpenApiExample("Decide", value={"verdict": "correct", "note": "The passage says so."}, request_only=True),
            OpenApiExample(
                "Decided",
                response_only=True,
                status_codes=["201"],
                value={"item": "0af66f46-c822-4057-8d8c-00eac3bd43b4", "verdict": "correct", "method": "adjudicated"},
            ),
        ],
        summary="Decide an item the graders disagreed on",
    )
    def post(self, request: Request, item_id: str) -> Response:
        if not permissions.can_review_labels(request.user):
            raise Forbidden("Only reviewers adjudicate.")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        item = _reviewable_item(request.user, _uuid_or_404(item_id))
        data = dict(serializer.validated_data)
        claims = data.pop("claims", None)
        label = labels_services.label_adjudicate(
            actor=Actor.from_request(request),
            reviewer=request.user,
            item=item,
            claims=None if claims is None else [dict(c) for c in claims],
            **data,
        )
        body = {"item": item_id, "verdict": label.verdict, "method": label.method}
        if label.claims_verifiable is not None:
            body["claims_supported"] = label.claims_supported
            body["claims_verifiable"] = label.claims_verifiable
        return Response(body, status=201)


def _uuid_or_404(item_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(item_id)
    except ValueError:
        raise Http404("No such item.") from None


def _reviewable_item(user, public_id) -> GradingItem:
    item = permissions.visible(
        GradingItem.objects.filter(public_id=public_id, is_gold=False), user, permissions.LABEL_REVIEWERS
    ).first()
    if item is None:
        raise Http404("No such item.")
    return item


class AgreementApi(APIView):
    @extend_schema(
        parameters=[schemas.AGREEMENT_CONFIDENCE],
        responses={200: schemas.Agreement, 400: ERROR, 403: ERROR, 404: ERROR},
        examples=[
            OpenApiExample(
                "Too few items",
                response_only=True,
                value={
                    "route": "it-support",
                    "confidence": 0.95,
                    "items_graded": 4,
                    "items_multiply_graded": 0,
                    "min_items": 20,
                    "fleiss_kappa": None,
                    "gwet_ac1": None,
                    "prevalence": None,
                    "extreme_prevalence": False,
                    "pairs": [],
                    "graders": [
                        {
                            "grader": "ann",
                            "grades": 4,
                            "median_seconds": 38.0,
                            "gold_accuracy": None,
                            "label_agreement": None,
                        }
                    ],
                },
            )
        ],
        summary="Agreement between the route's graders",
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.reviewable_routes(request.user).filter(slug=slug).first()
        if route is None:
            if not permissions.can_review_labels(request.user):
                raise Forbidden("Only reviewers read agreement.")
            raise Http404("No such route.")
        try:
            confidence = float(request.query_params.get("confidence", 0.95))
        except ValueError:
            confidence = -1.0
        if not 0.5 <= confidence < 1:
            raise InvalidInput("confidence must lie in [0.5, 1).")
        return Response(selectors.route_agreement(route, confidence=confidence))


_ESTIMATE = inline_serializer(
    "BlindnessAuroc",
    {"value": serializers.FloatField(), "low": serializers.FloatField(), "high": serializers.FloatField()},
    allow_null=True,
    help_text="Out-of-fold AUROC with its percentile bootstrap interval; null when not enough items.",
)
_BLINDNESS = inline_serializer(
    "BlindnessProbe",
    {
        "route": serializers.CharField(),
        "n": serializers.IntegerField(help_text="Items the probe read (at most 2,000, drawn at random)."),
        "served": serializers.IntegerField(),
        "refused": serializers.IntegerField(),
        "population": inline_serializer(
            "BlindnessPopulation", {"served": serializers.IntegerField(), "refused": serializers.IntegerField()}
        ),
        "enough": serializers.BooleanField(help_text="False below 20 items of either origin; auroc is then null."),
        "reason": serializers.ChoiceField(
            choices=["too_few_items", "no_variation"],
            allow_null=True,
            help_text="Why auroc is null: fewer than 20 items of either origin (one origin only included), or "
            "every item has the same features (identical answers, or answers of numbers, emoji or punctuation "
            "only). Null when there is a reading.",
        ),
        "auroc": _ESTIMATE,
        "sign": serializers.ChoiceField(
            choices=["none", "weak", "warning"],
            allow_null=True,
            help_text="none: the interval includes 0.5; weak: it excludes 0.5 but its lower end is not above 0.6; "
            "warning: its lower end is above 0.6. Null when there is no reading.",
        ),
        "warning": serializers.BooleanField(help_text="The interval's lower end is above 0.6."),
        "features": serializers.ListField(
            child=inline_serializer(
                "BlindnessFeature",
                {
                    "feature": serializers.CharField(),
                    "weight": serializers.FloatField(),
                    "leans": serializers.ChoiceField(choices=["refused", "served"]),
                },
            )
        ),
        "method": inline_serializer(
            "BlindnessMethod",
            {
                "model": serializers.CharField(),
                "folds": serializers.IntegerField(min_value=2),
                "interval": serializers.CharField(),
                "resamples": serializers.IntegerField(min_value=0),
                "confidence": serializers.FloatField(),
                "seed": serializers.IntegerField(),
                "warning_when_low_above": serializers.FloatField(),
                "min_per_class": serializers.IntegerField(min_value=1),
            },
            help_text="How the probe was computed.",
        ),
        "message": serializers.CharField(),
    },
)


class BlindnessApi(APIView):
    @extend_schema(
        responses={200: _BLINDNESS, 403: ERROR, 404: ERROR},
        examples=[
            OpenApiExample(
                "Blind enough",
                response_only=True,
                value={
                    "route": "it-support",
                    "n": 400,
                    "served": 200,
                    "refused": 200,
                    "population": {"served": 9000, "refused": 3000},
                    "enough": True,
                    "reason": None,
                    "auroc": {"value": 0.52, "low": 0.46, "high": 0.58},
                    "sign": "none",
                    "warning": False,
                    "features": [{"feature": "answer_length", "weight": 0.1, "leans": "served"}],
                    "method": {
                        "model": "logistic regression on TF-IDF of the answer, its opening and shape features",
                        "folds": 5,
                        "interval": "percentile bootstrap, stratified by origin",
                        "resamples": 1000,
                        "confidence": 0.95,
                        "seed": 0,
                        "warning_when_low_above": 0.6,
                        "min_per_class": 20,
                    },
                    "message": "Graders cannot tell served from refused answers by their form.",
                },
            )
        ],
        summary="Can graders tell refused from served answers?",
        description="A logistic regression on what graders see (the answer's words, its opening, the share of "
        "its sentences copied from the passages, its length) predicts whether the item's answer "
        "was written for a refused question; `auroc` is its cross-validated AUROC with a percentile "
        "bootstrap interval (0.5: graders cannot tell). `sign` reads it in three states (no sign, a weak sign, "
        "the warning); `warning` when the interval's lower end is above 0.6, with the strongest features. A route "
        "whose items cannot be measured answers 200 with `auroc` null and `reason` saying why, never an error. "
        "Reviewers of the route only.",
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.reviewable_routes(request.user).filter(slug=slug).first()
        if route is None:
            if not permissions.can_review_labels(request.user):
                raise Forbidden("Only reviewers read the blindness probe.")
            raise Http404("No such route.")
        return Response(route_blindness(route))


# --------------------------------------------------------------------------- label import


class LabelsImportApi(APIView):
    """Import an existing graded set as final labels (method `imported`, with its source name)."""

    # Reports a lone surrogate as its own field error (console/core/parsers.py).
    reports_lone_surrogates = True

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "LabelsImportInput"

        labels = serializers.ListField(
            child=inline_serializer(
                "LabelRecord",
                {
                    "route": serializers.CharField(),
                    "request_id": serializers.CharField(),
                    "verdict": serializers.ChoiceField(
                        choices=["correct", "incorrect"],
                        required=False,
                        help_text="The answer's verdict; left out when `claims` are given.",
                    ),
                    "source": serializers.CharField(),
                    "claims": serializers.ListField(
                        child=inline_serializer(
                            "ClaimLabelRecord",
                            {
                                "index": serializers.IntegerField(
                                    min_value=0, help_text="The claim's index, from 0 (the lookup's claim_checks)."
                                ),
                                "verdict": serializers.ChoiceField(choices=ClaimVerdict.values),
                            },
                        ),
                        required=False,
                        min_length=1,
                        help_text="A long answer's label: a verdict for every claim of the answer, each once. "
                        "The answer is correct when every verifiable claim is supported (unverifiable ones "
                        "are left out of n).",
                    ),
                },
            ),
            min_length=1,
            max_length=settings.INGEST_MAX_BATCH,
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "LabelsImportOutput"

        created = serializers.IntegerField()
        unchanged = serializers.IntegerField()

    @extend_schema(
        request=InputSerializer,
        responses={201: OutputSerializer, 400: ERROR, 401: ERROR, 403: ERROR, 409: ERROR, 413: ERROR},
        summary="Import labels",
        examples=[
            OpenApiExample(
                "An offline evaluation",
                request_only=True,
                value={
                    "labels": [
                        {
                            "route": "it-support",
                            "request_id": "q-000123",
                            "verdict": "correct",
                            "source": "offline-eval",
                        }
                    ]
                },
            ),
            OpenApiExample(
                "A long answer, claim by claim",
                request_only=True,
                value={
                    "labels": [
                        {
                            "route": "it-support",
                            "request_id": "q-000124",
                            "source": "offline-eval",
                            "claims": [
                                {"index": 0, "verdict": "supported"},
                                {"index": 1, "verdict": "unsupported"},
                                {"index": 2, "verdict": "unverifiable"},
                            ],
                        }
                    ]
                },
            ),
            OpenApiExample("Stored", response_only=True, status_codes=["201"], value={"created": 1, "unchanged": 0}),
        ],
    )
    def post(self, request: Request) -> Response:
        if not permissions.has_role(request.user, permissions.LABEL_IMPORTERS):
            raise Forbidden("Importing labels needs the integrator or reviewer role.")
        records = batch_records(request.data, "labels")
        items, errors = validate_labels(records)
        # As for ingest: a route the caller may not import into reads as unknown, so it reveals nothing.
        routes, route_errors = routes_for_items(
            items, usable=lambda route: permissions.has_role(request.user, permissions.LABEL_IMPORTERS, route)
        )
        if errors or route_errors:
            raise_batch_invalid(
                total=len(records),
                records_noun="labels",
                errors=errors,
                unknown=route_errors,
                unknown_code="unknown_route",
                unknown_noun="route(s)",
            )
        decision_ids, unknown = selectors.decisions_for_labels(items, routes)
        if unknown:
            raise_batch_invalid(
                total=len(records),
                records_noun="labels",
                errors=[],
                unknown=unknown,
                unknown_code="unknown_decision",
                unknown_noun="decision(s)",
            )
        claim_errors = selectors.claim_label_errors(items, decision_ids)
        if claim_errors:
            raise_batch_invalid(
                total=len(records),
                records_noun="labels",
                errors=claim_errors,
                unknown=[],
                unknown_code="invalid",
                unknown_noun="claims",
            )
        result = labels_services.labels_import(
            actor=Actor.from_request(request), items=items, routes=routes, decision_ids=decision_ids
        )
        return Response({"created": result.created, "unchanged": result.unchanged}, status=201)
