"""Forms of the admins' workspace pages; every error is said in words a person uses."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.utils import timezone

from console.accounts.models import Role, Route
from console.core.forms import ISO_DATE_FORMATS, IsoDateInput

# A route-scoped admin grant would still make its holder admin of every route (permissions.is_admin),
# so the members page offers every role but admin; admins are made with `manage.py issue_token --role admin`.
MEMBER_ROLES = [(value, label) for value, label in Role.choices if value != Role.ADMIN]
TOKEN_DAYS_DEFAULT = 90


class RouteSlugForm(forms.Form):
    slug = forms.SlugField(
        max_length=64,
        label="Slug",
        help_text="The route's short name in the API and in addresses: lower-case letters, digits and dashes.",
        error_messages={
            "required": "Give the route a slug.",
            "invalid": "Use only lower-case letters, digits and dashes in the slug.",
            "max_length": "Keep the slug to 64 characters.",
        },
    )

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if slug != slug.lower():
            raise forms.ValidationError("Use only lower-case letters, digits and dashes in the slug.")
        if Route.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"A route called {slug} exists already; choose another slug.")
        return slug


class MemberAddForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        label="Username",
        validators=[UnicodeUsernameValidator()],
        help_text="Someone who already has an account, or a new person's username.",
        error_messages={"required": "Give the person's username."},
    )
    email = forms.EmailField(
        required=False,
        label="Email (for a new person)",
        help_text="Needed only when nobody has this username yet: the console then creates the account.",
        error_messages={"invalid": "That email address does not look right."},
    )
    role = forms.ChoiceField(
        choices=MEMBER_ROLES,
        label="Role on this route",
        error_messages={"required": "Choose a role.", "invalid_choice": "Choose one of the listed roles."},
    )

    def clean(self):
        cleaned = super().clean()
        username = cleaned.get("username")
        if username and not cleaned.get("email") and "email" not in self.errors:
            if not get_user_model().objects.filter(username=username).exists():
                self.add_error(
                    "email", f"Nobody is called {username} yet: give their email address to add them as a new person."
                )
        return cleaned


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        label="Name",
        help_text="What the token is for, e.g. the answering service that sends decisions.",
        error_messages={"required": "Give the token a name.", "max_length": "Keep the name to 100 characters."},
    )
    owner = forms.CharField(
        max_length=150,
        label="Owner's username",
        help_text="The token acts with this person's roles (an integrator, for sending decisions).",
        error_messages={"required": "Say whose token it is."},
    )
    expires_on = forms.DateField(
        required=False,
        input_formats=ISO_DATE_FORMATS,
        widget=IsoDateInput(),
        label="Expires on",
        help_text="UTC, as YYYY-MM-DD; the API refuses the token from the start of that day. Empty: never.",
        error_messages={"invalid": "Give the expiry date as YYYY-MM-DD."},
    )

    rate_per_minute = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=10_000_000,
        label="Calls a minute",
        help_text="The most API calls a minute the token may make; past it the API answers 429. "
        "Empty: the console's default.",
        error_messages={"invalid": "Give a whole number of calls.", "min_value": "Allow at least 1 call a minute."},
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expires_on"].initial = (timezone.now() + timedelta(days=TOKEN_DAYS_DEFAULT)).date()

    def clean_owner(self):
        username = self.cleaned_data["owner"]
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"Nobody is called {username}; add them on a route's members page first.")
        return user

    def clean_expires_on(self) -> date | None:
        day = self.cleaned_data["expires_on"]
        if day is not None and day <= timezone.now().date():
            raise forms.ValidationError("Choose an expiry date after today.")
        return day

    @property
    def expires_at(self) -> datetime | None:
        day = self.cleaned_data.get("expires_on")
        return datetime.combine(day, time.min, tzinfo=UTC) if day else None


class TokenRateForm(forms.Form):
    """A token's calls a minute, changed on the tokens page."""

    rate_per_minute = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=10_000_000,
        label="Calls a minute",
        help_text="Empty: the console's default.",
        error_messages={"invalid": "Give a whole number of calls.", "min_value": "Allow at least 1 call a minute."},
    )
