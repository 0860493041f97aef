"""Disputes of single refusals, and the per-route secret behind the appeal links.

A dispute names its route and the decision's request id, and its decision once the decision is
stored: an appeal may arrive through its link before the answering system's log reaches the
console, so it is stored with ``decision`` empty and attached by a job after that decision is
ingested (reads also match on route and request id, so nothing waits on the job).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Kind(models.TextChoices):
    ANSWERABLE_FROM_PASSAGES = "answerable_from_passages", "Answerable from the retrieved passages"
    ANSWERABLE_ELSEWHERE = "answerable_elsewhere", "Answerable from another source"
    RETRIEVAL_MISSED = "retrieval_missed", "Retrieval missed the right passage"
    QUESTION_MISREAD = "question_misread", "The question was misread"
    OTHER = "other", "Other"
    APPEAL = "appeal", "Appeal by the person refused"


# Kinds a console user may choose; `appeal` comes only through the appeal link.
USER_KINDS = tuple(k for k in Kind.values if k != Kind.APPEAL)
# Kinds that may come without evidence.
KINDS_WITHOUT_EVIDENCE = (Kind.RETRIEVAL_MISSED, Kind.OTHER)


class Status(models.TextChoices):
    OPEN = "open", "Open"
    UPHELD = "upheld", "Upheld: the refusal was right"
    OVERTURNED = "overturned", "Overturned: an answer should have been given"
    WITHDRAWN = "withdrawn", "Withdrawn by its opener"


RESOLUTIONS = (Status.UPHELD, Status.OVERTURNED, Status.WITHDRAWN)

# What a resolution means, in the words people outside the review team read (emails, the appeal
# page, webhook summaries): "upheld" alone reads as "the appeal succeeded", the opposite of what
# happened, since it is the refusal that was upheld.
OUTCOME_WORDS = {
    Status.UPHELD: "the refusal stands",
    Status.OVERTURNED: "the refusal was overturned: the answer should have been given",
    Status.WITHDRAWN: "withdrawn",
}

MAX_REASON = 5_000
MAX_APPEAL_MESSAGE = 2_000
MAX_QUOTE = 2_000
MAX_NOTE = 5_000


class Dispute(models.Model):
    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="disputes")
    request_id = models.CharField(max_length=200, help_text="The decision's request id within the route.")
    decision = models.ForeignKey(
        "ledger.Decision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="disputes",
        db_constraint=False,  # checked by triggers: decisions are partitioned (console/ledger/partitions.py)
        help_text="Empty for an appeal made before ingest.",
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    reason = models.TextField(help_text="The opener's argument, or the appellant's message.")
    passage = models.ForeignKey(
        "ledger.Passage",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The logged passage the quote comes from.",
    )
    source_url = models.CharField(max_length=2000, blank=True, help_text="An outside source of the quote.")
    quote = models.TextField(blank=True)
    quote_ranges = models.JSONField(
        null=True, blank=True, help_text='{"bytes": [[a, b]], "chars": [[c, d]]} of the quote in its passage.'
    )
    contact = models.CharField(max_length=300, blank=True, help_text="How to reach the opener for follow-up.")
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="disputes_opened",
        help_text="Empty for an appeal.",
    )
    appellant_email = models.CharField(max_length=300, blank=True)
    opened_at = models.DateTimeField()
    policy = models.ForeignKey(
        "governance.PolicyVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The signed policy in force when the dispute was opened.",
    )
    response_hours = models.PositiveSmallIntegerField(help_text="The promised response time the clock runs on.")
    due_by = models.DateTimeField()
    escalated_at = models.DateTimeField(null=True, blank=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="disputes_assigned"
    )
    assigned_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="disputes_resolved"
    )
    resolution_note = models.TextField(blank=True)

    class Meta:
        ordering = ["due_by", "pk"]
        indexes = [
            models.Index(fields=["route", "request_id"], name="dispute_route_request"),
            models.Index(
                fields=["due_by"], condition=Q(status="open", escalated_at__isnull=True), name="dispute_escalation_due"
            ),
        ]
        constraints = [
            # One open dispute per person per decision; the service answers 409 before this fires,
            # the index settles two requests that race.
            models.UniqueConstraint(
                fields=["opened_by", "route", "request_id"],
                condition=Q(status="open", opened_by__isnull=False),
                name="one_open_dispute",
            ),
        ]

    def __str__(self) -> str:
        return f"dispute {self.pk} of {self.request_id} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status == Status.OPEN

    @property
    def outcome_words(self) -> str:
        """The resolution in plain words; empty while open."""
        return OUTCOME_WORDS.get(self.status, "")

    @property
    def no_signed_escalation_path(self) -> bool:
        return self.policy_id is None


class AppealSecret(models.Model):
    """The key of a route's appeal links. Created when a link is first asked for; rotating it
    invalidates every link given out before."""

    route = models.OneToOneField("accounts.Route", on_delete=models.CASCADE, related_name="appeal_secret")
    secret = models.CharField(max_length=100)
    rotated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"appeal secret of {self.route_id}"


class AppealLinkRevocation(models.Model):
    """One refusal's appeal link, revoked by a reviewer (a link posted where it should not be, or
    abused): its page is the same 404 as a forged link, whatever the route's secret. Rotating the
    secret revokes every link of a route at once instead."""

    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="+")
    request_id = models.CharField(max_length=200)
    revoked_at = models.DateTimeField()
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField(blank=True, help_text="Why, for the audit trail and the next reviewer.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["route", "request_id"], name="one_revocation_per_link")]

    def __str__(self) -> str:
        return f"appeal link of {self.request_id} revoked"
