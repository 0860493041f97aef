"""Question vectors, the built-in embedder's versions and the corpus-gap clusters.

How vectors are stored and searched (docs/architecture.md, "Similarity"): one table holds every
question vector, sent by the integrator or made by the built-in embedder, in a `halfvec` column
without a fixed dimension (unit length, half precision: half the bytes of `vector`, and cosines
within about 1e-3 of float32's). It is partitioned by LIST on `space`, one partition per *space* (a
route's sent vectors, `r<route id>`, or one built-in embedder version, `v<version id>`), made when
the space is (migration 0006). pgvector's HNSW index needs a fixed dimension, so each space's
partition gets its own partial expression index,
`USING hnsw ((vector::halfvec(D)) halfvec_cosine_ops) WHERE refused`, or for a built-in version
fitted since migration 0014 the leading P components, `((subvector(vector, 1, P))::halfvec(P))`;
queries name the space (the planner then reads its partition alone) and repeat that expression so
the planner uses the index.
A retired embedder version's vectors go by dropping its partition: a refit leaves no dead rows.
"""

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Value
from django.db.models.functions import Cast, Concat
from pgvector.django import HalfVectorField


def sent_space(route_id: int) -> str:
    """The partition key of a route's sent vectors."""
    return f"r{int(route_id)}"


def builtin_space(embedder_id: int) -> str:
    """The partition key of one built-in embedder version's vectors."""
    return f"v{int(embedder_id)}"


class Source(models.TextChoices):
    SENT = "sent", "Sent by the integrator"
    BUILTIN = "builtin", "Built-in embedder (LSA)"


class RouteEmbedding(models.Model):
    """Where a route's question vectors come from, and their dimension (fixed by the first one)."""

    route = models.OneToOneField(
        "accounts.Route", on_delete=models.CASCADE, primary_key=True, related_name="embedding_space"
    )
    source = models.CharField(max_length=8, choices=Source.choices)
    dimension = models.PositiveIntegerField(help_text="Every vector of the route has this many numbers.")
    index_ready = models.BooleanField(default=False, help_text="The HNSW index of sent vectors exists.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.route_id}: {self.source} x {self.dimension}"

    @property
    def index_name(self) -> str:
        return f"similarity_sent_r{self.route_id}_hnsw"

    @property
    def space_key(self) -> str:
        return sent_space(self.route_id)


class EmbedderState(models.TextChoices):
    BUILDING = "building", "Re-embedding"
    CURRENT = "current", "Current"
    RETIRED = "retired", "Retired"


class EmbedderVersion(models.Model):
    """One fit of the built-in embedder on one route's questions.

    A new version embeds every question of the route while the previous one keeps answering;
    it becomes current once all of them have a vector and its index exists. Its fitted model is an
    `EmbedderModel`, in storage of its own that goes when the version retires.
    """

    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="embedder_versions")
    number = models.PositiveIntegerField(help_text="1, 2, ... per route.")
    state = models.CharField(max_length=8, choices=EmbedderState.choices, default=EmbedderState.BUILDING)
    dimension = models.PositiveIntegerField()
    components = models.PositiveIntegerField(help_text="SVD components actually fitted (the rest are zero).")
    fitted_on = models.PositiveIntegerField(help_text="Questions the model was fitted on.")
    route_questions = models.PositiveIntegerField(help_text="Questions the route held when fitting started.")
    fitted_at = models.DateTimeField(auto_now_add=True)
    current_since = models.DateTimeField(null=True, blank=True)
    reembeds_until = models.BigIntegerField(
        default=0,
        help_text="The route's newest decision when the version was made: its refit embeds the decisions up "
        "to this one, the after-ingest jobs those after it.",
    )
    graph_dimension = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The leading components its refusals' HNSW graph holds (lookups re-rank by the whole "
        "vector); empty: the whole vector, as every version built before graphs held fewer.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "number"], name="unique_embedder_number"),
            models.UniqueConstraint(
                fields=["route"], condition=models.Q(state="current"), name="one_current_embedder_per_route"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.route_id} v{self.number} ({self.state})"

    @property
    def index_name(self) -> str:
        return f"similarity_builtin_v{self.pk}_hnsw"

    @property
    def space_key(self) -> str:
        return builtin_space(self.pk)


class EmbedderModel(models.Model):
    """The fitted TF-IDF + SVD pipeline of one embedder version, joblib-serialised (about ten MB).

    The table is partitioned by LIST on the version, one partition per live version, made with
    its vector partition and dropped with it when the version retires (migration 0007): a model
    deleted or emptied in place left its megabytes dead in the table's TOAST, behind the next
    version's model, so the table held a retired model's bytes besides the current one's.
    """

    version = models.OneToOneField(
        EmbedderVersion, on_delete=models.CASCADE, primary_key=True, related_name="fitted_model"
    )
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"model of embedder version {self.version_id}"


class QuestionVector(models.Model):
    """The vector of one decision's question in one space. `refused` and `occurred_at` copy the
    decision's (never edited) so that the partial index and the 30-day count need no join.

    The table is partitioned by `space` (see above), and PostgreSQL wants the partition key in
    every unique key, so the two rules, one vector per decision per embedder version and one sent
    vector per decision, are the one primary key (decision, space); there is no surrogate id, whose
    column and index no read used (similarity migration 0010). `vector_space_key` makes `space`
    follow from the route and the embedder, so that key says the same as those two rules (a
    decision's sent vectors can only be in its route's space).
    """

    pk = models.CompositePrimaryKey("decision", "space")
    # No index of their own: the primary key leads with the decision, and a space's rows are its
    # partition.
    decision = models.ForeignKey(
        "ledger.Decision",
        on_delete=models.CASCADE,
        related_name="question_vectors",
        db_index=False,
        db_constraint=False,  # checked on insert by a trigger: decisions are partitioned (console/ledger/partitions.py)
    )
    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="+", db_index=False)
    embedder = models.ForeignKey(
        EmbedderVersion,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="vectors",
        help_text="Empty: the integrator's own vector.",
    )
    refused = models.BooleanField()
    occurred_at = models.DateTimeField()
    vector = HalfVectorField(
        help_text="Scaled to length 1 and kept in half precision (cosine is all that is asked of it)."
    )
    space = models.CharField(
        max_length=24,
        help_text="The partition: r<route id> for sent vectors, v<embedder version id> for built-in ones.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    embedder__isnull=True,
                    space=Concat(Value("r"), Cast("route_id", models.TextField()), output_field=models.TextField()),
                )
                | models.Q(
                    embedder__isnull=False,
                    space=Concat(Value("v"), Cast("embedder_id", models.TextField()), output_field=models.TextField()),
                ),
                name="vector_space_key",
            ),
        ]

    def __str__(self) -> str:
        return f"vector of decision {self.decision_id}"


class GapRun(models.Model):
    """One clustering of a route's refused questions over a window."""

    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="gap_runs")
    computed_at = models.DateTimeField(auto_now_add=True)
    window_from = models.DateTimeField()
    window_to = models.DateTimeField()
    source = models.CharField(max_length=8, choices=Source.choices)
    embedder = models.ForeignKey(EmbedderVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    refusals = models.PositiveIntegerField(help_text="Refusals with a vector in the window.")
    sampled = models.PositiveIntegerField(help_text="Refusals clustered directly; the rest joined the nearest centre.")
    unclustered = models.PositiveIntegerField(help_text="Refusals in no cluster (noise).")
    params = models.JSONField(default=dict, help_text="Algorithm and settings used.")
    seconds = models.FloatField(default=0)

    class Meta:
        ordering = ["-computed_at"]
        get_latest_by = "computed_at"

    def __str__(self) -> str:
        return f"gaps of {self.route_id} at {self.computed_at:%Y-%m-%d %H:%M}"


class GapCluster(models.Model):
    """A group of similar refused questions; ranked by size x share with no supporting passage."""

    run = models.ForeignKey(GapRun, on_delete=models.CASCADE, related_name="clusters")
    rank = models.PositiveIntegerField(help_text="1 is the largest size x no-support share.")
    size = models.PositiveIntegerField()
    size_this_week = models.PositiveIntegerField(help_text="Members in the last 7 days of the window.")
    size_last_week = models.PositiveIntegerField(help_text="Members in the 7 days before those.")
    no_support_share = models.FloatField(help_text="Share of members verified with no supporting passage.")
    verified = models.PositiveIntegerField(help_text="Members whose span verification is done.")
    score = models.FloatField(help_text="size x no_support_share, the ranking key.")
    examples = models.JSONField(default=list, help_text="[{id, question}] nearest the centre.")
    terms = models.JSONField(default=list, help_text="Top terms by class-based TF-IDF.")
    decision_ids = ArrayField(models.BigIntegerField(), help_text="Every member, for the cluster's refusals list.")

    class Meta:
        ordering = ["run", "rank"]
        constraints = [models.UniqueConstraint(fields=["run", "rank"], name="unique_cluster_rank")]

    def __str__(self) -> str:
        return f"cluster {self.rank} of run {self.run_id}"
