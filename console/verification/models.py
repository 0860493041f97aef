"""Stored results of span verification: one SpanCheck per (decision, passage, claim unit) and
one DecisionSupport per decision with its figures (docs/statistics.md, "Long answers")."""

from django.db import models


class SupportStatus(models.TextChoices):
    # PENDING is only the column's default: services.decisions_verify writes each row once, with its
    # outcome, DONE or FAILED (older code wrote PENDING inside its transaction; such a row, like a
    # FAILED one, is verified again).
    PENDING = "pending", "Pending"
    DONE = "done", "Verified"
    FAILED = "failed", "Failed"


class DecisionSupport(models.Model):
    """How much of a decision's claim its logged passages contain, word for word up to case."""

    # Partitioned like the decisions (console/ledger/partitions.py): the database's key and foreign
    # key are on (decision_id, decision_occurred_at).
    decision = models.OneToOneField(
        "ledger.Decision", on_delete=models.CASCADE, primary_key=True, related_name="support", db_constraint=False
    )
    decision_occurred_at = models.DateTimeField(help_text="The decision's occurred_at: the month partition key.")
    status = models.CharField(max_length=8, choices=SupportStatus.choices, default=SupportStatus.PENDING)
    units = models.PositiveIntegerField(default=0, help_text="Claim units the claim splits into.")
    units_supported = models.PositiveIntegerField(
        default=0, help_text="Claim units found in at least one logged passage."
    )
    expected_support = models.FloatField(
        null=True, blank=True, help_text="units_supported / units; empty when the claim has no units."
    )
    fully_supported = models.BooleanField(default=False, help_text="Every claim unit was found.")
    no_supporting_passage = models.BooleanField(
        default=False, help_text="No claim unit was found in any passage: a retrieval problem, not a gate one."
    )
    verifier_version = models.CharField(max_length=40, blank=True, help_text="spans.VERIFIER_VERSION used.")
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Times the verification job claimed it.")
    error = models.TextField(blank=True, help_text="Why verification failed, when it did.")
    verified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(units_supported__lte=models.F("units")), name="supported_units_at_most_units"
            ),
        ]
        indexes = [
            models.Index(
                fields=["decision"], condition=models.Q(no_supporting_passage=True), name="support_none_found_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"support of decision {self.decision_id}: {self.units_supported}/{self.units}"


class SpanCheck(models.Model):
    """One claim unit searched in one logged passage of a decision.

    Stored for the unit's first-ranked passage (the row that holds its text) and for every passage
    where the search found something; a pair without a row was searched and not found, and is
    listed as such (selectors.span_checks_as_list). Rows stored before that hold every pair."""

    # Keyed by what it checks, one row per (decision, passage, unit): a surrogate id and its index cost
    # about 31 bytes a decision and served no read (verification migration 0007). The key's index
    # leads with the decision, which every read names.
    pk = models.CompositePrimaryKey("decision", "passage", "unit_index")
    # A reference checked on insert by a trigger, not a foreign key (console/ledger/partitions.py).
    decision = models.ForeignKey(
        "ledger.Decision", on_delete=models.CASCADE, related_name="span_checks", db_index=False, db_constraint=False
    )
    passage = models.ForeignKey("ledger.Passage", on_delete=models.PROTECT, related_name="span_checks")
    unit_index = models.PositiveIntegerField(help_text="Position of the unit in the claim, from 0.")
    unit_text = models.TextField(
        blank=True,
        help_text="The claim unit as split from the claim (trimmed), on the unit's row for its first-ranked "
        "passage; empty on its other rows (rows stored before that hold it on every row).",
    )
    supported = models.BooleanField(help_text="The unit appears in the passage (full Unicode case folding).")
    match_ranges = models.JSONField(
        default=list, help_text="[start, end) byte offsets into the passage text's UTF-8 encoding."
    )
    char_ranges = models.JSONField(default=list, help_text="[start, end) code-point offsets into the passage text.")
    truncated = models.BooleanField(default=False, help_text="More matches existed than ranges were kept.")
    verifier_version = models.CharField(max_length=40)

    class Meta:
        ordering = ["decision", "unit_index", "passage"]

    def __str__(self) -> str:
        return f"decision {self.decision_id} unit {self.unit_index} in passage {self.passage_id}: {self.supported}"
