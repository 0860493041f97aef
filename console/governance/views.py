"""Pages of policy sign-off: the route's policy, the draft form, a version's decision record (print
and JSON), the owner's signing page with step-up, and withdrawing a draft."""

from __future__ import annotations

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from audit.services import Actor
from console.accounts import permissions
from console.core.errors import Conflict, Forbidden, InvalidInput
from console.governance import forms, selectors, services
from console.governance.validation import parse_draft
from console.stats.intervals import INTERVAL_METHODS


def route_policy(request, slug: str):
    route = selectors.route_for_policy_reader(request.user, slug)
    return render(
        request,
        "governance/route_policy.html",
        {
            "route": route,
            "policy": selectors.policy_in_force(route),
            "history": selectors.history(route),
            "not_following": selectors.decisions_not_following_policy([route.pk]).get(route.pk, 0),
            "not_following_list": selectors.decisions_not_following_policy_list(route),
            "can_draft": permissions.can_draft_policy(request.user, route),
            "can_run_trials": permissions.can_run_trials(request.user, route),
        },
    )


@require_http_methods(["GET", "POST"])
def policy_draft(request, slug: str):
    route = selectors.route_for_policy_reader(request.user, slug)
    if not permissions.can_draft_policy(request.user, route):
        raise Forbidden("Only reviewers, policy owners and admins of this route may draft its policy.")
    params = request.POST if request.method == "POST" else request.GET
    in_force = selectors.policy_in_force(route)
    if request.method == "GET" and in_force is not None and not params.get("cutoff"):
        params = forms.params_from_policy(in_force, params)
    errors: list[dict] = []
    if request.method == "POST":
        try:
            draft = parse_draft(forms.draft_body(request.POST), route=route)
        except InvalidInput as exc:
            errors = forms.labelled_errors(exc.details or [{"field": "", "message": exc.message}])
        else:
            policy = services.policy_draft(actor=Actor.user(request.user), user=request.user, route=route, draft=draft)
            messages.success(request, f"Draft v{policy.version} saved; {policy.owner.get_username()} was notified.")
            return redirect("policy-record", pk=policy.pk)
    return render(
        request,
        "governance/draft.html",
        {
            "route": route,
            "values": forms.initial_values(params),
            "filters": forms.filter_items(params),
            "owners": selectors.eligible_owners(route),
            "errors": errors,
            "intervals": INTERVAL_METHODS,
        },
        status=400 if errors else 200,
    )


def policy_record(request, pk: int):
    """The decision record of one version: printable, with the evidence exactly as stored."""
    policy = selectors.get_policy_for_user(request.user, pk)
    return render(
        request,
        "governance/record.html",
        {
            "policy": policy,
            "evidence": selectors.evidence_of(policy),
            "can_sign": policy.status == "draft" and permissions.can_sign_policy(request.user, policy),
            "can_withdraw": policy.status == "draft" and permissions.can_withdraw_policy(request.user, policy),
        },
    )


def policy_record_json(request, pk: int):
    policy = selectors.get_policy_for_user(request.user, pk)
    response = JsonResponse(selectors.policy_as_dict(policy), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'inline; filename="policy-{policy.route.slug}-v{policy.version}.json"'
    return response


@require_http_methods(["GET", "POST"])
def policy_sign(request, pk: int):
    """Signing is deliberate: the owner re-enters their password, reads the evidence as it will be
    stored and ticks that they read it; the hash of what the page showed is what gets signed."""
    policy = selectors.get_policy(pk)
    if not permissions.can_sign_policy(request.user, policy):
        raise Forbidden("Only the owner named in this policy version may sign it.")
    if policy.status != "draft":
        raise Conflict(f"Version {policy.version} is {policy.status}; only a draft can be signed.")
    error = ""
    if request.method == "POST":
        if not request.user.check_password(request.POST.get("password", "")):
            error = "The password is not right. Signing needs your password again."
        elif request.POST.get("read_evidence") != "yes":
            error = "Tick that you have read the evidence before signing."
        else:
            try:
                services.policy_sign(
                    actor=Actor.user(request.user),
                    user=request.user,
                    policy=policy,
                    evidence_sha256=request.POST.get("evidence_sha256", ""),
                )
            except Conflict as exc:
                error = exc.message
                policy = selectors.get_policy(pk)
            else:
                messages.success(request, f"Version {policy.version} is signed and in force.")
                return redirect("route-policy", slug=policy.route.slug)
    return render(
        request,
        "governance/sign.html",
        {"policy": policy, "evidence": selectors.evidence_of(policy), "error": error},
        status=400 if error else 200,
    )


@require_POST
def policy_withdraw(request, pk: int):
    policy = selectors.get_policy(pk)
    services.policy_withdraw(actor=Actor.user(request.user), user=request.user, policy=policy)
    messages.success(request, f"Draft v{policy.version} withdrawn.")
    return redirect("route-policy", slug=policy.route.slug)
