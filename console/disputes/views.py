"""Pages of disputes: the inbox, one dispute, opening one from a refusal's page, and the public
appeal page; plus what this app hands to the ledger's refusals list and the analysis page."""

from __future__ import annotations

import hashlib
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Exists, OuterRef, Q
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.services import Actor
from console.accounts import permissions
from console.accounts.models import Route
from console.accounts.throttle import client_address, count_within
from console.core.errors import Conflict, InvalidInput
from console.disputes import selectors, services
from console.disputes.models import MAX_APPEAL_MESSAGE, MAX_NOTE, MAX_REASON, USER_KINDS, Dispute, Kind, Status
from console.disputes.validation import parse_dispute, parse_resolution
from console.governance.selectors import policy_in_force
from console.ledger.models import Decision
from console.ledger.selectors import get_decision_for_user
from console.notify.emails import absolute_url
from console.similarity.selectors import similar_refusals_context

DEFAULT_REFUSAL_MESSAGE = (
    "The assistant could not answer this question reliably, so it did not answer. A person will look at your question."
)


# --- the inbox and one dispute --------------------------------------------------------------------


@require_GET
def inbox(request):
    filters = selectors.DisputeFilters.from_params(request.GET)
    disputes = list(selectors.dispute_list(request.user, filters)[:500])
    routes = Route.objects.filter(pk__in=selectors.readable_disputes(request.user).values("route_id")).order_by("slug")
    return render(
        request,
        "disputes/inbox.html",
        {
            "disputes": disputes,
            "filters": filters,
            "routes": routes,
            "kinds": Kind.choices,
            "statuses": [*Status.choices, ("all", "All")],
            "now": _now(),
            "handles": permissions.can_handle_disputes(request.user),
        },
    )


def _now():
    from django.utils import timezone

    return timezone.now()


def dispute_context(request, dispute: Dispute) -> dict[str, Any]:
    dispute.pieces = selectors.highlighted_quote(dispute)
    dispute.overdue = selectors.is_overdue(dispute)
    dispute.appellant_hidden = selectors.appellant_hidden(request.user, dispute)
    return {
        "dispute": dispute,
        "decision": selectors.decision_of(dispute),
        "pieces": selectors.highlighted_quote(dispute),
        "overdue": selectors.is_overdue(dispute),
        "handles": permissions.can_handle_disputes(request.user, dispute.route),
        "withdraws": permissions.can_withdraw_dispute(request.user, dispute),
        "max_note": MAX_NOTE,
    }


@require_GET
def dispute_detail(request, pk: int):
    dispute = selectors.get_dispute_for_user(request.user, pk)
    return render(request, "disputes/detail.html", dispute_context(request, dispute))


@require_POST
def dispute_take(request, pk: int):
    dispute = selectors.get_dispute_for_user(request.user, pk)
    services.dispute_assign(actor=Actor.user(request.user), user=request.user, dispute=dispute)
    messages.success(request, f"You took dispute #{pk}; reply by {dispute.due_by:%Y-%m-%d %H:%M} UTC.")
    return redirect(
        request.POST.get("next")
        if request.POST.get("next") == reverse("dispute-inbox")
        else reverse("dispute-detail", args=[pk])
    )


@require_POST
def dispute_resolve(request, pk: int):
    dispute = selectors.get_dispute_for_user(request.user, pk)
    try:
        resolution, note = parse_resolution(
            {"resolution": request.POST.get("resolution"), "note": request.POST.get("note") or None}
        )
        resolved = services.dispute_resolve(
            actor=Actor.user(request.user), user=request.user, dispute=dispute, resolution=resolution, note=note
        )
    except (InvalidInput, Conflict) as error:
        context = dispute_context(request, dispute) | {"error": error.message, "details": error.details}
        return render(request, "disputes/detail.html", context, status=error.status)
    messages.success(request, _resolved_message(resolved))
    return redirect("dispute-detail", pk=pk)


def _resolved_message(dispute: Dispute) -> str:
    if dispute.status == Status.WITHDRAWN:
        return f"You withdrew dispute #{dispute.pk}."
    told = []
    if dispute.opened_by_id and dispute.opened_by_id != dispute.resolved_by_id:
        told.append(dispute.opened_by.get_username())
    if dispute.appellant_email:
        told.append("the person refused")
    tail = f" {' and '.join(told)} {'is' if len(told) == 1 else 'are'} told by email." if told else ""
    return f"Dispute #{dispute.pk} resolved: {dispute.outcome_words}.{tail}"


# --- opening from the refusal's page --------------------------------------------------------------


class DisputeForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, label) for k, label in Kind.choices if k in USER_KINDS])
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), max_length=MAX_REASON)
    source = forms.ChoiceField(
        choices=[
            ("passage", "A quote from a logged passage"),
            ("url", "A quote from another source"),
            ("none", "No evidence"),
        ],
        initial="passage",
        widget=forms.RadioSelect,
        label="Evidence",
    )
    passage = forms.ChoiceField(required=False, label="Passage")
    url = forms.URLField(required=False, max_length=2000, label="Source URL", assume_scheme="https")
    quote = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Quote")
    contact = forms.CharField(required=False, max_length=300, label="Contact for follow-up (optional)")

    def __init__(self, *args, decision: Decision, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["passage"].choices = [
            (str(link.passage_id), f"#{link.rank} {link.passage.external_id}") for link in decision.ranked_passages
        ]

    def as_body(self) -> dict[str, Any]:
        """The API's JSON body from the posted form, so both go through one parser."""
        data = self.data
        source, quote = data.get("source", "none"), data.get("quote", "")
        evidence: dict[str, Any] | None = None
        if source == "passage":
            passage = data.get("passage", "")
            evidence = {"passage_id": int(passage) if passage.isdigit() else 0, "quote": quote or None}
        elif source == "url":
            evidence = {"url": data.get("url") or None, "quote": quote or None}
        return {
            "kind": data.get("kind"),
            "reason": data.get("reason") or None,
            "evidence": evidence,
            "contact": data.get("contact", ""),
        }


def dispute_section(request, decision: Decision) -> dict[str, Any]:
    """For the refusal's page: its disputes with their highlighted quotes, and the form."""
    if not permissions.can_read_disputes(request.user, decision.route):
        return {}
    disputes = selectors.disputes_of_decision(decision)
    for dispute in disputes:
        dispute.route = decision.route
        dispute.pieces = selectors.highlighted_quote(dispute)
        dispute.overdue = selectors.is_overdue(dispute)
        dispute.appellant_hidden = selectors.appellant_hidden(request.user, dispute)
    can_open = decision.refused and permissions.can_open_dispute(request.user, decision.route)
    return {
        "disputes": disputes,
        "dispute_form": DisputeForm(decision=decision) if can_open else None,
        "appeal_link": appeal_link_panel(request.user, decision),
    }


def appeal_link_panel(user, decision: Decision) -> dict[str, Any] | None:
    """A refusal's appeal link as the person refused follows it, for those who may hand it out."""
    if not decision.refused or not permissions.can_read_appeal_link(user, decision.route):
        return None
    secret, revoked = selectors.appeal_link_state(decision.route, decision.request_id)
    revocation = selectors.link_revocation(decision.route, decision.request_id) if revoked else None
    if secret is None:  # the route's first link: its secret is made now, as the API does
        secret = services.appeal_secret(decision.route)
    slug, request_id = decision.route.slug, decision.request_id
    path = reverse("appeal", args=[slug, request_id, services.appeal_token(secret, slug, request_id)])
    return {
        "url": None if revocation else absolute_url(path),
        "revocation": revocation,
        "revokes": permissions.can_handle_disputes(user, decision.route),
    }


@require_POST
def appeal_link_revoke(request, pk: int):
    decision = get_decision_for_user(request.user, pk=pk)
    services.appeal_link_revoke(
        actor=Actor.user(request.user),
        user=request.user,
        route=decision.route,
        request_id=decision.request_id,
        reason=request.POST.get("reason", "").strip(),
    )
    messages.success(request, "The appeal link is revoked: it now leads nowhere. Appeals already made stay open.")
    return redirect(reverse("decision-detail", args=[decision.pk]) + "#appeal-link")


# Where each field of the API's body is on the form, and what it is called there.
_FORM_FIELDS = {
    "kind": ("kind", "The kind"),
    "reason": ("reason", "A reason"),
    "evidence": ("source", "Evidence"),
    "evidence.passage_id": ("passage", "The passage"),
    "evidence.url": ("url", "The source URL"),
    "evidence.quote": ("quote", "The quote"),
    "contact": ("contact", "The contact"),
}


def form_errors(error: InvalidInput | Conflict) -> tuple[dict[str, str], str]:
    """(message per form field, message for the form as a whole): each error said once, beside the
    field it is about; the service's own sentence when it names one field."""
    details = error.details if isinstance(error.details, list) else []
    fields: dict[str, str] = {}
    for detail in details:
        name, label = _FORM_FIELDS.get(detail.get("field", ""), (None, ""))
        if name and name not in fields:
            specific = len(details) == 1 and error.code != "invalid"  # e.g. quote_not_found says it best
            fields[name] = error.message if specific else f"{label} {detail['message']}."
    if fields and all(d.get("field", "") in _FORM_FIELDS for d in details):
        return fields, ""
    return fields, error.message


@require_POST
def dispute_open(request, pk: int):
    decision = get_decision_for_user(request.user, pk=pk)
    form = DisputeForm(request.POST, decision=decision)
    try:
        data = parse_dispute(form.as_body())
        dispute = services.dispute_open(actor=Actor.user(request.user), user=request.user, decision=decision, data=data)
    except (InvalidInput, Conflict) as error:
        field_errors, form_error = form_errors(error)
        return render(
            request,
            "disputes/open.html",
            {
                "decision": decision,
                "dispute_form": form,
                "field_errors": field_errors,
                "form_error": form_error,
                "details": error.details,
                "code": error.code,
                # The passages to copy a quote from, beside the form.
                "passages": decision.ranked_passages,
                # The form shows the route's similar refusals wherever it appears (never on the appeal page).
                **similar_refusals_context(request.user, decision),
            },
            status=error.status,
        )
    messages.success(
        request,
        f"Dispute #{dispute.pk} opened. The route's reviewers are told; a reply is due by "
        f"{dispute.due_by:%Y-%m-%d %H:%M} UTC.",
    )
    return redirect(reverse("decision-detail", args=[decision.pk]) + f"#dispute-{dispute.pk}")


# --- the public appeal page -----------------------------------------------------------------------


def _client_over_limit(request) -> bool:
    """Counts appeals per client address (the database cache, shared by workers, counted under an
    advisory lock so appeals sent at once cannot all read the count before it grows); a window opens
    at the first appeal and lasts APPEALS_CLIENT_WINDOW_SECONDS."""
    address = hashlib.sha256(client_address(request).encode("utf-8", "surrogatepass")).hexdigest()
    return not count_within(
        f"appeal-client:{address}",
        limit=settings.APPEALS_PER_CLIENT,
        window_seconds=settings.APPEALS_CLIENT_WINDOW_SECONDS,
    )


@never_cache
@csrf_protect
@require_http_methods(["GET", "POST"])
def appeal(request, slug: str, request_id: str, token: str):
    """No account needed. Shows only the question asked (once ingested), the route's refusal
    message and the promised response time: nothing internal. A token that does not match is the
    same 404 as an unknown route."""
    route = Route.objects.filter(slug=slug).first()
    if (
        route is None
        or not services.storable_request_id(request_id)
        or not services.appeal_token_valid(route, request_id, token)
    ):
        raise Http404("No such appeal.")
    policy = policy_in_force(route)
    decision = Decision.objects.filter(route=route, request_id=request_id).only("question").first()
    appeals = selectors.appeals_through_link(route, request_id)
    context = {
        "question": decision.question if decision else None,
        "refusal_message": policy.refusal_message if policy else DEFAULT_REFUSAL_MESSAGE,
        "response_hours": policy.escalation_response_hours if policy else settings.DISPUTES_DEFAULT_RESPONSE_HOURS,
        "sent": request.GET.get("sent") == "1",
        # A returning appellant reads how their appeal stands instead of a form to send it again.
        "appeals": appeals,
        "max_message": MAX_APPEAL_MESSAGE,
        "message": "",
        "email": "",
    }
    if request.method == "POST":
        message, email = request.POST.get("message", ""), request.POST.get("email", "").strip()
        context |= {"message": message[:MAX_APPEAL_MESSAGE], "email": email[:300]}
        if _client_over_limit(request):
            context["error"] = "Too many appeals from your connection; please try again later."
            return render(request, "disputes/appeal.html", context, status=429)
        try:
            services.appeal_open(route=route, request_id=request_id, message=message, email=email)
        except (InvalidInput, Conflict) as error:
            context["error"] = error.message
            return render(request, "disputes/appeal.html", context, status=error.status)
        return redirect(request.path + "?sent=1")
    return render(request, "disputes/appeal.html", context)


# --- for the refusals list and the analysis page --------------------------------------------------


def disputed_condition():
    """Decisions with a dispute, appeals made before ingest included."""
    return Exists(
        Dispute.objects.filter(
            Q(decision=OuterRef("pk")) | Q(route=OuterRef("route_id"), request_id=OuterRef("request_id"))
        )
    )


def health_figures(user, routes: list[Route]) -> dict[int, dict[str, int]]:
    """Open and overdue disputes per route for route health (one query; zeros included)."""
    if not routes or not permissions.can_read_disputes(user):
        return {}
    counts = {
        row["route_id"]: row
        for row in selectors.readable_disputes(user)
        .filter(route__in=routes, status=Status.OPEN)
        .values("route_id")
        .annotate(open=Count("pk"), overdue=Count("pk", filter=Q(due_by__lt=_now())))
    }
    return {
        route.pk: {
            "disputes_open": counts.get(route.pk, {}).get("open", 0),
            "disputes_overdue": counts.get(route.pk, {}).get("overdue", 0),
        }
        for route in routes
    }


def dashboard_lines(user, routes: list[Route]) -> dict[int, list[dict[str, Any]]]:
    """Open and overdue disputes per route for the dashboard's cards (one query)."""
    if not routes or not permissions.can_read_disputes(user):
        return {}
    counts = (
        selectors.readable_disputes(user)
        .filter(route__in=routes, status=Status.OPEN)
        .values("route_id")
        .annotate(open=Count("pk"), overdue=Count("pk", filter=Q(due_by__lt=_now())))
    )
    slugs = {route.pk: route.slug for route in routes}
    inbox = reverse("dispute-inbox")
    lines: dict[int, list[dict[str, Any]]] = {}
    for row in counts:
        slug = slugs[row["route_id"]]
        lines[row["route_id"]] = [
            {
                "text": f"{row['open']} open dispute{'s' if row['open'] != 1 else ''}",
                "url": f"{inbox}?route={slug}",
                "warn": False,
            }
        ]
        if row["overdue"]:
            lines[row["route_id"]].append(
                {"text": f"{row['overdue']} overdue", "warn": True, "url": f"{inbox}?route={slug}&overdue=1"}
            )
    return lines


def analysis_side_panel(route: Route, cutoffs: list[float]) -> dict[str, Any] | None:
    if not Dispute.objects.filter(route=route).exists():
        return {"template": "disputes/partials/analysis_panel.html", "context": {"rows": [], "route": route}}
    edges = [float("-inf"), *cutoffs, float("inf")]
    rows = selectors.band_summary(route, edges)
    return {"template": "disputes/partials/analysis_panel.html", "context": {"rows": rows, "route": route}}
