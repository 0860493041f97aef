"""Sign-in with failed attempts throttled (console.accounts.throttle)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from console.accounts import throttle


class ThrottledAuthenticationForm(AuthenticationForm):
    """Refuses every attempt, right or wrong, while the username or the client is throttled (so
    guessing on reveals nothing), and counts each failure against both."""

    throttled: throttle.Throttled | None = None

    def clean(self):
        username = self.data.get("username") or ""
        address = throttle.client_address(self.request)
        self.throttled = throttle.blocked("login", username=username, address=address)
        if self.throttled:
            raise ValidationError(self.throttled.message, code="throttled")
        try:
            cleaned = super().clean()
        except ValidationError:
            throttle.record_failure("login", username=username, address=address)
            raise
        throttle.clear_username("login", username=username)
        return cleaned


class LoginView(auth_views.LoginView):
    """Django's sign-in page; a throttled attempt answers 429 with Retry-After and says when to retry."""

    form_class = ThrottledAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.throttled:
            response.status_code = 429
            response["Retry-After"] = str(form.throttled.retry_after)
        return response
