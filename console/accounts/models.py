import hashlib
import secrets

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models


class Role(models.TextChoices):
    GRADER = "grader", "Grader"
    REVIEWER = "reviewer", "Reviewer"
    POLICY_OWNER = "policy_owner", "Policy owner"
    AUDITOR = "auditor", "Auditor"
    INTEGRATOR = "integrator", "Integrator"
    ADMIN = "admin", "Admin"
    READER = "reader", "Reader"


class Route(models.Model):
    """One gated answering route (a product surface with its own gate, graders and policy).

    The tenant: every other app's rows hang from it, so it lives on the ground floor beside the
    role grants that point at it (as healthchecks keeps `Project` beside `Member`). It holds only
    what every app shares; each app keeps its own settings of a route in a one-to-one table of its
    own (shadow's pipeline, grading's guidelines and graders per item, monitoring's limits)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # The table keeps the name it had when the route lived in the ledger (accounts 0005).
        db_table = "ledger_route"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class GrantSource(models.TextChoices):
    MANUAL = "manual", "Granted in the console"
    PROVIDER = "provider", "From the identity provider"


class RoleGrant(models.Model):
    """One role for one user, on one route or (route empty) on every route."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="grants")
    role = models.CharField(max_length=20, choices=Role.choices)
    route = models.ForeignKey(
        Route,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="grants",
        help_text="Route the role applies to; empty means every route.",
    )
    source = models.CharField(
        max_length=10,
        choices=GrantSource.choices,
        default=GrantSource.MANUAL,
        help_text="Who made the grant: an admin (kept until revoked) or the identity provider's roles claim "
        "(taken away at the next sign-in that no longer carries it).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "role", "route"], name="unique_grant_per_route"),
            models.UniqueConstraint(
                fields=["user", "role"],
                condition=models.Q(route__isnull=True),
                name="unique_global_grant",
            ),
        ]

    def __str__(self) -> str:
        scope = self.route.slug if self.route_id else "all routes"
        return f"{self.user} as {self.role} on {scope}"


def hash_token(key: str) -> str:
    """Tokens carry 256 bits of randomness, so one SHA-256 is enough to store them safely."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    """An API token; only its SHA-256 is stored, the key is shown once when it is issued."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token key.")
    prefix = models.CharField(max_length=12, help_text="First characters of the key, to tell tokens apart.")
    name = models.CharField(
        max_length=100, blank=True, help_text="What the token is for (the integration using it), chosen by an admin."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="After this instant the API refuses the token; empty means it never expires."
    )
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="Last API call made with it (to the minute).")
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="When an admin revoked it; refused from then.")
    rate_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="API calls a minute this token may make (429 past it); empty means API_TOKEN_RATE_PER_MINUTE.",
    )
    rate_allowance_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Where the token's calls so far, spaced at its rate, would end (console.accounts.throttle); "
        "a call that would push it more than a minute past now is refused.",
    )

    def __str__(self) -> str:
        return f"token {self.prefix}… of {self.user}"

    def is_live(self, now) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    @staticmethod
    def new_key() -> str:
        return "arc_" + secrets.token_urlsafe(32)


class Identity(models.Model):
    """A person's account at the OpenID provider, (issuer, subject), linked to their console user.

    The subject, not the username, is what a sign-in is matched on: a provider may let people change
    their `preferred_username`, never their `sub`."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identities")
    issuer = models.CharField(max_length=500, help_text="The provider's issuer URL (the ID token's iss).")
    subject = models.CharField(max_length=255, help_text="The person's id at the provider (the ID token's sub).")
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(
        help_text="Last sign-in through the provider; `manage.py oidc_deactivate_unknown --not-seen-days` reads it."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="unique_identity_per_issuer")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class ProviderSession(models.Model):
    """A console session opened by a sign-in through the provider, so that the provider's
    back-channel logout (by its session id `sid`, or by subject) can end it."""

    identity = models.ForeignKey(Identity, on_delete=models.CASCADE, related_name="sessions")
    session_key = models.CharField(max_length=40, unique=True, help_text="Django's session key.")
    sid = models.CharField(max_length=255, blank=True, help_text="The provider's session id (the ID token's sid).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["sid"], name="accounts_providersession_sid")]

    def __str__(self) -> str:
        return f"session of {self.identity}"


class UserSession(models.Model):
    """A browser session of a signed-in person, where from and when, so that they can see their
    sessions and end them (the Security page): Django's sessions cannot be listed by user. Recorded
    at sign-in (console.accounts.services.user_session_record) and touched at most once a minute by
    console.accounts.middleware. A row whose session has ended (signed out, expired) is not shown and
    is dropped at its person's next sign-in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="browser_sessions")
    session_key = models.CharField(max_length=40, unique=True, help_text="Django's session key (never shown).")
    created_at = models.DateTimeField(help_text="When the session was opened (the sign-in).")
    last_seen_at = models.DateTimeField(help_text="Its last request, to the minute.")
    user_agent = models.CharField(max_length=300, blank=True, help_text="The browser's User-Agent, shortened.")
    ip_address = models.CharField(
        max_length=64, blank=True, help_text="The client address at its last request (as the sign-in throttle sees it)."
    )

    class Meta:
        indexes = [models.Index(fields=["user", "-last_seen_at"], name="accounts_usersession_user")]

    def __str__(self) -> str:
        return f"session of {self.user}"
