"""Pages of policy sign-off: the route's policy, the draft form, a version's decision record (print
and JSON), the owner's signing page with step-up, and withdrawing a draft."""

from __future__ import annotations

from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from audit.services import Actor
from console.accounts import permissions, throttle
from console.accounts.identity import stepup
from console.core.errors import Conflict, InvalidInput
from console.governance import forms, selectors, services
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
            "can_draft": services.passes(services.draft_gate, request.user, route),
            "can_run_trials": permissions.can_run_trials(request.user, route),
        },
    )


@require_http_methods(["GET", "POST"])
def policy_draft(request, slug: str):
    route = selectors.route_for_policy_reader(request.user, slug)
    services.draft_gate(request.user, route)  # before showing the form; policy_draft asks it again
    params = request.POST if request.method == "POST" else request.GET
    in_force = selectors.policy_in_force(route)
    if request.method == "GET" and in_force is not None and not params.get("cutoff"):
        params = forms.params_from_policy(in_force, params)
    errors: list[dict] = []
    if request.method == "POST":
        try:
            policy = services.policy_draft(
                actor=Actor.user(request.user), user=request.user, route=route, draft=forms.draft_body(request.POST)
            )
        except InvalidInput as exc:
            errors = forms.labelled_errors(exc.details or [{"field": "", "message": exc.message}])
        else:
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
            "can_sign": services.passes(services.sign_gate, request.user, policy),
            "can_withdraw": services.passes(services.withdraw_gate, request.user, policy),
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
    services.sign_gate(request.user, policy)  # before the password and the tick; policy_sign asks it again
    error = ""
    roll_back = request.POST.get("roll_back") == "yes"
    throttled = None
    if stepup.applies(request.user):
        # Signed in at the identity provider: the proof is a fresh authentication there, not a password.
        return _sign_with_step_up(request, policy, roll_back=roll_back)
    if request.method == "POST":
        # The password counts against the sign-in's throttle (same counts): a wrong one here is a
        # failed sign-in, and a throttled user or client is refused, right password or not.
        address, username = throttle.client_address(request), request.user.get_username()
        with throttle.one_attempt_at_a_time("login", username=username, address=address):
            throttled = throttle.blocked("login", username=username, address=address)
            right = not throttled and request.user.check_password(request.POST.get("password", ""))
            if not throttled and not right:
                throttle.record_failure("login", username=username, address=address)
        if throttled:
            error = throttled.message
        elif not right:
            error = "The password is not right. Signing needs your password again."
        elif request.POST.get("read_evidence") != "yes":
            error = "Tick that you have read the evidence before signing."
        else:
            signed, error, policy = _sign(request, policy, roll_back=roll_back, proof=services.SigningProof.PASSWORD)
            if signed is not None:
                return signed
            roll_back = False  # the sign page shows what changed
    if roll_back and error:  # a wrong password or no tick: ask again on the confirmation
        response = _roll_back_confirmation(request, policy, request.POST.get("evidence_sha256", ""), error=error)
    else:
        since = selectors.arrived_since(policy)
        response = render(
            request,
            "governance/sign.html",
            {
                "policy": policy,
                "evidence": selectors.evidence_of(policy),
                "since": since,
                "error": error,
                "newer_in_force": selectors.newer_in_force(policy),
            },
            status=400 if error else 200,
        )
    if throttled:
        response.status_code = 429
        response["Retry-After"] = str(throttled.retry_after)
    return response


def _sign_with_step_up(request, policy, *, roll_back: bool):
    """The sign page for people who sign in at the identity provider: they confirm there (step-up), come
    back, tick and sign within OIDC_STEP_UP_SECONDS; the provider's evidence goes with the signature."""
    evidence = stepup.evidence_fresh(request.session)
    error = ""
    if request.method == "POST":
        if evidence is None:
            error = "Confirm it is you at your identity provider first, then sign within the next few minutes."
        elif request.POST.get("read_evidence") != "yes":
            error = "Tick that you have read the evidence before signing."
        else:
            signed, error, policy = _sign(
                request, policy, roll_back=roll_back, proof=services.SigningProof.PROVIDER, step_up=evidence
            )
            if signed is not None:
                stepup.evidence_use(request.session)  # one authentication, one signature
                return signed
    context = {
        "policy": policy,
        "evidence": selectors.evidence_of(policy),
        "since": selectors.arrived_since(policy),
        "error": error,
        "newer_in_force": selectors.newer_in_force(policy),
        "step_up": {"fresh": evidence, "url": f"{reverse('oidc-login')}?step_up=1&next={request.path}"},
    }
    return render(request, "governance/sign.html", context, status=400 if error else 200)


def _sign(request, policy, *, roll_back: bool, **proof):
    """Sign the draft on the evidence hash the page showed: (the redirect once signed, or the roll-back
    confirmation for a draft older than the version in force; else None, the error to show, and the
    policy read again)."""
    newer = selectors.newer_in_force(policy)
    evidence_sha256 = request.POST.get("evidence_sha256", "")
    try:
        services.policy_sign(
            actor=Actor.user(request.user),
            user=request.user,
            policy=policy,
            evidence_sha256=evidence_sha256,
            roll_back=roll_back,
            acknowledged=request.POST.getlist("acknowledge"),
            **proof,
        )
    except (InvalidInput, Conflict) as exc:
        if exc.code == "older_than_in_force":
            return _roll_back_confirmation(request, policy, evidence_sha256), "", policy
        return None, exc.message, selectors.get_policy(policy.pk)
    done = f"Version {policy.version} is signed and in force"
    if newer is not None:
        done += f" in place of version {newer.version}: the route is rolled back"
    messages.success(request, done + ".")
    return redirect("route-policy", slug=policy.route.slug), "", policy


def _roll_back_confirmation(request, policy, evidence_sha256: str, *, error: str = ""):
    """A separate step: the owner confirms, with their password again, that the older draft replaces
    the newer version in force, both named with their cutoffs."""
    newer = selectors.newer_in_force(policy)
    if newer is None:  # the version in force changed meanwhile: start over on the sign page
        return redirect("policy-sign", pk=policy.pk)
    return render(
        request,
        "governance/roll_back.html",
        {
            "policy": policy,
            "newer": newer,
            "evidence_sha256": evidence_sha256,
            "error": error,
            "step_up": stepup.applies(request.user),
        },
        status=409 if not error else 400,
    )


@require_POST
def policy_recompute_evidence(request, pk: int):
    """The owner's deliberate "Recompute the evidence now": back to the sign page with the new figures."""
    policy = selectors.get_policy_for_user(request.user, pk)
    recomputed = services.policy_evidence_recompute(actor=Actor.user(request.user), user=request.user, policy=policy)
    messages.success(request, f"The evidence was recomputed as of {recomputed.evidence_as_of:%Y-%m-%d %H:%M:%S} UTC.")
    if services.passes(services.sign_gate, request.user, recomputed):
        return redirect("policy-sign", pk=recomputed.pk)
    return redirect("policy-record", pk=recomputed.pk)


@require_POST
def policy_withdraw(request, pk: int):
    policy = selectors.get_policy(pk)
    services.policy_withdraw(actor=Actor.user(request.user), user=request.user, policy=policy)
    messages.success(request, f"Draft v{policy.version} withdrawn.")
    return redirect("route-policy", slug=policy.route.slug)
