import json

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import selectors
from audit.hooks import trail_access
from audit.models import AuditEvent
from console.core.api import ERROR_SCHEMA as ERROR
from console.core.errors import Forbidden, InvalidInput, NotFound
from console.core.paging import Keyset, page_parameters

_PAGE = 500
# Oldest first, as the chain runs; seq is unique.
_EVENT_PAGES = Keyset("audit.events", "seq")

# Response bodies, for the OpenAPI schema only: event_as_dict and audit_chain_verify build them.
_EVENT = inline_serializer(
    "AuditEvent",
    {
        "seq": serializers.IntegerField(),
        "at": serializers.DateTimeField(),
        "actor": serializers.CharField(),
        "action": serializers.CharField(),
        "object": serializers.CharField(help_text="type:id, e.g. decision:12"),
        "route": serializers.CharField(allow_null=True),
        "payload": serializers.JSONField(),
        "payload_text": serializers.CharField(
            allow_null=True, help_text="The payload's RFC 8785 text that the hash covers (scheme 2); null for scheme 1"
        ),
        "hash_scheme": serializers.IntegerField(help_text="1 or 2: how the hash was computed (see the README)"),
        "prev_hash": serializers.CharField(),
        "hash": serializers.CharField(),
    },
)
_EVENT_PAGE = inline_serializer(
    "AuditEventPage",
    {
        "results": _EVENT.__class__(many=True),
        "next": serializers.URLField(allow_null=True, help_text="The next page; null on the last page"),
        "events": _EVENT.__class__(many=True, help_text="The same events as `results` (the first shape of this list)"),
        "next_after": serializers.IntegerField(
            allow_null=True, help_text="Pass as `after` for the next page; null on the last page"
        ),
    },
)
_VERIFY = inline_serializer(
    "AuditChainCheck",
    {
        "ok": serializers.BooleanField(),
        "events": serializers.IntegerField(required=False, help_text="Events checked (when ok)"),
        "head": serializers.CharField(required=False, help_text="Hash of the last event (when ok)"),
        "first_bad_seq": serializers.IntegerField(required=False, help_text="First broken link (when not ok)"),
        "reason": serializers.CharField(required=False, help_text="What is wrong with it (when not ok)"),
        "events_checked": serializers.IntegerField(required=False, help_text="Intact events before it (when not ok)"),
        "action": serializers.CharField(required=False, help_text="The first bad event's action"),
        "link": serializers.ChoiceField(
            ["seq", "prev_hash", "payload", "hash", "checkpoint"],
            required=False,
            help_text="Which check failed: the sequence, the link to the previous hash, the payload against its "
            "canonical text, the recomputed hash, or a signed checkpoint",
        ),
        "expected_hash": serializers.CharField(required=False, help_text="The hash recomputed from what is stored"),
        "stored_hash": serializers.CharField(required=False, help_text="The hash stored with the event"),
    },
)


def event_as_dict(event: AuditEvent) -> dict:
    return {
        "seq": event.seq,
        "at": event.at.isoformat(),
        "actor": event.actor,
        "action": event.action,
        "object": f"{event.object_type}:{event.object_id}",
        "route": event.route or None,
        "payload": event.payload,
        "payload_text": event.payload_text,
        "hash_scheme": event.hash_scheme,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def _parse_object(raw: str) -> tuple[str, str]:
    kind, sep, oid = raw.partition(":")
    # PostgreSQL refuses NUL in text: a lookup with one could only fail as a server error.
    if not sep or not kind or not oid or len(raw) > 240 or "\x00" in raw:
        raise InvalidInput("object must look like 'decision:123'.", code="invalid_object")
    return kind, oid


_EVENT_EXAMPLE = {
    "seq": 1,
    "at": "2026-11-01T12:00:03+00:00",
    "actor": "token:integrator-1",
    "action": "decisions_ingested",
    "object": "route:1",
    "route": "it-support",
    "payload": {"created": 1, "unchanged": 0},
    "payload_text": '{"created":1,"unchanged":0}',
    "hash_scheme": 2,
    "prev_hash": "0" * 64,
    "hash": "5d41402abc4b2a76b9719d911017c592ae2f1b2c3d4e5f60718293a4b5c6d7e8",
}


class AuditEventListApi(APIView):
    """Audit events, oldest first. Auditors see their routes' events (global auditors all); the
    roles that read a route's statistics see the history of its decisions, as on the decision page."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "object",
                {"type": "string", "maxLength": 240, "pattern": r"^([^:\x00]+:[^\x00]+)?$"},
                description="type:id, e.g. decision:12; empty: every event you may read.",
            ),
            OpenApiParameter("after", int, description="Return events with seq greater than this"),
            *page_parameters(_PAGE),
        ],
        responses={200: _EVENT_PAGE, 400: ERROR, 401: ERROR, 403: ERROR, 404: ERROR},
        examples=[
            OpenApiExample(
                "One event",
                response_only=True,
                value={"results": [_EVENT_EXAMPLE], "next": None, "events": [_EVENT_EXAMPLE], "next_after": None},
            )
        ],
        summary="List audit events",
    )
    def get(self, request: Request) -> Response:
        raw_object = request.query_params.get("object")
        try:
            after = int(request.query_params.get("after", 0))
        except ValueError:
            raise InvalidInput("after must be a whole number.", code="invalid_after") from None
        user = request.user
        if raw_object:
            kind, oid = _parse_object(raw_object)
            if trail_access().can_read_trail(user):
                events = selectors.audit_events_for_object(kind, oid, selectors.readable_events(user))
            else:
                # The decision page's rule: the roles that read a route's statistics read the history
                # of its decisions (who graded what); a `reader` reads the refusal, not its grades.
                if not trail_access().can_read_history(user):
                    raise Forbidden("Your role does not allow reading a decision's history.")
                if kind != "decision" or not (oid.isascii() and oid.isdigit()):
                    raise Forbidden("Only auditors may read this history.")
                readable = selectors.readable_events(user, trail_access().history_readers)
                events = selectors.audit_events_for_object(kind, oid, readable)
                if not events.exists():  # every stored decision has its ingest event on its route
                    raise NotFound("No such decision.")
        else:
            if not trail_access().can_read_trail(user):
                raise Forbidden("Only auditors may read the audit trail.")
            events = selectors.readable_events(user).order_by("seq")
        page, next_url = _EVENT_PAGES.page(request, events, default_limit=_PAGE, cursor=[after] if after else None)
        rows = [event_as_dict(e) for e in page]
        next_after = page[-1].seq if next_url else None
        return Response({"results": rows, "next": next_url, "events": rows, "next_after": next_after})


class AuditVerifyApi(APIView):
    @extend_schema(
        responses={200: _VERIFY, 401: ERROR, 403: ERROR},
        examples=[
            OpenApiExample(
                "Intact",
                response_only=True,
                value={
                    "ok": True,
                    "events": 1204,
                    "head": "5d41402abc4b2a76b9719d911017c592ae2f1b2c3d4e5f60718293a4b5c6d7e8",
                },
            )
        ],
        summary="Recompute the hash chain and report the first broken link",
    )
    def get(self, request: Request) -> Response:
        if not trail_access().can_read_trail(request.user):
            raise Forbidden("Only auditors may verify the audit trail.")
        return Response(selectors.audit_chain_verify())


class AuditExportApi(APIView):
    @extend_schema(
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description="One AuditEvent object per line, oldest first, streamed.",
                examples=[
                    OpenApiExample(
                        "Two events",
                        value="".join(
                            json.dumps(event, ensure_ascii=False) + "\n"
                            for event in (_EVENT_EXAMPLE, {**_EVENT_EXAMPLE, "seq": _EVENT_EXAMPLE["seq"] + 1})
                        ),
                    )
                ],
            ),
            401: ERROR,
            403: ERROR,
        },
        summary="Export the whole audit trail as JSON Lines",
    )
    def get(self, request: Request):
        if not trail_access().can_read_trail(request.user):
            raise Forbidden("Only auditors may export the audit trail.")

        events = selectors.readable_events(request.user).order_by("seq")

        def lines():
            for event in events.iterator(chunk_size=2000):
                yield json.dumps(event_as_dict(event), ensure_ascii=False) + "\n"

        response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
        response["Content-Disposition"] = 'attachment; filename="audit-trail.jsonl"'
        return response
