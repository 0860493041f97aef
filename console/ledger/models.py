import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Coalesce, Length
from django.db.models.lookups import Exact, LessThanOrEqual
from pgvector.django import VectorField

from console.accounts.models import Route
from console.ledger.compression import TRAINED_MAX_BYTES, compress_text, decompress_text

# A GIN index collects new entries in a pending list and merges them into its tree when the list
# reaches this size (PostgreSQL's default is 4 MB). The merged list's pages stay in the index file
# as free space that VACUUM never gives back, so each month's index carried about 4 MB of them
# whatever its rows; a 256 kB list costs a few microseconds more per insert (bench/README.md).
GIN_PENDING_LIST_KB = 256

_FINITE = models.Q(gate_score__lt=float("inf")) & models.Q(gate_score__gt=float("-inf"))


class DigestField(models.BinaryField):
    """A SHA-256 digest stored as its 32 bytes (bytea) and read and written as 64 hex characters,
    so that code, templates and the API see the hex they always did, at half the bytes on disk
    (and in the unique index on it). Raw SQL passes bytes: `bytes.fromhex(key)`."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else bytes(value).hex()

    def to_python(self, value):
        if isinstance(value, bytes | memoryview):
            return bytes(value).hex()
        return value

    def get_db_prep_value(self, value, connection, prepared=False):
        if isinstance(value, str):
            value = bytes.fromhex(value)
        return super().get_db_prep_value(value, connection, prepared)


class CompressedTextField(models.TextField):
    """Text stored in a bytea column, deflated when that is shorter (console/ledger/compression.py),
    and read and written as `str`, so the ORM, forms and the API see the text they always did. Raw
    SQL reads and writes the stored bytes: `compress_text` / `decompress_text`. Writes through the
    ORM deflate without a preset dictionary; ingest, the product's writer of passages, uses the
    newest `PassageDictionary`."""

    def db_type(self, connection) -> str:
        return "bytea"

    def from_db_value(self, value, expression, connection):
        return None if value is None else decompress_text(value)

    def get_db_prep_value(self, value, connection, prepared=False):
        value = super().get_db_prep_value(value, connection, prepared)
        return compress_text(value) if isinstance(value, str) else value


class PassageDictionary(models.Model):
    """A zstd dictionary trained on stored passages, so a short passage can refer back to words it
    has "seen" before (console/ledger/compression.py); dictionaries built before zstd are sample
    passage text that deflate starts from, and the passages stored with them still name them.
    Stored passages name a dictionary by id, so a dictionary is never changed or deleted: the app's
    database role may only add and read rows, and a trigger refuses UPDATE and DELETE to anyone
    else (ledger migration 0014). Built by `passage_dictionary_build` from the newest stored
    passages."""

    id = models.SmallAutoField(primary_key=True)  # two bytes in every value compressed with it
    data = models.BinaryField(
        help_text="A zstd dictionary trained on passage text (before zstd: passage text, the most recent last)."
    )
    sha256 = DigestField(help_text="SHA-256 of data.")
    sample_passages = models.PositiveIntegerField(help_text="Passages whose text went into data.")
    sample_bytes = models.PositiveIntegerField(help_text="UTF-8 bytes of those passages.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["sha256"], name="unique_passage_dictionary_sha256"),
            # A trained dictionary's most (256 KiB since ledger 0026, 32 KiB before); a preset of
            # text from before zstd was at most deflate's window, 32 KiB.
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("data"), TRAINED_MAX_BYTES), name="passage_dictionary_max_bytes"
            ),
        ]

    def __str__(self) -> str:
        return f"passage dictionary {self.pk} ({self.sha256[:8]})"


class PassageOrigin(models.Model):
    """Where passages come from: the route that logged them, their corpus snapshot, their source
    and the start of their uri, stored once for every passage that shares them. Retrievers send the
    same few of each on every passage (and a uri that is most often a fixed address followed by
    the passage's id), so a passage row keeps a 4-byte reference to its origin where it kept the
    route's id and the three strings (about 95 bytes a passage with its padding, bench/README.md).
    Rows are never edited or deleted; `key` makes them unique.
    """

    id = models.AutoField(primary_key=True)
    # Who may read its passages (the verify API's check on a passage id). NULL only for passages
    # no decision had logged when ledger migration 0024 gave each passage its route.
    route = models.ForeignKey(Route, null=True, on_delete=models.PROTECT, related_name="+")
    corpus_snapshot = models.CharField(max_length=200, blank=True, help_text="versions.corpus at request time.")
    source = models.CharField(max_length=200, blank=True)
    uri_prefix = models.CharField(
        max_length=2000, blank=True, help_text="A passage's uri is this prefix followed by its external id."
    )
    key = DigestField(unique=True, help_text="SHA-256 over route, corpus snapshot, source and uri prefix (origin_key).")

    def __str__(self) -> str:
        return f"origin {self.pk}: {self.source or '-'} in {self.corpus_snapshot or '-'}"

    @classmethod
    def of(
        cls, route_id: int | None, corpus_snapshot: str = "", source: str = "", uri_prefix: str = ""
    ) -> "PassageOrigin":
        """The origin of these, stored when it is not yet (for writers through the ORM; ingest adds
        a batch's origins in one statement)."""
        origin, _ = cls.objects.get_or_create(
            key=origin_key(route_id, corpus_snapshot, source, uri_prefix),
            defaults={
                "route_id": route_id,
                "corpus_snapshot": corpus_snapshot,
                "source": source,
                "uri_prefix": uri_prefix,
            },
        )
        return origin


def uri_split(uri: str, external_id: str) -> tuple[str, str | None]:
    """(uri prefix of the passage's origin, uri as the passage stores it): a uri that ends with the
    passage's external id keeps its start in the origin and stores NULL (read back as prefix + id);
    any other uri is stored whole, beside an origin with no prefix."""
    if external_id and uri.endswith(external_id):
        return uri[: len(uri) - len(external_id)], None
    return "", uri


def origin_key(route_id: int | None, corpus_snapshot: str, source: str, uri_prefix: str) -> str:
    """The origin's `key`: SHA-256 over its route's id and its three strings as a JSON array, in hex."""
    return hashlib.sha256(json.dumps([route_id, corpus_snapshot, source, uri_prefix]).encode()).hexdigest()


class PassageManager(models.Manager):
    """Passages come with their origin (a join to a table of a few rows): every reader of a passage
    reads its source, uri or corpus snapshot through it."""

    def get_queryset(self):
        return super().get_queryset().select_related("origin")


class Passage(models.Model):
    """A retrieved chunk exactly as it was at request time. Rows are never edited.

    The same external id with other text (or source, uri, corpus snapshot) is another passage;
    `content_key` is the SHA-256 over all of them and makes the row content-addressed. The key
    includes the route that logged it, so routes never share a passage row (nor its embedding);
    rows stored before the route was part of the key keep their old key and are never matched again.
    The route, corpus snapshot, source and the start of the uri are the passage's `origin` (ledger
    migration 0027); `route_id`, `corpus_snapshot`, `source` and `uri` read them back as sent.
    """

    external_id = models.CharField(max_length=500, help_text="The retriever's id for the chunk.")
    text = CompressedTextField(help_text="Stored deflated when that is shorter; reads give the text.")
    # NULL and '' differ here: NULL is the origin's prefix followed by the id, '' a passage sent with no uri.
    stored_uri = models.CharField(  # noqa: DJ001
        max_length=2000,
        null=True,
        blank=True,
        db_column="uri",
        help_text="The uri when it is not the origin's prefix followed by the external id; else NULL.",
    )
    embedding = VectorField(null=True, blank=True, help_text="Optional embedding sent by the integrator.")
    content_key = DigestField(help_text="SHA-256 over id, corpus, text hash, source, uri.")
    # Its route is its origin's: the route that logged it (passages logged by several routes before
    # the key held the route were split into a row per route by ledger migration 0024). Written by
    # ingest in the statement that joins the origin it has just made sure of, so no per-row
    # reference check in the database (origins are never deleted).
    origin = models.ForeignKey(
        PassageOrigin, on_delete=models.PROTECT, related_name="+", db_index=False, db_constraint=False
    )

    objects = PassageManager()

    class Meta:
        base_manager_name = "objects"

    # The key is unique in the database, not in this model's state: ledger migration 0023 makes
    # `unique_passage_content_key` an exclusion constraint on a hash index, which Django cannot
    # declare (its ExclusionConstraint takes GiST or SP-GiST only). A hash index keeps a 4-byte hash
    # code per passage where a B-tree kept the whole digest (about 36 bytes a passage against 77),
    # and ingest's ON CONFLICT DO NOTHING and its look-ups by key (= ANY) use it as they did the B-tree.

    def __str__(self) -> str:
        return f"{self.external_id} ({self.text_sha256[:8]})"

    @cached_property
    def text_sha256(self) -> str:
        """SHA-256 of the UTF-8 text, in hex. Worked out from the text, not stored: the content key
        covers it (with the id, corpus, source and uri), so recomputing both from a stored row checks
        the row, and a stored copy cost 33 bytes a passage (ledger migration 0019)."""
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def route_id(self) -> int | None:
        return self.origin.route_id

    @property
    def corpus_snapshot(self) -> str:
        return self.origin.corpus_snapshot

    @property
    def source(self) -> str:
        return self.origin.source

    @property
    def uri(self) -> str:
        return self.origin.uri_prefix + self.external_id if self.stored_uri is None else self.stored_uri


def stored_ranks(ranks: list[int]) -> list[int] | None:
    """`Decision.passage_ranks` as written for passages of these ranks, in rank order: None when they
    are 1, 2, ..., n (and when there are none), else the ranks."""
    return None if all(rank == place for place, rank in enumerate(ranks, start=1)) else ranks


class AnswerForm(models.TextChoices):
    SHORT = "short", "Short (one verdict per answer)"
    LONG = "long", "Long (graded claim by claim)"


class HarmModel(models.TextChoices):
    PROPORTIONAL = "proportional", "Proportional: an answer earns S - c_w (1 - S)"
    ALL_OR_NOTHING = "all_or_nothing", "All or nothing: an answer earns 1 only when S = 1"
    AT_LEAST = "at_least", "At least: an answer is good when S >= s0"


class GateFunctional(models.TextChoices):
    EXPECTED_SUPPORT = "expected_support", "Expected support E[S]"
    P_FULLY_SUPPORTED = "p_fully_supported", "Probability every claim is supported, Pr(S = 1)"
    P_SUPPORT_AT_LEAST = "p_support_at_least", "Probability of support at least s0, Pr(S >= s0)"


# The most claims a decision may carry, and the longest claim text (ingest validation).
MAX_CLAIMS = 64
MAX_CLAIM_CHARS = 2000


class RouteAnswerSettings(models.Model):
    """How a route's answers are judged: one verdict each, or claim by claim, and what harm a partly
    supported answer does. The ledger's own one-to-one table; a route without a row takes the
    defaults (short answers, all-or-nothing harm), which `console.ledger.selectors.answer_settings`
    returns as an unsaved row."""

    route = models.OneToOneField(Route, on_delete=models.CASCADE, primary_key=True, related_name="answer_settings")
    answer_form = models.CharField(
        max_length=8,
        choices=AnswerForm.choices,
        default=AnswerForm.SHORT,
        help_text="short: one verdict per answer; long: each answer is graded claim by claim.",
    )
    harm_model = models.CharField(
        max_length=16,
        choices=HarmModel.choices,
        default=HarmModel.ALL_OR_NOTHING,
        help_text="What a partly supported answer costs; a short answer is correct only when all of it holds.",
    )
    support_threshold = models.FloatField(
        null=True, blank=True, help_text="s0 of the at_least harm model: the share of claims an answer needs."
    )
    expected_claims = models.PositiveIntegerField(
        null=True, blank=True, help_text="K, the claims a complete answer makes (recall); decisions may override it."
    )
    gate_functional = models.CharField(
        max_length=24,
        choices=GateFunctional.choices,
        blank=True,
        help_text="What the gate's score estimates, when a decision does not say; empty: unspecified.",
    )

    class Meta:
        verbose_name = "route answer settings"
        verbose_name_plural = "route answer settings"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(support_threshold__isnull=True)
                | (models.Q(support_threshold__gte=0) & models.Q(support_threshold__lte=1)),
                name="support_threshold_in_0_1",
            ),
            models.CheckConstraint(
                condition=~models.Q(harm_model=HarmModel.AT_LEAST) | models.Q(support_threshold__isnull=False),
                name="at_least_names_its_threshold",
            ),
            models.CheckConstraint(
                condition=models.Q(expected_claims__isnull=True) | models.Q(expected_claims__gte=1),
                name="expected_claims_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"answer settings of route {self.route_id}"

    def clean(self) -> None:
        errors = {}
        if self.support_threshold is not None and not 0 <= self.support_threshold <= 1:
            errors["support_threshold"] = ValidationError("Must be between 0 and 1.", code="out_of_range")
        if self.harm_model == HarmModel.AT_LEAST and self.support_threshold is None:
            errors["support_threshold"] = ValidationError(
                "The at_least harm model needs a support threshold s0.", code="required"
            )
        if self.expected_claims is not None and self.expected_claims < 1:
            errors["expected_claims"] = ValidationError("Must be a positive whole number.", code="out_of_range")
        if errors:
            raise ValidationError(errors)

    @property
    def is_long(self) -> bool:
        return self.answer_form == AnswerForm.LONG


def _cardinality(field: str) -> models.Func:
    return models.Func(models.F(field), function="cardinality", output_field=models.IntegerField())


@dataclass
class RankedPassage:
    """A passage as ranked and scored for one decision: a position of the decision's passage arrays,
    with the passage row. Pages may add what they show beside it (verification's marked segments)."""

    passage: Passage
    rank: int
    retrieval_score: float | None

    @property
    def passage_id(self) -> int:
        return self.passage.pk


class Outcome(models.TextChoices):
    REFUSED = "refused", "Refused"
    SERVED = "served", "Served"
    SERVED_WITH_EVIDENCE = "served_with_evidence", "Served with evidence"


class Decision(models.Model):
    """One gated decision, served or refused, as the answering system logged it.

    The table is partitioned by UTC month of occurred_at (console/ledger/partitions.py): its primary
    key in the database is (id, occurred_at), and the tables that point at a decision either carry
    its occurred_at too (the span-check figures) or check on insert that the decision exists;
    Django's on_delete rules still apply to deletions made through it. Its ranked passages are
    arrays of its own row (`passage_ids`, `passage_ranks`, `retrieval_scores`).
    """

    # No index of its own: every index of the decision below but two leads with the route.
    route = models.ForeignKey(Route, on_delete=models.PROTECT, related_name="decisions", db_index=False)
    request_id = models.CharField(max_length=200, help_text="The integrator's id; unique within the route.")
    occurred_at = models.DateTimeField(help_text="When the answering system made the decision.")
    question = models.TextField()
    claim = models.TextField(help_text="The text the gate scored (draft answer or claim).")
    gate_name = models.CharField(max_length=100)
    gate_score = models.FloatField()
    cutoff = models.FloatField(help_text="The cutoff in force when the decision was made.")
    outcome = models.CharField(max_length=24, choices=Outcome.choices)
    # NULL (not "") means the claim itself was served, or nothing was; the constraints below rely on it.
    distinct_served_answer = models.TextField(  # noqa: DJ001
        null=True,
        blank=True,
        help_text="The served answer when it differs from the claim; NULL when the claim was served or on a refusal.",
    )
    versions = models.JSONField(default=dict, help_text="model, retriever, corpus, gate versions in force.")
    segments = models.JSONField(default=dict, help_text="Query type, language, source, ...")
    ingested_at = models.DateTimeField(auto_now_add=True)
    content_hash = DigestField(help_text="SHA-256 of the decision as sent; replays compare it.")
    claims = models.JSONField(
        null=True,
        blank=True,
        help_text='The answer\'s atomic claims as the answering system sent them: [{"text", "citations"}], '
        f"at most {MAX_CLAIMS} of at most {MAX_CLAIM_CHARS} characters; NULL when none were sent.",
    )
    expected_claims = models.PositiveIntegerField(
        null=True, blank=True, help_text="K, the claims a complete answer makes, as the decision sent it."
    )
    # A database default too: the bench and demo writers COPY decisions without naming the column.
    gate_functional = models.CharField(
        max_length=24,
        choices=GateFunctional.choices,
        blank=True,
        default="",
        db_default="",
        help_text="What the gate's score estimates, as the decision sent it; empty: the route's setting.",
    )
    # The ranked passages, three arrays of one length in rank order (array position = order): a row
    # per passage in a table of their own cost about 676 bytes a decision in heap, primary key and
    # passage index (ledger migration 0024, bench/README.md). Read them through `ranked_passages`;
    # raw SQL through `unnest(passage_ids, passage_ranks, retrieval_scores) WITH ORDINALITY`. The
    # database defaults are empty, for writers that store decisions without passages.
    passage_ids = ArrayField(
        models.BigIntegerField(),
        default=list,
        db_default=models.Value("{}"),
        help_text="The logged passages' ids (ledger_passage), in rank order.",
    )
    # NULL when the ranks are 1, 2, ..., n, as nearly every retriever sends them: the array costs 41
    # bytes a decision of five passages, and `ranking` tells the two spellings apart. Rows stored before
    # ledger migration 0025 keep the array whatever it holds; both read the same.
    passage_ranks = ArrayField(
        models.IntegerField(),
        null=True,
        blank=True,
        default=list,
        db_default=models.Value("{}"),
        help_text="The integrator's rank of each passage (1 is the top; unique, not always 1..n), in rank "
        "order; NULL when they are 1..n.",
    )
    retrieval_scores = ArrayField(
        models.FloatField(null=True),
        default=list,
        db_default=models.Value("{}"),
        help_text="The retriever's score of each passage (NULL when not sent), in rank order.",
    )

    class Meta:
        constraints = [
            # With the month, as a partitioned table's unique keys must be; RequestKey keeps a
            # request_id unique within its route across months. Ingest looks every request id of a
            # batch up here; a hash index on the request id alone instead (60 bytes a decision
            # against 99) made that look-up the largest cost of ingest in PostgreSQL while other
            # batches wrote beside it (bench/README.md, sixth session), so the B-tree stays.
            models.UniqueConstraint(fields=["route", "request_id", "occurred_at"], name="unique_request_per_route"),
            models.CheckConstraint(condition=_FINITE, name="gate_score_finite"),
            # A writer that sends the hex text instead of the bytes (COPY takes it) is refused.
            models.CheckConstraint(condition=Exact(Length("content_hash"), 32), name="content_hash_is_a_digest"),
            # One spelling of each state: a refusal has no answer, and a served claim is NULL, not a
            # second copy of the claim.
            models.CheckConstraint(
                condition=~models.Q(outcome=Outcome.REFUSED) | models.Q(distinct_served_answer__isnull=True),
                name="refusal_has_no_distinct_answer",
            ),
            models.CheckConstraint(
                condition=models.Q(distinct_served_answer__isnull=True)
                | ~models.Q(distinct_served_answer=models.F("claim")),
                name="distinct_answer_is_not_the_claim",
            ),
            # The three passage arrays describe the same passages, position by position (ranks NULL: 1..n).
            models.CheckConstraint(
                condition=(
                    models.Q(passage_ranks__isnull=True)
                    | Exact(_cardinality("passage_ranks"), _cardinality("passage_ids"))
                )
                & Exact(_cardinality("retrieval_scores"), _cardinality("passage_ids")),
                name="passage_arrays_of_one_length",
            ),
        ]
        # Each index below has readers that need it at ten million decisions (bench/README.md,
        # "Passage storage, third pass", lists them); the primary key and unique_request_per_route
        # (lookups by route and request id, replays) come with the constraints.
        indexes = [
            # a route's decisions in a time window: the refusals list of a route in any outcome,
            # monitoring's daily aggregates, the governance cutoff checks, the pool's recent counts
            models.Index(fields=["route", "occurred_at"], name="decision_route_time_idx"),
            # the refusals list of a route, newest first (the default page of a route)
            models.Index(fields=["route", "outcome", "occurred_at"], name="decision_route_outcome_idx"),
            # a route by score: the list sorted by score, score bands, and the decisions of the score
            # bins a cutoff straddles (console.analysis.selectors)
            models.Index(fields=["route", "gate_score"], name="decision_route_score_idx"),
            # the newest refusals of every route, the refusals list of a reader of all routes
            models.Index(fields=["outcome", "occurred_at"], name="decision_outcome_time_idx"),
            # the newest decision of a route, read by the statistics cache's data version; a route's
            # decisions in id order (similarity's embedding chunks)
            models.Index(fields=["route", "id"], name="decision_route_id_idx"),
            # the refusals list of every route sorted by score (keyset pages)
            models.Index(fields=["outcome", "gate_score", "id"], name="decision_outcome_score_idx"),
            # and decision_text_search_idx, a GIN expression index for text search (migrations 0004, 0015)
            # the model and segment filters (JSON containment) of the list and the rechecks; a short
            # pending list (GIN_PENDING_LIST_KB, migration 0015) keeps each month's index file small
            GinIndex(
                fields=["versions"],
                opclasses=["jsonb_path_ops"],
                name="decision_versions_gin",
                gin_pending_list_limit=GIN_PENDING_LIST_KB,
            ),
            GinIndex(
                fields=["segments"],
                opclasses=["jsonb_path_ops"],
                name="decision_segments_gin",
                gin_pending_list_limit=GIN_PENDING_LIST_KB,
            ),
            # No index on passage_ids: a GIN index cost about 230 bytes a decision for "which decisions
            # logged this passage", which only an archive asks (once per month, by one scan); the
            # verify API's access check on a passage id reads the passage's own route.
        ]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.request_id}"

    @property
    def refused(self) -> bool:
        return self.outcome == Outcome.REFUSED

    @property
    def ranking(self) -> list[tuple[int, int, float | None]]:
        """(passage id, rank, retrieval score) of each logged passage, in rank order; no query."""
        ranks = self.passage_ranks if self.passage_ranks is not None else range(1, len(self.passage_ids) + 1)
        return list(zip(self.passage_ids, ranks, self.retrieval_scores, strict=True))

    def ranked(self, passages: Mapping[int, Passage]) -> list[RankedPassage]:
        """The ranking with each passage taken from `passages` (by id), which must hold them all."""
        return [RankedPassage(passages[pk], rank, score) for pk, rank, score in self.ranking]

    @cached_property
    def ranked_passages(self) -> list[RankedPassage]:
        """The logged passages in rank order, read in one query; for many decisions at once,
        `console.ledger.selectors.ranked_passages_load` reads them all in one query instead."""
        return self.ranked(Passage.objects.in_bulk(self.passage_ids))

    @property
    def served_answer(self) -> str | None:
        """The answer the user was served: the claim unless a distinct answer is stored; None when
        refused. Queries read it as the `SERVED_ANSWER` expression."""
        if self.refused:
            return None
        return self.claim if self.distinct_served_answer is None else self.distinct_served_answer


def served_answer_of(path: str = "") -> Coalesce:
    """A decision's served answer in a query, as `Decision.served_answer` gives it on an instance;
    `path` reaches the decision from the query's model (``"decision__"`` from a pool item)."""
    return Coalesce(
        f"{path}distinct_served_answer",
        models.Case(
            models.When(~models.Q(**{f"{path}outcome": Outcome.REFUSED}), then=f"{path}claim"),
            output_field=models.TextField(),
        ),
    )


# `.annotate(served_answer=SERVED_ANSWER)` on values() and values_list() of decisions (a model
# instance cannot take the name: it is the property). `SERVED_ANSWER_SQL` is the same for raw SQL
# over ledger_decision.
SERVED_ANSWER = served_answer_of()
SERVED_ANSWER_SQL = "coalesce(distinct_served_answer, CASE WHEN outcome <> 'refused' THEN claim END)"
# A decision's ranks in raw SQL over ledger_decision, spelt out where the row leaves them NULL (1..n),
# as `Decision.ranking` gives them.
PASSAGE_RANKS_SQL = "coalesce(passage_ranks, ARRAY(SELECT generate_series(1, cardinality(passage_ids))))"


class RequestKey(models.Model):
    """A request_id taken within its route. The decisions' own unique key includes the month (a
    partitioned table's must), so this narrow table is what makes a second decision with the same
    request_id in another month fail as it did before: ingest writes each decision's key first, and
    a concurrent batch with the same key waits on it, then fails and compares. The key is the primary
    key: a surrogate id would cost a column and an index that no read uses (ledger migration 0016)."""

    pk = models.CompositePrimaryKey("route", "request_id")
    route = models.ForeignKey(Route, on_delete=models.PROTECT, related_name="+", db_index=False)
    request_id = models.CharField(max_length=200)

    def __str__(self) -> str:
        return f"{self.route_id}/{self.request_id}"


class RouteDayCount(models.Model):
    """Decisions per route, UTC day and outcome, kept by database triggers on the decision table
    (every insert, update and delete, whoever makes it), so that totals and daily bars never
    count a million rows. Read-only for the application."""

    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="day_counts")
    day = models.DateField(help_text="UTC date of occurred_at.")
    outcome = models.CharField(max_length=24, choices=Outcome.choices)
    decisions = models.BigIntegerField(help_text="Decisions of the route that day with this outcome.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "day", "outcome"], name="unique_route_day_outcome"),
        ]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.day}/{self.outcome}: {self.decisions}"


class RouteCutoffCount(models.Model):
    """Decisions per route, UTC hour and logged cutoff, kept by the same triggers as RouteDayCount,
    so that "how many decisions did not follow the signed cutoff" reads these rows and the hours a
    signature falls in, not every decision (console.governance.selectors). Read-only for the
    application."""

    # No index of its own: the unique constraint's index leads with the route.
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="cutoff_counts", db_index=False)
    hour = models.DateTimeField(help_text="Start of the UTC hour of occurred_at.")
    cutoff = models.FloatField(help_text="The cutoff the decisions logged.")
    decisions = models.BigIntegerField(help_text="Decisions of the route that hour with this cutoff.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "hour", "cutoff"], name="unique_route_hour_cutoff"),
        ]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.hour:%Y-%m-%d %H}h/{self.cutoff}: {self.decisions}"


class DecisionProfile(models.Model):
    """One distinct pair of versions and segments seen on a route's decisions, stored once for
    the score counts. Kept by the same triggers as RouteDayCount; read-only for the application."""

    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="profiles", db_index=False)
    # A hash, not the JSON itself, is the key: segments can outgrow what a b-tree entry may hold.
    key = models.BinaryField(help_text="SHA-256 of the versions' and the segments' JSON text.")
    versions = models.JSONField(help_text="versions, exactly as stored on the decisions.")
    segments = models.JSONField(help_text="segments, exactly as stored on the decisions.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["route", "key"], name="unique_route_profile")]

    def __str__(self) -> str:
        return f"{self.route_id}: {self.versions} {self.segments}"


class _ScoreBin(models.Model):
    """A bin of gate scores of width 0.001 and the decisions counted in it.

    ``score_low``/``score_high`` bound the scores counted in the bin: a cutoff between them needs
    that bin's rows (a bin never straddles a cutoff otherwise, whatever the float rounding of
    ``score * 1000``). Deletions lower the count but leave the bounds, which stay valid bounds."""

    score_bin = models.BigIntegerField(help_text="floor(gate_score * 1000), the score clamped to +-1e15 first.")
    decisions = models.BigIntegerField(help_text="Decisions counted in the bin.")
    score_low = models.FloatField(help_text="No counted score of the bin is lower.")
    score_high = models.FloatField(help_text="No counted score of the bin is higher.")

    class Meta:
        abstract = True


class RouteScoreCount(_ScoreBin):
    """Decisions per route, UTC day, profile (versions and segments) and score bin, kept by the same
    triggers as RouteDayCount, so that served counts at any cutoff over a filtered window read
    bins instead of decisions (console.analysis.selectors). Read-only for the application."""

    # No index of its own: the unique constraint's index leads with the route.
    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="score_counts", db_index=False)
    day = models.DateField(help_text="UTC date of occurred_at.")
    profile = models.ForeignKey(DecisionProfile, on_delete=models.CASCADE, related_name="+", db_index=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "day", "profile", "score_bin"], name="unique_route_day_score_bin"),
        ]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.day}/{self.profile_id}/{self.score_bin}: {self.decisions}"


class RouteScoreTotal(_ScoreBin):
    """Decisions per route and score bin over all time: the unfiltered window's served counts
    (about a thousand rows a route). Kept by the same triggers; read-only for the application."""

    route = models.ForeignKey(Route, on_delete=models.CASCADE, related_name="score_totals", db_index=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["route", "score_bin"], name="unique_route_score_bin")]

    def __str__(self) -> str:
        return f"{self.route_id}/{self.score_bin}: {self.decisions}"
