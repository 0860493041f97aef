"""Sign-in through the provider: the redirect there, the way back, and the logouts (the console's
sign-out, which also ends the provider's session, and the provider's back-channel logout)."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from console.accounts.identity import provider, services, stepup
from console.accounts.models import Identity
from console.core.errors import Conflict, InvalidInput

logger = logging.getLogger(__name__)

BACKEND = "console.accounts.backends.IdentityProviderBackend"
_NEXT_KEY = "oidc_next"
_ID_TOKEN_KEY = "oidc_id_token"


def _require_provider() -> None:
    if not provider.configured():
        raise Http404("No identity provider is configured.")


def _safe_next(request, candidate: str | None) -> str:
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return reverse(settings.LOGIN_REDIRECT_URL)


@require_GET
@never_cache
def oidc_login(request):
    """Off to the provider; state, nonce and the PKCE verifier wait in the session for the way back."""
    _require_provider()
    request.session[_NEXT_KEY] = _safe_next(request, request.GET.get("next"))
    params = {}
    if request.GET.get("step_up") == "1" and request.user.is_authenticated:
        # Step-up (signing): the provider must ask again, whatever session it has (prompt=login, max_age=0).
        request.session[stepup.STARTED_KEY] = {"user": request.user.pk, "started": int(time.time())}
        params = {"prompt": "login", "max_age": 0}
    else:
        request.session.pop(stepup.STARTED_KEY, None)
    try:
        callback = request.build_absolute_uri(reverse("oidc-callback"))
        return provider.authorize_redirect(request, redirect_uri=callback, **params)
    except (provider.SignInRefused, OSError) as exc:
        logger.warning("identity provider unreachable or misconfigured: %s", exc)
        return _refused(request, "The identity provider could not be reached. Try again in a minute.", status=502)


@require_GET
@never_cache
def oidc_callback(request):
    _require_provider()
    step_up = request.session.pop(stepup.STARTED_KEY, None)
    if step_up is not None:
        return _step_up_callback(request, step_up)
    try:
        answer = provider.authorize_answer(request)
        signed_in = services.identity_sign_in(
            issuer=settings.OIDC_ISSUER, claims=answer.claims, roles_claim=settings.OIDC_ROLES_CLAIM
        )
    except provider.SignInRefused as exc:
        logger.warning("sign-in through the identity provider refused: %s", exc)
        return _refused(request, "The identity provider's answer did not check out. Start again.", status=400)
    except (InvalidInput, Conflict) as exc:
        return _refused(request, exc.message, status=403)
    except OSError as exc:
        logger.warning("identity provider unreachable: %s", exc)
        return _refused(request, "The identity provider could not be reached. Try again in a minute.", status=502)
    next_url = request.session.pop(_NEXT_KEY, None) or reverse(settings.LOGIN_REDIRECT_URL)
    login(request, signed_in.user, backend=BACKEND)
    # The provider may tell no logout: the session ends at this age whatever happens there.
    request.session.set_expiry(settings.OIDC_MAX_SESSION_SECONDS)
    request.session[_ID_TOKEN_KEY] = answer.id_token
    request.session.save()
    services.provider_session_record(
        identity=signed_in.identity, session_key=request.session.session_key, sid=str(answer.claims.get("sid") or "")
    )
    return redirect(next_url)


def _step_up_callback(request, started: dict):
    """The way back from a step-up: the same person, authenticated at the provider after it began."""
    try:
        answer = provider.authorize_answer(request)
    except provider.SignInRefused as exc:
        logger.warning("step-up at the identity provider refused: %s", exc)
        return _refused(request, "The identity provider's answer did not check out. Start again.", status=400)
    except OSError:
        return _refused(request, "The identity provider could not be reached. Try again in a minute.", status=502)
    same_person = (
        request.user.is_authenticated
        and request.user.pk == started["user"]
        and Identity.objects.filter(
            user=request.user, issuer=settings.OIDC_ISSUER, subject=answer.claims.get("sub")
        ).exists()
    )
    if not same_person:
        return _refused(request, "You confirmed as someone else at the identity provider.", status=403)
    auth_time = answer.claims.get("auth_time")
    # A little clock skew between the provider and the console is forgiven, an earlier sign-in is not.
    if not isinstance(auth_time, int) or auth_time < started["started"] - 5:
        return _refused(request, "The identity provider did not ask for your password again.", status=403)
    stepup.evidence_record(request.session, claims=answer.claims)
    return redirect(request.session.pop(_NEXT_KEY, None) or reverse(settings.LOGIN_REDIRECT_URL))


def _refused(request, message: str, *, status: int):
    return render(request, "registration/oidc_refused.html", {"message": message}, status=status)


@require_POST
def sign_out(request):
    """The console's sign-out. A session the provider opened also ends there (RP-initiated logout), so
    the next sign-in asks for the password at the provider again."""
    id_token = request.session.get(_ID_TOKEN_KEY)
    if not id_token or not provider.configured():
        return auth_views.LogoutView.as_view()(request)
    logout(request)
    try:
        back = request.build_absolute_uri(reverse("login"))
        url = provider.logout_url(id_token=id_token, post_logout_redirect_uri=back)
    except (provider.SignInRefused, OSError):
        url = None
    return redirect(url or settings.LOGOUT_REDIRECT_URL)


@csrf_exempt
@require_POST
def oidc_backchannel_logout(request):
    """OpenID Connect Back-Channel Logout 1.0: the provider says a session ended; the console's sessions
    it opened end too. 400 for a token that does not check out or was seen before."""
    _require_provider()
    try:
        claims = provider.logout_token_claims(request.POST.get("logout_token", ""))
    except provider.SignInRefused as exc:
        logger.warning("back-channel logout refused: %s", exc)
        return HttpResponseBadRequest("invalid logout token", content_type="text/plain")
    except OSError:
        return HttpResponse("provider unreachable", status=502, content_type="text/plain")
    jti = claims.get("jti")
    if jti and not cache.add(f"oidc-logout-jti:{jti}", 1, timeout=600):
        return HttpResponseBadRequest("logout token replayed", content_type="text/plain")
    services.provider_sessions_end(issuer=settings.OIDC_ISSUER, subject=claims.get("sub"), sid=claims.get("sid"))
    response = HttpResponse("", content_type="text/plain")
    response["Cache-Control"] = "no-store"
    return response
