import hashlib
import json
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q


class PolicyStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    ACTIVE = "active", "Active"
    SUPERSEDED = "superseded", "Superseded"
    WITHDRAWN = "withdrawn", "Withdrawn"
    NEEDS_RECHECK = "needs_recheck", "Active, awaiting a recheck"


# Statuses in which a version is the policy in force on its route (at most one per route).
IN_FORCE = (PolicyStatus.ACTIVE, PolicyStatus.NEEDS_RECHECK)
MAX_RESPONSE_HOURS = 720


class PolicyVersion(models.Model):
    """One version of a route's abstention policy: a cutoff with its owner, escalation path, refusal
    message and the evidence the owner read, stored as text with its SHA-256.

    Once signed, the database refuses any change except of `status` (migration 0002): a change of
    content is a new version.
    """

    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="policies")
    version = models.PositiveIntegerField(help_text="1, 2, 3, ... per route, in order of drafting.")
    status = models.CharField(max_length=16, choices=PolicyStatus.choices, default=PolicyStatus.DRAFT)
    cutoff = models.FloatField(help_text="Answers whose gate score is at least this are served.")
    band_lower = models.FloatField(
        null=True,
        blank=True,
        help_text="Lower edge of the middle band: scores from here up to the cutoff are served with evidence shown.",
    )
    exchange_rate = models.FloatField(
        null=True, blank=True, help_text="Correct answers the owner accepts to withhold per wrong answer removed."
    )
    exchange_answers = models.JSONField(
        default=list, blank=True, help_text='The questions answered: [{"rate": 10, "accept": true}, ...].'
    )
    costs = models.JSONField(null=True, blank=True, help_text="c_w, c_a and optionally q and c_v, in correct answers.")
    cost_threshold = models.FloatField(
        null=True, blank=True, help_text="tau = (c_w' - c_a) / (1 + c_w'), c_w' = (1 - q) c_w + q c_v when q is given."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="policies_owned",
        help_text="Holds policy_owner on the route; the only person who may sign.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="policies_drafted")
    created_at = models.DateTimeField(auto_now_add=True)
    escalation_contact = models.CharField(max_length=200, help_text="Who answers when the gate refuses.")
    escalation_channel = models.CharField(max_length=500, help_text="Email address, pager, ticket queue or URL.")
    escalation_response_hours = models.PositiveSmallIntegerField(help_text="Promised response time, 1 to 720 hours.")
    refusal_message = models.TextField(help_text="What a refused user reads (Markdown, shown sanitised).")
    rationale = models.TextField(help_text="Why this cutoff.")
    filters = models.JSONField(default=dict, blank=True, help_text="The window the evidence was computed on.")
    confidence = models.FloatField(default=0.95)
    interval = models.CharField(max_length=20, default="wilson")
    evidence_text = models.TextField(help_text="The operating-point document the owner read, as stored JSON text.")
    evidence_sha256 = models.CharField(max_length=64, help_text="SHA-256 of evidence_text (UTF-8).")
    data_version = models.CharField(
        max_length=200, help_text="The route's data version when the evidence was computed (not part of the evidence)."
    )
    evidence_as_of = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The evidence counts decisions ingested and final labels recorded up to this instant; "
        "empty for versions drafted before evidence snapshots.",
    )
    evidence_decisions_seen = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The route's newest decision id read just before as_of: decisions that arrive later have higher ids.",
    )
    evidence_labels_seen = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The route's newest label revision read just before as_of: a label written later has a higher one.",
    )
    warnings = models.JSONField(default=list, blank=True, help_text='[{"code", "message"}] shown before signing.')
    signed_at = models.DateTimeField(null=True, blank=True)
    signed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="policies_signed"
    )

    class Meta:
        ordering = ["route", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["route", "version"], name="policy_version_per_route"),
            models.UniqueConstraint(
                fields=["route"],
                condition=Q(status__in=["active", "needs_recheck"]),
                name="policy_one_in_force_per_route",
            ),
            models.CheckConstraint(
                condition=Q(escalation_response_hours__gte=1) & Q(escalation_response_hours__lte=MAX_RESPONSE_HOURS),
                name="policy_response_hours_range",
            ),
            models.CheckConstraint(
                condition=Q(band_lower__isnull=True) | Q(band_lower__lte=models.F("cutoff")),
                name="policy_band_below_cutoff",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["draft", "withdrawn"]) | Q(signed_at__isnull=False),
                name="policy_signed_when_in_force",
            ),
        ]
        indexes = [models.Index(fields=["route", "signed_at"], name="policy_route_signed_idx")]

    def __str__(self) -> str:
        return f"{self.route.slug} policy v{self.version} ({self.status})"

    @property
    def signed(self) -> bool:
        return self.signed_at is not None

    @property
    def in_force(self) -> bool:
        return self.status in IN_FORCE

    @cached_property
    def evidence_document(self) -> dict[str, Any]:
        return json.loads(self.evidence_text)

    @staticmethod
    def sha256_of(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SigningStepUp(models.Model):
    """The identity provider's evidence that the signer authenticated again just before signing
    (step-up: prompt=login, max_age=0), kept beside the signature it proves. Written in the signature's
    transaction; signatures proven with a password or a token have none."""

    policy = models.OneToOneField(PolicyVersion, on_delete=models.PROTECT, related_name="step_up")
    issuer = models.CharField(max_length=500, help_text="The provider's issuer URL.")
    subject = models.CharField(max_length=255, help_text="The signer's id at the provider (sub).")
    auth_time = models.DateTimeField(help_text="When the provider authenticated the signer (the ID token's auth_time).")
    acr = models.CharField(
        max_length=255, blank=True, help_text="Authentication context class, when the provider sent one."
    )
    amr = models.JSONField(default=list, blank=True, help_text="Authentication methods (e.g. pwd, otp), when sent.")
    signed_at = models.DateTimeField(help_text="The signature's instant; at most OIDC_STEP_UP_SECONDS after auth_time.")

    def __str__(self) -> str:
        return f"step-up of {self.subject} for policy {self.policy_id}"
