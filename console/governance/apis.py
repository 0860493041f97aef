"""API v1 of policy sign-off: drafts, versions, signing, withdrawing, and the policy in force."""

from __future__ import annotations

import hashlib
import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.conditional import not_modified
from console.core.errors import NotFound
from console.core.openapi import ETAG, IF_NONE_MATCH, ClosedObject, link, links
from console.core.paging import Keyset, page_parameters, page_schema
from console.core.parsers import body_checked
from console.governance import selectors, services
from console.governance.evidence import evidence_check
from console.governance.validation import DRAFT_FIELDS, MAX_ANSWERS
from console.ledger.models import AnswerForm, GateFunctional, HarmModel

_ESCALATION = inline_serializer(
    "PolicyEscalation",
    {
        "contact": serializers.CharField(),
        "channel": serializers.CharField(),
        "response_hours": serializers.IntegerField(min_value=1, max_value=720),
    },
)


class ExchangeAnswer(ClosedObject):
    rate = serializers.FloatField(min_value=0, help_text="N extra refusals to remove one wrong answer; more than 0.")
    accept = serializers.BooleanField(help_text="Whether the owner would accept that rate.")


_WARNING = inline_serializer(
    "PolicyWarning",
    {
        "code": serializers.CharField(),
        "message": serializers.CharField(),
        "level": serializers.ChoiceField(
            choices=["blocking"],
            required=False,
            help_text="blocking: the owner signs only by acknowledging it (`acknowledge` when signing).",
        ),
    },
)
_DRAFT = inline_serializer(
    "PolicyDraft",
    {
        "cutoff": serializers.FloatField(),
        "band_lower": serializers.FloatField(required=False, allow_null=True),
        "exchange_rate": serializers.FloatField(required=False, allow_null=True),
        "exchange_answers": serializers.ListField(
            child=ExchangeAnswer(), required=False, allow_null=True, max_length=MAX_ANSWERS
        ),
        "costs": serializers.JSONField(required=False, help_text="{c_w, c_a, q?, c_v?}"),
        "owner": serializers.CharField(help_text="Username of a policy_owner of the route."),
        "rationale": serializers.CharField(),
        "escalation": _ESCALATION,
        "refusal_message": serializers.CharField(help_text="Markdown shown (sanitised) to refused users."),
        "filters": serializers.JSONField(
            required=False, help_text="{from, to, model, segment} or {versions, segments}"
        ),
        "confidence": serializers.FloatField(required=False),
        "interval": serializers.CharField(required=False),
        "certification": serializers.JSONField(required=False, help_text="{alpha, delta?}: add the certified cutoff"),
    },
)
# A version in a list leaves out what only one version needs (its evidence, as a document and as
# text, and what arrived since): read it from GET /api/v1/policies/{id}, whose SHA-256 the list gives.
_POLICY_FIELDS = {
    "id": serializers.IntegerField(),
    "route": serializers.CharField(),
    "version": serializers.IntegerField(),
    "status": serializers.ChoiceField(["draft", "active", "superseded", "withdrawn", "needs_recheck"]),
    "cutoff": serializers.FloatField(),
    "band_lower": serializers.FloatField(allow_null=True),
    "owner": serializers.CharField(),
    "escalation": _ESCALATION,
    "refusal_message": serializers.CharField(),
    "warnings": serializers.ListField(child=_WARNING),
    "evidence": serializers.JSONField(),
    "evidence_text": serializers.CharField(),
    "evidence_sha256": serializers.CharField(),
    "as_of": serializers.DateTimeField(
        allow_null=True, help_text="The evidence counts decisions ingested and labels recorded up to this instant."
    ),
    "arrived_since": serializers.JSONField(
        allow_null=True,
        help_text="Drafts: {as_of, decisions, final_labels, thresholds, warning} arrived after as_of.",
    ),
    "signed_at": serializers.DateTimeField(allow_null=True),
}
_EVIDENCE_FIELDS = ("evidence", "evidence_text", "arrived_since")
# Copies: a serializer class takes its fields out of the dict it is made from.
_POLICY = inline_serializer("PolicyVersion", dict(_POLICY_FIELDS))
_POLICY_SUMMARY = inline_serializer(
    "PolicyVersionSummary", {k: v for k, v in _POLICY_FIELDS.items() if k not in _EVIDENCE_FIELDS}
)
_EVIDENCE_CHECK = inline_serializer(
    "PolicyEvidenceCheck",
    {
        "policy": serializers.IntegerField(),
        "as_of": serializers.DateTimeField(allow_null=True),
        "evidence_sha256": serializers.CharField(),
        "recomputed_sha256": serializers.CharField(allow_null=True),
        "matches": serializers.BooleanField(allow_null=True),
        "differences": serializers.ListField(
            child=inline_serializer(
                "EvidenceDifference",
                {
                    "path": serializers.CharField(help_text="Where in the evidence document, e.g. rows.2.cutoff."),
                    "stored": serializers.JSONField(allow_null=True),
                    "now": serializers.JSONField(allow_null=True),
                },
            ),
            help_text="Every figure that differs (the first ones, when many do).",
        ),
        "labels_changed_since": serializers.ListField(
            child=inline_serializer(
                "EvidenceLabelChanged",
                {
                    "decision_id": serializers.IntegerField(),
                    "verdict_now": serializers.ChoiceField(["correct", "incorrect"]),
                    "method": serializers.CharField(),
                    "source": serializers.CharField(allow_blank=True, allow_null=True),
                    "decided_at": serializers.DateTimeField(),
                },
            ),
            help_text="Labels the snapshot counts that were written again after as_of.",
        ),
    },
)
_ROUTE_POLICY = inline_serializer(
    "RoutePolicy",
    {
        "route": serializers.CharField(),
        "version": serializers.IntegerField(),
        "status": serializers.CharField(),
        "cutoff": serializers.FloatField(),
        "band_lower": serializers.FloatField(allow_null=True),
        "refusal_message": serializers.CharField(),
        "escalation": _ESCALATION,
        "owner": serializers.CharField(),
        "signed_at": serializers.DateTimeField(),
        "answer_form": serializers.ChoiceField(
            choices=AnswerForm.values, help_text="The route's answers: short (one verdict) or long (claim by claim)."
        ),
        "harm_model": serializers.ChoiceField(
            choices=HarmModel.values, help_text="What a partly supported answer costs (the route's settings)."
        ),
        "support_threshold": serializers.FloatField(allow_null=True, help_text="s0 of the at_least harm model."),
        "gate_functional": serializers.ChoiceField(
            choices=GateFunctional.values,
            allow_null=True,
            help_text="What the gate's score estimates (the route's default; a decision may name its own); "
            "null: unspecified. Compare this field's estimate with the cutoff.",
        ),
    },
)
_SIGN = inline_serializer(
    "PolicySign",
    {
        "evidence_sha256": serializers.CharField(),
        "roll_back": serializers.BooleanField(
            required=False,
            default=False,
            help_text="Sign a draft older than the version in force (drafted before it was signed) in its place.",
        ),
        "acknowledge": serializers.ListField(
            child=serializers.CharField(),
            required=False,
            help_text="The codes of the draft's blocking warnings (`functional_mismatch`) the owner has read and "
            "signs anyway; each must be named. Recorded in the signature's audit event.",
        ),
    },
)
_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}
_SHA = "9f2c7e0b4a1d6f3e8c5b2a7d0e9f1c4b6a8d3e5f7c9b1a2d4e6f8a0c2e4b6d8f"
_SUMMARY_EXAMPLE = {
    "id": 7,
    "route": "it-support",
    "version": 3,
    "status": "draft",
    "cutoff": 0.85,
    "band_lower": 0.4,
    "owner": "lead",
    "escalation": {"contact": "HR service desk lead", "channel": "mailto:hr-desk@example.org", "response_hours": 24},
    "refusal_message": "I can't answer this reliably. A person from HR will reply within a day.",
    "warnings": [],
    "evidence_sha256": _SHA,
    "as_of": "2026-11-02T08:00:00+00:00",
    "signed_at": None,
}
_POLICY_EXAMPLE = {
    **_SUMMARY_EXAMPLE,
    "evidence": {"route": "it-support", "chosen_row": {"cutoff": 0.85}},
    "evidence_text": '{"chosen_row":{"cutoff":0.85},"route":"it-support"}',
    "arrived_since": None,
}
_TWO_VERSIONS = [
    _SUMMARY_EXAMPLE,
    {**_SUMMARY_EXAMPLE, "id": 5, "version": 2, "status": "active", "signed_at": "2026-10-01T09:00:00+00:00"},
]


def _policy_example(**changes) -> OpenApiExample:
    return OpenApiExample("A version", response_only=True, value={**_POLICY_EXAMPLE, **changes})


# Newest version first.
_NEWEST_VERSIONS = Keyset("governance.versions", "-version", "-pk")


class RoutePoliciesApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = DRAFT_FIELDS

    @extend_schema(
        summary="Draft a policy version",
        extensions=links(
            {
                201: {
                    "SignTheDraft": link(
                        "/api/v1/policies/{policy_id}/sign",
                        method="post",
                        parameters={"policy_id": "$response.body#/id"},
                        body={"evidence_sha256": "$response.body#/evidence_sha256"},
                        description="The named owner signs the evidence as drafted.",
                    ),
                    "ReadTheDraft": link(
                        "/api/v1/policies/{policy_id}", parameters={"policy_id": "$response.body#/id"}
                    ),
                    "CheckItsEvidence": link(
                        "/api/v1/policies/{policy_id}/evidence-check", parameters={"policy_id": "$response.body#/id"}
                    ),
                    "WithdrawTheDraft": link(
                        "/api/v1/policies/{policy_id}/withdraw",
                        method="post",
                        parameters={"policy_id": "$response.body#/id"},
                    ),
                }
            }
        ),
        description="Reviewers, policy owners and admins of the route. The evidence (the operating-point "
        "document at the chosen cutoff on the given filters, and the certified cutoff when "
        "`certification` is given) is computed now and stored as text with its SHA-256. Missing "
        "or empty required fields: 400 with one detail per field. The owner is notified.",
        request=_DRAFT,
        responses={201: _POLICY, 400: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "HR draft",
                request_only=True,
                value={
                    "cutoff": 0.85,
                    "band_lower": 0.4,
                    "exchange_rate": 3.0,
                    "owner": "lead",
                    "rationale": "...",
                    "escalation": {
                        "contact": "HR service desk lead",
                        "channel": "mailto:hr-desk@example.org",
                        "response_hours": 24,
                    },
                    "refusal_message": "I can't answer this reliably. A person from HR will reply within a day.",
                },
            ),
            _policy_example(),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_policy_reader(request.user, slug)
        policy = services.policy_draft(
            actor=Actor.from_request(request), user=request.user, route=route, draft=request.data
        )
        return Response(selectors.policy_as_dict(selectors.get_policy_for_user(request.user, policy.pk)), status=201)

    @extend_schema(
        summary="The route's policy versions, newest first (without the evidence text)",
        description="`decisions_not_following_policy`: decisions of the route whose logged cutoff "
        "differs from the signed cutoff in force at their time (gate not following policy).",
        responses={
            200: page_schema(
                "PolicyVersionList",
                _POLICY_SUMMARY,
                also_as="policies",
                decisions_not_following_policy=serializers.IntegerField(),
            ),
            **_ERRORS,
        },
        parameters=page_parameters(100),
        examples=[
            OpenApiExample(
                "Two versions",
                response_only=True,
                value={
                    "results": _TWO_VERSIONS,
                    "next": None,
                    "policies": _TWO_VERSIONS,
                    "decisions_not_following_policy": 0,
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_policy_reader(request.user, slug)
        page, next_url = _NEWEST_VERSIONS.page(request, selectors.policy_versions(route))
        rows = [selectors.policy_as_dict(p, with_evidence=False) for p in page]
        return Response(
            {
                "results": rows,
                "next": next_url,
                "policies": rows,
                "decisions_not_following_policy": selectors.decisions_not_following_policy([route.pk]).get(route.pk, 0),
            }
        )


class PolicyDetailApi(APIView):
    @extend_schema(
        summary="One policy version with its evidence, the stored text and its SHA-256",
        responses={200: _POLICY, **_ERRORS},
        examples=[_policy_example()],
    )
    def get(self, request: Request, policy_id: int) -> Response:
        return Response(selectors.policy_as_dict(selectors.get_policy_for_user(request.user, policy_id)))


class PolicySignApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"evidence_sha256", "roll_back", "acknowledge"}

    @extend_schema(
        summary="Sign a draft (its named owner only)",
        description="Send the `evidence_sha256` of the draft you read. The draft's evidence is a snapshot as of "
        "its `as_of`: traffic arriving later never changes it, and only a hash other than the stored one "
        "(the evidence was recomputed since you read it) is refused with 409 `evidence_changed`; nothing is "
        "signed. Signing makes the version active and supersedes the previous active version in one "
        "transaction, and records what arrived since `as_of`. Anyone but the owner: 403. A draft drafted "
        "before the version in force was signed is 409 `older_than_in_force` unless the body asks for "
        '`"roll_back": true` (audited as `policy_rolled_back`). Only with a token: a browser session is 403 '
        "`step_up_required` (the sign page asks for the password again).",
        request=_SIGN,
        responses={200: _POLICY, 400: ERROR, 409: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "Sign what you read",
                request_only=True,
                value={"evidence_sha256": _SHA},
            ),
            _policy_example(status="active", signed_at="2026-11-02T09:15:00+00:00"),
        ],
    )
    def post(self, request: Request, policy_id: int) -> Response:
        policy = selectors.get_policy(policy_id)
        body = request.data if isinstance(request.data, dict) else {}
        signed = services.policy_sign(
            actor=Actor.from_request(request),
            user=request.user,
            policy=policy,
            evidence_sha256=body.get("evidence_sha256"),
            roll_back=body.get("roll_back", False),
            acknowledged=body.get("acknowledge", []),
            # A token is its holder's proof; a browser session is not (the sign page asks for the password).
            proof=services.SigningProof.TOKEN if request.auth is not None else services.SigningProof.SESSION,
        )
        return Response(selectors.policy_as_dict(selectors.get_policy(signed.pk)))


class PolicyRecomputeEvidenceApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset()

    @extend_schema(
        summary="Recompute a draft's evidence as of now (its owner, or whoever may draft the route's policy)",
        description="A deliberate, audited action (`policy_evidence_refreshed`): the draft's evidence is computed "
        "again on the newest data with a new `as_of`, and the old SHA-256 no longer signs. Drafts only "
        "(409 `not_draft`).",
        request=None,
        responses={200: _POLICY, 409: ERROR, **_ERRORS},
        examples=[_policy_example()],
    )
    def post(self, request: Request, policy_id: int) -> Response:
        body_checked(request)
        policy = selectors.get_policy_for_user(request.user, policy_id)
        recomputed = services.policy_evidence_recompute(
            actor=Actor.from_request(request), user=request.user, policy=policy
        )
        return Response(selectors.policy_as_dict(selectors.get_policy(recomputed.pk)))


class PolicyEvidenceCheckApi(APIView):
    @extend_schema(
        summary="Whether a version's stored evidence is still what its as_of gives on the data now",
        description="Every reader of the route's policy. The evidence is computed again from the stored `as_of`, "
        "filters and parameters: `matches` when its SHA-256 is the stored one; otherwise `differences` "
        "names each figure by path, and `labels_changed_since` the labels it counts that were written "
        "again after `as_of`. A version drafted before evidence snapshots has `matches: null` and a `reason`.",
        responses={200: _EVIDENCE_CHECK, **_ERRORS},
        examples=[
            OpenApiExample(
                "Unchanged",
                response_only=True,
                value={
                    "policy": 7,
                    "as_of": "2026-11-02T08:00:00+00:00",
                    "evidence_sha256": _SHA,
                    "recomputed_sha256": _SHA,
                    "matches": True,
                    "differences": [],
                    "labels_changed_since": [],
                },
            )
        ],
    )
    def get(self, request: Request, policy_id: int) -> Response:
        return Response(evidence_check(selectors.get_policy_for_user(request.user, policy_id)))


class PolicyWithdrawApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = frozenset()

    @extend_schema(
        summary="Withdraw a draft (its author or its owner)",
        request=None,
        responses={200: _POLICY, 409: ERROR, **_ERRORS},
        examples=[_policy_example(status="withdrawn")],
    )
    def post(self, request: Request, policy_id: int) -> Response:
        body_checked(request)
        policy = selectors.get_policy(policy_id)
        withdrawn = services.policy_withdraw(actor=Actor.from_request(request), user=request.user, policy=policy)
        return Response(selectors.policy_as_dict(selectors.get_policy(withdrawn.pk)))


class RoutePolicyApi(APIView):
    @extend_schema(
        summary="The policy in force on a route, for the answering system",
        description="Every reader of the route, integrators included. Sends an ETag; a request whose "
        'If-None-Match holds it (compared weakly: `W/"x"` matches `"x"`) or is `*` gets 304. '
        "404 `no_policy` while no version is signed.",
        parameters=[
            IF_NONE_MATCH,
            OpenApiParameter(
                "ETag", str, location=OpenApiParameter.HEADER, response=[200, 304], description=ETAG["description"]
            ),
        ],
        responses={200: _ROUTE_POLICY, 304: OpenApiResponse(description="Unchanged: no body."), **_ERRORS},
        examples=[
            OpenApiExample(
                "In force",
                response_only=True,
                value={
                    "route": "it-support",
                    "version": 3,
                    "status": "active",
                    "cutoff": 0.85,
                    "band_lower": 0.4,
                    "refusal_message": "I can't answer this reliably. A person from HR will reply within a day.",
                    "escalation": {
                        "contact": "HR service desk lead",
                        "channel": "mailto:hr-desk@example.org",
                        "response_hours": 24,
                    },
                    "owner": "lead",
                    "signed_at": "2026-11-02T09:00:00+00:00",
                    "answer_form": "short",
                    "harm_model": "all_or_nothing",
                    "support_threshold": None,
                    "gate_functional": None,
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> HttpResponse:
        route = selectors.route_for_policy_reader(request.user, slug)
        policy = selectors.policy_in_force(route)
        if policy is None:
            raise NotFound(f"Route {slug!r} has no signed policy yet.", code="no_policy")
        body = json.dumps(selectors.route_policy_as_dict(policy), separators=(",", ":")).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        if not_modified(request, etag):
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(body, content_type="application/json")
        response["ETag"] = etag
        response["Cache-Control"] = "no-cache"
        return response
