"""Sign-in with failed attempts throttled (console.accounts.throttle), and the admins' workspace
pages: routes with their settings and members, and API tokens."""

from __future__ import annotations

import csv

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.http import HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit.services import Actor
from console.accounts import hooks, selectors, services, throttle
from console.accounts.backends import local_login_allowed
from console.accounts.forms import MemberAddForm, RouteSlugForm, TokenForm, TokenRateForm
from console.core.errors import Conflict, InvalidInput


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, whose password check django-axes throttles (console.accounts.throttle):
    while the username or the client is locked out every attempt is refused, right or wrong (so
    guessing on reveals nothing), and each failure counts against both."""

    throttled: throttle.Throttled | None = None

    def clean(self):
        username = self.data.get("username") or ""
        address = throttle.client_address(self.request)
        failed: ValidationError | None = None
        # One attempt per username and client at a time, so that attempts sent at once cannot all pass
        # the check before any is counted. Nothing is raised inside: its transaction commits the count.
        with throttle.one_attempt_at_a_time(throttle.LOGIN_SCOPE, username=username, address=address):
            try:
                cleaned = super().clean()
            except ValidationError as exc:
                failed = exc
        self.throttled = throttle.locked_out(self.request, username=username)
        if self.throttled:
            raise ValidationError(self.throttled.message, code="throttled")
        if failed is not None:
            raise failed
        return cleaned


class LoginView(auth_views.LoginView):
    """Django's sign-in page; a throttled attempt answers 429 with Retry-After and says when to retry."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        if not local_login_allowed():
            return HttpResponseForbidden("Local passwords are switched off: sign in through the identity provider.")
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["local_login"] = local_login_allowed()
        context["provider_login"] = bool(settings.OIDC_ISSUER)
        return context

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
            response["Retry-After"] = str(form.throttled.retry_after)
        return response


# --- the admins' workspace pages: routes, their settings and members, API tokens -------------------


def _section_forms(data, route) -> list[tuple[hooks.RouteSection, forms.Form]]:
    """Each registered section's form, bound to `data` (or filled from the route when None)."""
    return [
        (section, section.form_class(data, prefix=section.key, initial=section.initial(route)))
        for section in hooks.route_sections()
    ]


def _sections_data(section_forms) -> dict[str, dict]:
    return {section.key: form.cleaned_data for section, form in section_forms}


@require_http_methods(["GET"])
def workspace_index(request):
    selectors.require_workspace_admin(request.user)
    fields = hooks.route_fields()
    routes = [(route, [getattr(route, field.name) for field in fields]) for route in selectors.workspace_routes()]
    return render(request, "accounts/workspace.html", {"routes": routes, "fields": fields})


@require_http_methods(["GET", "POST"])
def route_new(request):
    selectors.require_workspace_admin(request.user)
    data = request.POST if request.method == "POST" else None
    slug_form = RouteSlugForm(data)
    section_forms = _section_forms(data, None)
    if data is not None and slug_form.is_valid() and all(form.is_valid() for _, form in section_forms):
        try:
            route = services.route_settings_create(
                actor=Actor.user(request.user),
                user=request.user,
                slug=slug_form.cleaned_data["slug"],
                sections=_sections_data(section_forms),
            )
        except (InvalidInput, Conflict) as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"Route {route.slug} created. Add the people who work on it below.")
            return redirect("route-members", slug=route.slug)
    return render(request, "accounts/route_new.html", {"slug_form": slug_form, "section_forms": section_forms})


@require_http_methods(["GET", "POST"])
def route_settings(request, slug: str):
    route = selectors.route_for_admin(request.user, slug)
    data = request.POST if request.method == "POST" else None
    section_forms = _section_forms(data, route)
    if data is not None and all(form.is_valid() for _, form in section_forms):
        try:
            changed = services.route_settings_update(
                actor=Actor.user(request.user), user=request.user, route=route, sections=_sections_data(section_forms)
            )
        except (InvalidInput, Conflict) as exc:
            messages.error(request, exc.message)
        else:
            if changed:
                messages.success(request, f"Saved the route's {', '.join(t.lower() for t in changed)}.")
            else:
                messages.info(request, "Nothing changed.")
            return redirect("route-settings", slug=route.slug)
    return render(request, "accounts/route_settings.html", {"route": route, "section_forms": section_forms})


@require_http_methods(["GET", "POST"])
def route_members(request, slug: str):
    route = selectors.route_for_admin(request.user, slug)
    form = MemberAddForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            grant = services.member_add(
                actor=Actor.user(request.user),
                route=route,
                username=form.cleaned_data["username"],
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
            )
        except (InvalidInput, Conflict) as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, f"{grant.user.get_username()} is now {grant.get_role_display().lower()} here.")
            return redirect("route-members", slug=route.slug)
    context = {"route": route, "form": form, "grants": selectors.route_grants(route)}
    return render(request, "accounts/route_members.html", context)


@require_POST
def route_member_revoke(request, slug: str, pk: int):
    route = selectors.route_for_admin(request.user, slug)
    grant = selectors.grant_on_route(route, pk)
    services.role_revoke(actor=Actor.user(request.user), grant=grant)
    messages.success(request, f"{grant.user.get_username()} is no longer {grant.get_role_display().lower()} here.")
    return redirect("route-members", slug=route.slug)


@require_http_methods(["GET", "POST"])
def tokens(request):
    """The key of a new token is in this response only: the page is rendered, not redirected to, and
    never cached; only the key's SHA-256 is stored."""
    selectors.require_workspace_admin(request.user)
    form = TokenForm(request.POST if request.method == "POST" else None)
    issued = None
    if request.method == "POST" and form.is_valid():
        issued = services.token_issue(
            actor=Actor.user(request.user),
            user=form.cleaned_data["owner"],
            name=form.cleaned_data["name"],
            expires_at=form.expires_at,
            rate_per_minute=form.cleaned_data["rate_per_minute"],
        )
        messages.success(request, f"Token {issued.token.name} created. Copy its key now: it is shown only this once.")
        form = TokenForm()
    context = {
        "form": form,
        "issued": issued,
        "tokens": selectors.tokens_list(),
        "now": timezone.now(),
        "default_rate": settings.API_TOKEN_RATE_PER_MINUTE,
    }
    response = render(request, "accounts/tokens.html", context)
    add_never_cache_headers(response)
    return response


@require_POST
def token_revoke(request, pk: int):
    selectors.require_workspace_admin(request.user)
    token = selectors.token_get(pk)
    if services.tokens_revoke(actor=Actor.user(request.user), token_ids=[token.pk]):
        messages.success(request, f"Token {token.name or token.prefix} revoked: the API refuses it from now on.")
    else:
        messages.info(request, f"Token {token.name or token.prefix} was revoked already.")
    return redirect("tokens")


@require_POST
def token_rate(request, pk: int):
    selectors.require_workspace_admin(request.user)
    token = selectors.token_get(pk)
    form = TokenRateForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Token {token.name or token.prefix}: {form.errors['rate_per_minute'][0]}")
        return redirect("tokens")
    rate = form.cleaned_data["rate_per_minute"]
    if services.token_rate_set(actor=Actor.user(request.user), token=token, rate_per_minute=rate):
        limit = f"{rate} calls a minute" if rate else "the default rate"
        messages.success(request, f"Token {token.name or token.prefix} may now make {limit}.")
    else:
        messages.info(request, f"Token {token.name or token.prefix} had that rate already.")
    return redirect("tokens")


# Spreadsheets run a cell that starts with one of these as a formula: such a cell is written as text.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value) -> str:
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


@require_GET
def workspace_roles(request):
    """Who has which role on which route (admins), with where each grant came from."""
    selectors.require_workspace_admin(request.user)
    return render(request, "accounts/roles.html", {"grants": selectors.role_grants_all()})


@require_GET
def workspace_roles_csv(request):
    selectors.require_workspace_admin(request.user)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="roles.csv"'
    writer = csv.writer(response)
    writer.writerow(["username", "email", "active", "role", "route", "source", "granted_at"])
    for grant in selectors.role_grants_all():
        writer.writerow(
            [
                _csv_cell(grant.user.get_username()),
                _csv_cell(grant.user.email),
                "yes" if grant.user.is_active else "no",
                grant.role,
                grant.route.slug if grant.route_id else "*",
                grant.source,
                grant.created_at.isoformat(),
            ]
        )
    return response


# --- the Security page: each person's own sessions and tokens --------------------------------------


@require_GET
def account_security(request):
    """Where a person sees the browser sessions and API tokens that act as them, and ends them.
    Everything on it is the signed-in person's own: the selectors take `request.user`, never an id."""
    context = {
        "sessions": selectors.own_sessions(request.user),
        "current_key": request.session.session_key,
        "tokens": selectors.own_tokens(request.user),
        "grants": selectors.own_grants(request.user),
        "now": timezone.now(),
    }
    response = render(request, "accounts/security.html", context)
    add_never_cache_headers(response)
    return response


@require_POST
def account_session_end(request, pk: int):
    row = selectors.own_session_get(request.user, pk)
    if row.session_key == request.session.session_key:
        messages.error(request, "This is the browser you are using: sign out with the button at the top.")
    elif services.user_sessions_end(actor=Actor.user(request.user), user=request.user, sessions=[row]):
        messages.success(request, "Session ended: that browser is signed out.")
    return redirect("account-security")


@require_POST
def account_sessions_end_others(request):
    others = [s for s in selectors.own_sessions(request.user) if s.session_key != request.session.session_key]
    ended = services.user_sessions_end(actor=Actor.user(request.user), user=request.user, sessions=others)
    messages.success(request, f"Signed out everywhere else: {ended} other session{'s' if ended != 1 else ''} ended.")
    return redirect("account-security")


@require_POST
def account_token_revoke(request, pk: int):
    token = selectors.own_token_get(request.user, pk)
    if services.tokens_revoke(actor=Actor.user(request.user), token_ids=[token.pk]):
        messages.success(request, f"Token {token.name or token.prefix} revoked: the API refuses it from now on.")
    else:
        messages.info(request, f"Token {token.name or token.prefix} was revoked already.")
    return redirect("account-security")
