"""API v1 of monitoring: route health, release rechecks and drift alarms."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.services import Actor
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import InvalidInput, detail
from console.core.openapi import link, links
from console.core.paging import Keyset, page_parameters, page_schema
from console.governance.models import PolicyVersion
from console.monitoring import selectors
from console.monitoring.services import alarms as alarm_services
from console.monitoring.services import rechecks as recheck_services

_ERRORS = {401: ERROR, 403: ERROR, 404: ERROR}
_RECHECK_EXAMPLE = {
    "id": 3,
    "route": "it-support",
    "policy": {"id": 5, "version": 2},
    "status": "open",
    "versions": {"model": ["gen-2026-11"]},
    "opened_at": "2026-11-05T06:00:00+00:00",
    "closed_at": None,
    "resolution": None,
    "note": "",
    "plan": {"items": 200},
    "comparison": {},
    "diagnosis": {"pattern": "location_shift", "text": "Scores moved down by 0.04 on the same questions."},
}
_ALARM_EXAMPLE = {
    "id": 2,
    "route": "it-support",
    "kind": "abstention",
    "status": "open",
    "opened_at": "2026-11-06T06:00:00+00:00",
    "first_day": "2026-11-05",
    "last_flagged_day": "2026-11-05",
    "through_day": "2026-11-05",
    "detail": {"metric": "abstention_rate", "value": 0.31, "limit": 0.25},
    "closed_at": None,
    "closed_reason": None,
    "note": "",
    "acknowledged_by": None,
}
_RATE = inline_serializer(
    "MonitoringRate",
    {
        "refused": serializers.IntegerField(),
        "n": serializers.IntegerField(),
        "value": serializers.FloatField(allow_null=True),
        "low": serializers.FloatField(allow_null=True),
        "high": serializers.FloatField(allow_null=True),
    },
)
_HEALTH = inline_serializer(
    "RouteHealth",
    {
        "route": serializers.CharField(),
        "policy": serializers.JSONField(help_text="{id, version, cutoff, status, owner, since} or null"),
        "abstention": serializers.JSONField(
            required=False,
            help_text=(
                "At the signed cutoff: {signed: {value, low, high} from the evidence, today: {refused, n, value, low, "
                "high}, last_7_days: {...}} (Wilson intervals; days in UTC)"
            ),
        ),
        "false_abstention": serializers.JSONField(
            required=False, help_text="The signed evidence's estimate {value, low, high}"
        ),
        "evidence": serializers.JSONField(
            required=False,
            help_text="{stale, reasons, segment_tv, newest_label, max_label_age_days (the route's setting)}",
        ),
        "rechecks_open": serializers.IntegerField(),
        "alarms_open": serializers.ListField(
            child=inline_serializer(
                "OpenAlarm",
                {
                    "id": serializers.IntegerField(),
                    "kind": serializers.CharField(),
                    "first_day": serializers.DateField(),
                },
            )
        ),
        "grading_backlog": serializers.IntegerField(),
        "labels_last_7_days": serializers.IntegerField(),
        "shadow_runs_failed": serializers.IntegerField(),
        "decisions_not_following_policy": serializers.IntegerField(),
        "disputes_open": serializers.IntegerField(required=False, help_text="For readers of the route's disputes."),
        "disputes_overdue": serializers.IntegerField(
            required=False, help_text="Open disputes past their due time (readers of the route's disputes)."
        ),
    },
)
_DIAGNOSIS = inline_serializer(
    "RecheckDiagnosis",
    {
        "pattern": serializers.ChoiceField(["location_shift", "separation_worse", "segment", "retrieval", "none"]),
        "text": serializers.CharField(),
    },
)
_RECHECK = inline_serializer(
    "Recheck",
    {
        "id": serializers.IntegerField(),
        "route": serializers.CharField(),
        "policy": serializers.JSONField(),
        "status": serializers.ChoiceField(["open", "closed"]),
        "versions": serializers.JSONField(),
        "opened_at": serializers.DateTimeField(),
        "closed_at": serializers.DateTimeField(allow_null=True),
        "resolution": serializers.CharField(allow_null=True),
        "note": serializers.CharField(),
        "plan": serializers.JSONField(),
        "diagnosis": _DIAGNOSIS,
        "comparison": serializers.JSONField(
            help_text=(
                "At the signed cutoff, with the signed evidence's confidence and interval method: before (the "
                "signed evidence's row as signed) and after (the new versions' traffic) counts; abstention, "
                "false_abstention, wrong_served (Hájek-weighted when the graded sample is stratified), no_support "
                "as {before, after, difference} (Newcombe's hybrid interval from the two intervals) or null; "
                "segments; progress"
            )
        ),
    },
)
_CLOSE = inline_serializer(
    "RecheckClose",
    {
        "resolution": serializers.ChoiceField(["signed", "accepted"]),
        "note": serializers.CharField(required=False, help_text="Required for accepted."),
        "policy_version": serializers.IntegerField(required=False, help_text="Id of the version signed (for signed)."),
    },
)
_ALARM = inline_serializer(
    "Alarm",
    {
        "id": serializers.IntegerField(),
        "route": serializers.CharField(),
        "kind": serializers.ChoiceField(["abstention", "scores", "segment_mix", "no_support"]),
        "status": serializers.ChoiceField(["open", "closed"]),
        "opened_at": serializers.DateTimeField(),
        "first_day": serializers.DateField(),
        "last_flagged_day": serializers.DateField(),
        "through_day": serializers.DateField(),
        "detail": serializers.JSONField(),
        "closed_at": serializers.DateTimeField(allow_null=True),
        "closed_reason": serializers.CharField(allow_null=True),
        "note": serializers.CharField(),
        "acknowledged_by": serializers.CharField(allow_null=True),
    },
)
_ACK = inline_serializer("AlarmAcknowledge", {"note": serializers.CharField()})


def _text(data, name: str) -> str:
    value = data.get(name, "") if isinstance(data, dict) else ""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string.", details=[detail(name, "invalid_type", "must be a string")])
    return value


class RouteHealthApi(APIView):
    @extend_schema(
        summary="A route's health: policy in force, abstention at its cutoff, rechecks, alarms, backlog",
        description="Readers of the route's policy. Figures come straight from the decisions.",
        responses={200: _HEALTH, **_ERRORS},
        examples=[
            OpenApiExample(
                "Quiet",
                response_only=True,
                value={
                    "route": "it-support",
                    "policy": None,
                    "rechecks_open": 0,
                    "alarms_open": [],
                    "grading_backlog": 12,
                    "labels_last_7_days": 80,
                    "shadow_runs_failed": 0,
                    "decisions_not_following_policy": 0,
                    "disputes_open": 1,
                    "disputes_overdue": 0,
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_monitoring_reader(request.user, slug)
        return Response(selectors.route_health(route, user=request.user))


# Newest first, as the models order them.
_NEWEST_RECHECKS = Keyset("monitoring.rechecks", "-opened_at", "-pk")
_NEWEST_ALARMS = Keyset("monitoring.alarms", "-opened_at", "-pk")


class RouteRechecksApi(APIView):
    @extend_schema(
        summary="A route's release rechecks, newest first, each with its diagnosis",
        extensions=links(
            {
                200: {
                    "TheNewestRecheck": link(
                        "/api/v1/rechecks/{recheck_id}", parameters={"recheck_id": "$response.body#/rechecks/0/id"}
                    ),
                    "CloseTheNewestRecheck": link(
                        "/api/v1/rechecks/{recheck_id}/close",
                        method="post",
                        parameters={"recheck_id": "$response.body#/rechecks/0/id"},
                    ),
                }
            }
        ),
        responses={200: page_schema("RecheckList", _RECHECK, also_as="rechecks"), **_ERRORS},
        parameters=page_parameters(50),
        examples=[
            OpenApiExample(
                "One open",
                response_only=True,
                value={"results": [_RECHECK_EXAMPLE], "next": None, "rechecks": [_RECHECK_EXAMPLE]},
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_monitoring_reader(request.user, slug)
        page, next_url = _NEWEST_RECHECKS.page(request, selectors.route_rechecks(route), default_limit=50)
        rows = [selectors.recheck_as_dict(r) for r in page]
        return Response({"results": rows, "next": next_url, "rechecks": rows})


class RecheckDetailApi(APIView):
    @extend_schema(
        summary="One release recheck: signed evidence against the new versions, and the diagnosis",
        responses={200: _RECHECK, **_ERRORS},
        examples=[OpenApiExample("Open", response_only=True, value=_RECHECK_EXAMPLE)],
    )
    def get(self, request: Request, recheck_id: int) -> Response:
        return Response(selectors.recheck_as_dict(selectors.get_recheck_for_user(request.user, recheck_id)))


class RecheckCloseApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"resolution", "note", "policy_version"}

    @extend_schema(
        summary="Close a recheck (the route's policy owner or a reviewer)",
        description="`signed` names the version signed after the recheck opened (`policy_version`); `accepted` "
        "keeps the policy unchanged and needs a `note`. Audited. The policy returns to `active` "
        "when no recheck of it stays open. 409 `recheck_closed` when already closed.",
        request=_CLOSE,
        responses={200: _RECHECK, 400: ERROR, 409: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "Accept",
                request_only=True,
                value={"resolution": "accepted", "note": "Only the model's tokenizer changed."},
            ),
            OpenApiExample(
                "Accepted",
                response_only=True,
                value={
                    **_RECHECK_EXAMPLE,
                    "status": "closed",
                    "closed_at": "2026-11-07T10:00:00+00:00",
                    "resolution": "accepted",
                    "note": "Only the model's tokenizer changed.",
                },
            ),
        ],
    )
    def post(self, request: Request, recheck_id: int) -> Response:
        recheck = selectors.get_recheck_for_user(request.user, recheck_id)
        new_policy = None
        policy_id = request.data.get("policy_version") if isinstance(request.data, dict) else None
        if policy_id is not None:
            if not isinstance(policy_id, int) or isinstance(policy_id, bool):
                raise InvalidInput(
                    "policy_version must be an integer.",
                    details=[detail("policy_version", "invalid_type", "must be an integer")],
                )
            new_policy = PolicyVersion.objects.filter(pk=policy_id, route=recheck.route).first()
        closed = recheck_services.recheck_close(
            actor=Actor.from_request(request),
            user=request.user,
            recheck=recheck,
            resolution=_text(request.data, "resolution"),
            note=_text(request.data, "note"),
            new_policy=new_policy,
        )
        return Response(selectors.recheck_as_dict(selectors.get_recheck_for_user(request.user, closed.pk)))


class RouteAlarmsApi(APIView):
    @extend_schema(
        summary="A route's drift alarms, newest first",
        extensions=links(
            {
                200: {
                    "AcknowledgeTheNewestAlarm": link(
                        "/api/v1/alarms/{alarm_id}/acknowledge",
                        method="post",
                        parameters={"alarm_id": "$response.body#/alarms/0/id"},
                    )
                }
            }
        ),
        responses={200: page_schema("AlarmList", _ALARM, also_as="alarms"), **_ERRORS},
        parameters=page_parameters(100),
        examples=[
            OpenApiExample(
                "One open",
                response_only=True,
                value={"results": [_ALARM_EXAMPLE], "next": None, "alarms": [_ALARM_EXAMPLE]},
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        route = selectors.route_for_monitoring_reader(request.user, slug)
        page, next_url = _NEWEST_ALARMS.page(request, selectors.route_alarms(route), default_limit=100)
        rows = [selectors.alarm_as_dict(a) for a in page]
        return Response({"results": rows, "next": next_url, "alarms": rows})


class AlarmAcknowledgeApi(APIView):
    # Every other top-level key is a 400 unknown_field (console/core/parsers.py).
    body_fields = {"note"}

    @extend_schema(
        summary="Acknowledge an open alarm with a note (the route's policy owner or a reviewer)",
        description="Closes the alarm (audited: acknowledged, then closed); only a later day outside "
        "the limits opens a new one. 409 `alarm_closed` when already closed.",
        request=_ACK,
        responses={200: _ALARM, 400: ERROR, 409: ERROR, **_ERRORS},
        examples=[
            OpenApiExample(
                "Acknowledge", request_only=True, value={"note": "A new corpus snapshot; the recheck covers it."}
            ),
            OpenApiExample(
                "Closed",
                response_only=True,
                value={
                    **_ALARM_EXAMPLE,
                    "status": "closed",
                    "closed_at": "2026-11-06T09:30:00+00:00",
                    "closed_reason": "acknowledged",
                    "note": "A new corpus snapshot; the recheck covers it.",
                    "acknowledged_by": "reviewer-ann",
                },
            ),
        ],
    )
    def post(self, request: Request, alarm_id: int) -> Response:
        alarm = selectors.get_alarm_for_user(request.user, alarm_id)
        done = alarm_services.alarm_acknowledge(
            actor=Actor.from_request(request), user=request.user, alarm=alarm, note=_text(request.data, "note")
        )
        return Response(selectors.alarm_as_dict(selectors.get_alarm_for_user(request.user, done.pk)))
