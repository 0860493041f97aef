"""Blind grading: what graders judge, who holds what, their grades and the final labels.

Graders only ever see a GradingItem's question, answer and passages (through serializers and
templates written for them); the decision's score, outcome, cutoff and the answer's origin stay
on the server.
"""

from django.conf import settings
from django.contrib.postgres.functions import RandomUUID
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Coalesce, NullIf

from console.ledger.models import served_answer_of


class Verdict(models.TextChoices):
    CORRECT = "correct", "Correct"
    INCORRECT = "incorrect", "Incorrect"
    UNSURE = "unsure", "Unsure"


class AnswerSource(models.TextChoices):
    SERVED = "served", "Served answer"
    SHADOW = "shadow", "Shadow run answer"
    CLAIM = "claim", "Logged claim"
    GOLD = "gold", "Gold item"


class ItemStatus(models.TextChoices):
    OPEN = "open", "Needs grades"
    ADJUDICATION = "adjudication", "Graders disagree"
    LABELLED = "labelled", "Labelled"
    EXCLUDED = "excluded", "Not sampled"


# Independent grades an item needs when its route says nothing else (no settings row).
DEFAULT_GRADERS_PER_ITEM = 2


class RouteGradingSettings(models.Model):
    """A route's grading settings: the guidelines its graders read and how many grade each item.

    Grading's own one-to-one table, as monitoring and similarity keep theirs; a route without a row
    takes the defaults (no guidelines, `DEFAULT_GRADERS_PER_ITEM`), which
    `grading.selectors.route_grading_settings` returns as an unsaved row.
    """

    route = models.OneToOneField(
        "accounts.Route", on_delete=models.CASCADE, primary_key=True, related_name="grading_settings"
    )
    guidelines = models.TextField(blank=True, help_text="Grading guidelines in Markdown, shown to graders.")
    graders_per_item = models.PositiveSmallIntegerField(
        default=DEFAULT_GRADERS_PER_ITEM,
        validators=[MinValueValidator(1)],
        help_text="Independent grades each new item needs; items in the pool keep the number they entered with.",
    )

    class Meta:
        verbose_name = "route grading settings"
        verbose_name_plural = "route grading settings"
        constraints = [
            models.CheckConstraint(condition=models.Q(graders_per_item__gte=1), name="at_least_one_grader_per_item")
        ]

    def __str__(self) -> str:
        return f"grading settings of route {self.route_id}"


class GradingPlan(models.Model):
    """A route's sampling plan: gate-score bands with target counts, and the rate of gold items.

    Without a plan every decision of the route enters its pool. With one, a decision whose score
    falls in a band enters with that band's rate, drawn once when it enters; the rate is
    `target / population` of the band over the window the plan was set from (at most 1), so a
    period like that window yields about `target` items per band.
    """

    route = models.OneToOneField("accounts.Route", on_delete=models.CASCADE, related_name="grading_plan")
    strata = models.JSONField(
        default=list,
        blank=True,
        help_text="Bands [{name, low, high, target, population, rate}], low inclusive, high exclusive.",
    )
    gold_rate = models.FloatField(default=0.0, help_text="Share of `next` calls that hand out a gold item.")
    window_days = models.PositiveSmallIntegerField(default=30, help_text="Days of traffic the rates were set from.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(gold_rate__gte=0) & models.Q(gold_rate__lte=0.5), name="gold_rate_in_0_half"
            ),
        ]

    def __str__(self) -> str:
        return f"grading plan of route {self.route_id}"

    def stratum_for(self, score: float) -> tuple[str, float]:
        """The stratum a gate score falls in and its inclusion probability."""
        for band in self.strata:
            if band["low"] <= score < band["high"]:
                return band["name"], band["rate"]
        return "unbanded", 1.0


def _item_texts() -> dict[str, models.Expression]:
    """The question and the answer graders read, as SQL: the item's own text where it has one, else
    its decision's (the served answer or the logged claim, by the answer's source). `ItemText` says
    the same in Python, and grading.services.queue's claim in hand-written SQL."""
    text = models.TextField()
    decision_answer = models.Case(
        models.When(answer_source=AnswerSource.SERVED, then=served_answer_of("decision__")),
        models.When(answer_source=AnswerSource.CLAIM, then="decision__claim"),
        output_field=text,
    )
    return {
        "question": Coalesce(
            NullIf("own_question", models.Value("")), "decision__question", models.Value(""), output_field=text
        ),
        "answer": Coalesce(
            NullIf("own_answer", models.Value("")), decision_answer, models.Value(""), output_field=text
        ),
    }


class GradingItemQuerySet(models.QuerySet):
    def with_texts(self) -> "GradingItemQuerySet":
        """Items with `question` and `answer` read in the same query, joined from their decision."""
        return self.annotate(**_item_texts())


class ItemText:
    """An item's `question` or `answer` as graders read it: its own text, or its decision's when the
    item stores none.

    Set on the item when it was read with its texts (`GradingItem.objects.with_texts()`, the queue's
    claim); otherwise taken from `item.decision`, a query of its own unless the decision was
    select_related. Not a constructor argument: an item's text is written as `own_question` /
    `own_answer`, and only where the decision does not hold it.
    """

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, item, owner=None):
        if item is None:
            return self
        if self.name not in item.__dict__:
            item.__dict__[self.name] = item.text_from_decision(self.name)
        return item.__dict__[self.name]

    def __set__(self, item, value: str) -> None:
        item.__dict__[self.name] = value


class GradingItem(models.Model):
    """A decision's answer under review, in its route's pool.

    Its question and answer are the decision's (the question, and the served answer or the logged
    claim) unless the item has its own: a shadow run's answer, a gold item's. Only those are stored,
    so a pool item does not keep a second copy of its decision's text.
    """

    public_id = models.UUIDField(
        db_default=RandomUUID(),
        unique=True,
        editable=False,
        help_text="The only id graders see: random, so it says nothing about when or why the item entered.",
    )
    # No index of its own: grading_queue_idx and grading_gold_idx lead with the route (about 11 bytes
    # a pool item, and one index less for each item's insert).
    route = models.ForeignKey("accounts.Route", on_delete=models.PROTECT, related_name="grading_items", db_index=False)
    decision = models.ForeignKey(
        "ledger.Decision",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="grading_items",
        db_constraint=False,  # checked on insert by a trigger: decisions are partitioned (console/ledger/partitions.py)
        help_text="Empty for gold items written by hand.",
    )
    decision_occurred_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="The decision's occurred_at, its month partition key: the queue's claim reads the decision's "
        "texts and passages from that month's partitions only. Kept by the database (grading migration 0012).",
    )
    own_question = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="The question graders read when it is not the decision's (a gold item without one); "
        "empty means the decision's.",
    )
    own_answer = models.TextField(
        blank=True,
        default="",
        db_default="",
        help_text="The answer graders judge when the decision does not hold it (a shadow run's, a gold "
        "item's); empty means the decision's served answer or claim, by the answer source.",
    )
    answer_source = models.CharField(
        max_length=12, choices=AnswerSource.choices, help_text="Where the answer came from; never shown to graders."
    )
    stratum = models.CharField(max_length=64, default="all", help_text="Sampling stratum (e.g. a score band).")
    inclusion_probability = models.FloatField(
        default=1.0, help_text="Chance this decision had of entering the pool under the route's plan."
    )
    queue_key = models.BigIntegerField(
        help_text="Random position fixed on entry: graded items are a simple random sample of their stratum."
    )
    grades_required = models.PositiveSmallIntegerField(default=2)
    status = models.CharField(max_length=16, choices=ItemStatus.choices, default=ItemStatus.OPEN)
    is_gold = models.BooleanField(default=False)
    gold_verdict = models.CharField(
        max_length=12, choices=Verdict.choices, blank=True, help_text="Known right verdict of a gold item."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GradingItemQuerySet.as_manager()

    question = ItemText()
    answer = ItemText()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["decision"], condition=models.Q(is_gold=False), name="one_pool_item_per_decision"
            ),
            models.CheckConstraint(
                condition=models.Q(inclusion_probability__gt=0) & models.Q(inclusion_probability__lte=1),
                name="inclusion_probability_in_0_1",
            ),
        ]
        indexes = [
            models.Index(fields=["route", "status", "queue_key"], name="grading_queue_idx"),
            # The queue of a grader who may grade every route, and the gold items of one route.
            models.Index(
                fields=["queue_key"], condition=models.Q(status="open", is_gold=False), name="grading_open_queue_idx"
            ),
            models.Index(fields=["route", "queue_key"], condition=models.Q(is_gold=True), name="grading_gold_idx"),
        ]

    def __str__(self) -> str:
        return f"item {self.pk} ({self.route_id})"

    def text_from_decision(self, name: str) -> str:
        """`question` or `answer` worked out from the stored fields, as `_item_texts` does in SQL."""
        decision = self.decision if self.decision_id is not None else None
        if name == "question":
            return self.own_question or (decision.question if decision else "")
        if self.own_answer or decision is None:
            return self.own_answer
        if self.answer_source == AnswerSource.SERVED:
            return decision.served_answer or ""
        if self.answer_source == AnswerSource.CLAIM:
            return decision.claim
        return ""


class Assignment(models.Model):
    """A lease: one grader holds one item until `lease_expires_at`."""

    item = models.ForeignKey(GradingItem, on_delete=models.CASCADE, related_name="assignments")
    grader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    leased_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    skipped = models.BooleanField(default=False, help_text="The grader passed on this item; it is not offered again.")
    graded_at = models.DateTimeField(null=True, blank=True, help_text="When the grader's grade ended the lease.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "grader"], name="one_assignment_per_grader")]
        indexes = [models.Index(fields=["item", "lease_expires_at"], name="assignment_lease_idx")]

    def __str__(self) -> str:
        return f"item {self.item_id} leased to {self.grader_id}"

    def holds_slot(self, now) -> bool:
        """A grade, or a lease still running, takes one of the item's k places."""
        return not self.skipped and (self.graded_at is not None or self.lease_expires_at > now)


class Grade(models.Model):
    item = models.ForeignKey(GradingItem, on_delete=models.CASCADE, related_name="grades")
    grader = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="grades")
    verdict = models.CharField(max_length=12, choices=Verdict.choices)
    note = models.TextField(blank=True, max_length=2000)
    seconds_spent = models.FloatField(null=True, blank=True, help_text="From lease to grade, as the page measured.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "grader"], name="one_grade_per_grader")]

    def __str__(self) -> str:
        return f"{self.verdict} on item {self.item_id} by {self.grader_id}"


class ClaimVerdict(models.TextChoices):
    SUPPORTED = "supported", "Supported"
    UNSUPPORTED = "unsupported", "Not supported"
    # Excluded from n, as VeriScore excludes claims nobody could check.
    UNVERIFIABLE = "unverifiable", "Not verifiable"


class ClaimGrade(models.Model):
    """One grader's verdict on one claim of a long answer, beside the Grade of the whole answer."""

    grade = models.ForeignKey(Grade, on_delete=models.CASCADE, related_name="claim_grades")
    index = models.PositiveSmallIntegerField(help_text="The claim's place in the answer's claims, from 0.")
    verdict = models.CharField(max_length=12, choices=ClaimVerdict.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["grade", "index"], name="one_claim_grade_per_index")]

    def __str__(self) -> str:
        return f"claim {self.index} of grade {self.grade_id}: {self.verdict}"


class LabelMethod(models.TextChoices):
    UNANIMOUS = "unanimous", "Unanimous graders"
    MAJORITY = "majority", "Majority of graders"
    ADJUDICATED = "adjudicated", "Adjudicated by a reviewer"
    IMPORTED = "imported", "Imported graded set"


class FinalLabel(models.Model):
    """Whether a decision's answer under review is correct: what the statistics read."""

    # Checked on insert by a trigger, not a foreign key: decisions are partitioned (console/ledger/partitions.py).
    decision = models.OneToOneField(
        "ledger.Decision", on_delete=models.PROTECT, related_name="final_label", db_constraint=False
    )
    item = models.OneToOneField(
        GradingItem, null=True, blank=True, on_delete=models.PROTECT, related_name="final_label"
    )
    # For a long answer: claims_verifiable > 0 and every verifiable claim supported.
    correct = models.BooleanField()
    method = models.CharField(max_length=12, choices=LabelMethod.choices)
    claims_supported = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Long answers: k, the claims labelled supported; empty for a short answer."
    )
    claims_verifiable = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Long answers: n, the claims labelled supported or unsupported (unverifiable ones are left out).",
    )
    source = models.CharField(max_length=200, blank=True, help_text="Name of the imported set, for imported labels.")
    note = models.TextField(blank=True, max_length=2000, help_text="The adjudicating reviewer's reason.")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="labels_decided"
    )
    decided_at = models.DateTimeField(auto_now_add=True)
    # Copies of the decision's route, score and time, set by a database trigger on every write
    # (migration 0003), whatever the application sends: the statistics read a route's labels from
    # this table alone instead of fetching a labelled decision from every corner of the ledger.
    decision_route = models.ForeignKey(
        "accounts.Route",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
    )
    decision_score = models.FloatField(null=True, blank=True, editable=False, help_text="The decision's gate_score.")
    decision_occurred_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="The decision's occurred_at."
    )
    # The decision's K, copied the same way (migration 0012): a long route's graded sample is read
    # from the labels alone.
    decision_expected_claims = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The decision's expected_claims (K)."
    )
    # Copies of its pool item's sampling stratum and inclusion probability (fixed when the item
    # entered), set by the same trigger (migration 0005); empty without an item. The graded sample
    # then needs no join to the pool, which holds an item for every decision.
    item_stratum = models.CharField(max_length=64, null=True, blank=True, editable=False)  # noqa: DJ001 (NULL: no item)
    item_inclusion_probability = models.FloatField(null=True, blank=True, editable=False)
    # Set by a trigger on every insert and update (migration 0006), from a sequence drawn under the
    # audit chain's lock, so it grows in commit order: a route's newest revision moves whenever one
    # of its labels is written, which is what the statistics' data version reads (one index probe).
    revision = models.BigIntegerField(null=True, blank=True, editable=False)

    class Meta:
        constraints = [
            # Both counts or neither (a short answer), k <= n, and a long answer is correct exactly
            # when it is fully supported.
            models.CheckConstraint(
                condition=models.Q(claims_supported__isnull=True, claims_verifiable__isnull=True)
                | models.Q(claims_supported__isnull=False, claims_verifiable__isnull=False),
                name="claim_counts_together",
            ),
            models.CheckConstraint(
                condition=models.Q(claims_verifiable__isnull=True)
                | models.Q(claims_supported__lte=models.F("claims_verifiable")),
                name="claims_supported_within_verifiable",
            ),
            models.CheckConstraint(
                condition=models.Q(claims_verifiable__isnull=True)
                | models.Q(correct=True, claims_verifiable__gt=0, claims_supported=models.F("claims_verifiable"))
                | (
                    models.Q(correct=False)
                    & (models.Q(claims_verifiable=0) | models.Q(claims_supported__lt=models.F("claims_verifiable")))
                ),
                name="long_label_correct_when_fully_supported",
            ),
        ]
        indexes = [
            models.Index(fields=["decision_route", "decision_occurred_at"], name="label_route_time_idx"),
            models.Index(fields=["decision_route", "revision"], name="label_revision_idx"),
        ]

    def __str__(self) -> str:
        return f"decision {self.decision_id}: {self.verdict} ({self.method})"

    @property
    def verdict(self) -> str:
        return Verdict.CORRECT if self.correct else Verdict.INCORRECT

    @property
    def support(self) -> float | None:
        """S = k/n of a long answer; None for a short answer or when no claim was verifiable."""
        if not self.claims_verifiable:
            return None
        return self.claims_supported / self.claims_verifiable


class FinalClaimLabel(models.Model):
    """The final verdict on one claim of a long answer; its FinalLabel holds the counts."""

    label = models.ForeignKey(FinalLabel, on_delete=models.CASCADE, related_name="claim_labels")
    index = models.PositiveSmallIntegerField(help_text="The claim's place in the answer's claims, from 0.")
    verdict = models.CharField(max_length=12, choices=ClaimVerdict.choices)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["label", "index"], name="one_final_claim_label_per_index")]

    def __str__(self) -> str:
        return f"claim {self.index} of label {self.label_id}: {self.verdict}"


class LabelSample(models.Model):
    """The final labels of a route's decisions of one UTC day that share a sample group (method,
    source, inclusion probability, stratum), packed into two byte strings.

    Kept by statement triggers on grading_finallabel (migration 0007), which rebuild every (route,
    day) a write touched; read-only for the application. The graded sample joins a group's days
    instead of grouping and packing every label of the window on each read (console.analysis.selectors).
    """

    # No index of its own: the unique constraint's index leads with the route and the day.
    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField(help_text="UTC date of the labelled decisions' occurred_at.")
    method = models.CharField(max_length=12, choices=LabelMethod.choices, help_text="The labels' method.")
    source = models.CharField(max_length=200, blank=True, help_text="The labels' imported set, empty for grades.")
    item_inclusion_probability = models.FloatField(
        null=True, blank=True, help_text="The labels' pool items' inclusion probability; empty without an item."
    )
    item_stratum = models.CharField(  # noqa: DJ001 (NULL: no item, as on the labels)
        max_length=64, null=True, blank=True, help_text="The labels' pool items' stratum; empty without an item."
    )
    labels = models.PositiveIntegerField(help_text="How many labels the row packs.")
    scores = models.BinaryField(
        help_text="The labels' decision scores in label id order, big-endian float8 each, NaN for none."
    )
    correct = models.BinaryField(help_text="The labels' verdicts in the same order, one byte each (1: correct).")

    class Meta:
        constraints = [
            # NULLs equal: labels without a pool item share one group a day, as GROUP BY puts them.
            models.UniqueConstraint(
                fields=["route", "day", "method", "source", "item_inclusion_probability", "item_stratum"],
                name="unique_label_sample_group",
                nulls_distinct=False,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.day}/{self.method}/{self.source}/{self.item_stratum}: {self.labels}"
