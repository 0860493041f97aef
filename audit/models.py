from django.contrib.postgres.indexes import GinIndex
from django.db import models


class Action(models.TextChoices):
    """What happened, in the past tense. New actions are added here and nowhere else: the column
    has no database choices, `audit_record_many` refuses any other value, so no migration is needed."""

    ROUTE_CREATED = "route_created", "Route created"
    ROUTE_UPDATED = "route_updated", "Route updated"
    DECISIONS_INGESTED = "decisions_ingested", "Decisions ingested"
    TOKEN_ISSUED = "token_issued", "Token issued"
    ROLE_GRANTED = "role_granted", "Role granted"
    ROLE_REVOKED = "role_revoked", "Role revoked"
    USER_CREATED = "user_created", "User created"
    IDENTITY_LINKED = "identity_linked", "Account linked to the identity provider"
    USER_DEACTIVATED = "user_deactivated", "User deactivated"
    DEMO_LOADED = "demo_loaded", "Demo loaded"
    SHADOW_PIPELINE_SET = "shadow_pipeline_set", "Shadow pipeline set"
    DECISIONS_VERIFIED = "decisions_verified", "Claim spans verified"
    SHADOW_RUNS_QUEUED = "shadow_runs_queued", "Shadow runs queued"
    SHADOW_RUNS_REQUEUED = "shadow_runs_requeued", "Shadow runs queued again"
    SHADOW_RUN_STARTED = "shadow_run_started", "Shadow run started"
    SHADOW_RUN_SUCCEEDED = "shadow_run_succeeded", "Shadow run succeeded"
    SHADOW_RUN_FAILED = "shadow_run_failed", "Shadow run failed"
    SHADOW_RUN_RETRIED = "shadow_run_retried", "Shadow run retry requested"
    POOL_ENTERED = "pool_entered", "Entered the grading pool"
    GRADING_PLAN_SET = "grading_plan_set", "Grading plan set"
    GOLD_ITEM_CREATED = "gold_item_created", "Gold item created"
    GRADING_PLAN_RETIRED = "grading_plan_retired", "Grading plan retired"
    GOLD_ITEM_REMOVED = "gold_item_removed", "Gold item removed"
    ITEM_SKIPPED = "item_skipped", "Item skipped by a grader"
    GRADE_SUBMITTED = "grade_submitted", "Grade submitted"
    GRADE_WITHDRAWN = "grade_withdrawn", "Grade withdrawn by its grader"
    LABEL_DECIDED = "label_decided", "Final label decided"
    ADJUDICATION_REQUESTED = "adjudication_requested", "Sent to adjudication"
    LABEL_ADJUDICATED = "label_adjudicated", "Label adjudicated"
    LABELS_IMPORTED = "labels_imported", "Labels imported"
    POLICY_DRAFTED = "policy_drafted", "Policy version drafted"
    POLICY_EVIDENCE_REFRESHED = "policy_evidence_refreshed", "Policy draft's evidence recomputed on new data"
    POLICY_SIGNED = "policy_signed", "Policy version signed"
    POLICY_SUPERSEDED = "policy_superseded", "Policy version superseded"
    POLICY_WITHDRAWN = "policy_withdrawn", "Policy version withdrawn"
    DISPUTE_OPENED = "dispute_opened", "Dispute opened"
    DISPUTE_ASSIGNED = "dispute_assigned", "Dispute taken"
    DISPUTE_RESOLVED = "dispute_resolved", "Dispute resolved"
    DISPUTE_ESCALATED = "dispute_escalated", "Dispute escalated"
    DISPUTE_APPEALED = "dispute_appealed", "Appeal received"
    APPEAL_SECRET_ROTATED = "appeal_secret_rotated", "Appeal secret rotated"
    APPEAL_LINK_REVOKED = "appeal_link_revoked", "Appeal link of one refusal revoked"
    NOTIFY_PREFERENCE_CHANGED = "notify_preference_changed", "Email digest setting changed"
    POLICY_NEEDS_RECHECK = "policy_needs_recheck", "Policy in force marked as awaiting a recheck"
    POLICY_RECHECK_CLEARED = "policy_recheck_cleared", "Policy in force no longer awaiting a recheck"
    POLICY_ROLLED_BACK = "policy_rolled_back", "Older policy version signed in place of a newer one (roll-back)"
    RECHECK_OPENED = "recheck_opened", "Release recheck opened"
    RECHECK_CLOSED = "recheck_closed", "Release recheck closed"
    RECHECK_PLAN_ADJUSTED = "recheck_plan_adjusted", "Release recheck sample resized"
    ALARM_OPENED = "alarm_opened", "Drift alarm opened"
    ALARM_ACKNOWLEDGED = "alarm_acknowledged", "Drift alarm acknowledged"
    ALARM_CLOSED = "alarm_closed", "Drift alarm closed"
    EVIDENCE_REFRESH_REQUESTED = "evidence_refresh_requested", "Graded sample refresh requested"
    ROUTE_MONITORING_CHANGED = "route_monitoring_changed", "Route's monitoring settings changed"
    ROUTE_ANSWER_SETTINGS_CHANGED = "route_answer_settings_changed", "Route's answer settings changed"

    TOKEN_REVOKED = "token_revoked", "Token revoked"
    TOKEN_RATE_CHANGED = "token_rate_changed", "Token rate limit changed"
    CANDIDATE_REGISTERED = "candidate_registered", "Candidate gate registered"
    TRIAL_STARTED = "trial_started", "Gate trial started"
    TRIAL_CALLS_LOST = "trial_calls_lost", "Gate trial calls lost with their worker"
    TRIAL_FINISHED = "trial_finished", "Gate trial finished"

    QUESTION_VECTORS_FIXED = "question_vectors_fixed", "Question vector source and dimension fixed"
    EMBEDDER_FITTED = "embedder_fitted", "Built-in embedder fitted"
    EMBEDDER_PROMOTED = "embedder_promoted", "Built-in embedder made current"
    GAPS_COMPUTED = "gaps_computed", "Corpus gaps computed"

    MONTH_ARCHIVED = "month_archived", "Month of decisions archived"
    PASSAGE_DICTIONARY_CREATED = "passage_dictionary_created", "Passage compression dictionary created"
    CONSOLE_RESTORED = "console_restored", "Console restored from a backup"


# Actions the console takes by itself as a consequence of another act, with that act.
CONSEQUENCES = {Action.LABEL_DECIDED: "grade", Action.ADJUDICATION_REQUESTED: "grade"}


class AuditEvent(models.Model):
    """One link of the append-only, hash-chained audit trail.

    The database refuses UPDATE, DELETE and TRUNCATE on this table (see migration 0002). `hash`
    is SHA-256 over `prev_hash` and the canonical serialisation of the other fields (the scheme
    `hash_scheme` names), so a row altered behind the trigger's back breaks the chain at that row.
    """

    seq = models.BigIntegerField(primary_key=True, help_text="Position in the chain, from 1.")
    at = models.DateTimeField(help_text="When the change was committed (UTC).")
    actor = models.CharField(max_length=200, help_text="Who acted: user:<name>, token:<prefix>/<name> or system:<job>.")
    action = models.CharField(max_length=40, help_text="An `Action` value, checked when the event is written.")
    object_type = models.CharField(max_length=40)
    object_id = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, help_text="What changed; {old, new} where it applies.")
    # NULL rather than "" for scheme 1: no text at all, and "" is not JSON (a cast of it fails).
    payload_text = models.TextField(  # noqa: DJ001
        null=True,
        blank=True,
        help_text="The payload's RFC 8785 canonical text, which scheme 2 hashes; `payload` is this text read "
        "as jsonb. Empty for scheme 1 events.",
    )
    hash_scheme = models.PositiveSmallIntegerField(
        help_text="How `hash` was computed (audit/chain.py): 1 Python's json of the payload as read back, "
        "2 RFC 8785 over the stored payload text."
    )
    route = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="Slug of the route the event belongs to; empty for global events (users, tokens, the demo).",
    )
    prev_hash = models.CharField(max_length=64, help_text="Hash of the previous event (zeros for the first).")
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(hash_scheme=1) | models.Q(hash_scheme=2, payload_text__isnull=False),
                name="audit_scheme_has_its_payload_text",
            )
        ]
        indexes = [
            models.Index(fields=["object_type", "object_id", "seq"], name="audit_object_idx"),
            models.Index(fields=["route", "seq"], name="audit_route_idx"),
            # A short pending list, as console.ledger.models.GIN_PENDING_LIST_KB explains (not imported:
            # the audit trail sits below the ledger).
            GinIndex(
                fields=["payload"], opclasses=["jsonb_path_ops"], name="audit_payload_gin", gin_pending_list_limit=256
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} {self.object_type}:{self.object_id} by {self.actor}"

    @property
    def actor_display(self) -> str:
        """Who acted, as a reader should understand it. The console decides some things by itself
        right after someone's act (a final label once the grades agree): the stored actor is the
        person whose act set it off, so say that rather than name them as the decider."""
        cause = CONSEQUENCES.get(self.action)
        return f"the console, after {self.actor}'s {cause}" if cause else self.actor

    @property
    def action_label(self) -> str:
        try:
            return Action(self.action).label
        except ValueError:  # an action written by a newer version of the console
            return self.action


class ChainBreak(models.Model):
    """A break in the audit chain found by the checkpoint job, kept beside the chain, not in it.

    Appending an event about the break to the chain would change the very seqs a truncation is
    measured by, so each run would find a new break; the row is what makes the break loud (the
    health API reads it) and what keeps it from being announced again on every run."""

    key = models.CharField(
        max_length=80,
        help_text="What identifies this break across runs: the checkpoint it contradicts, else its first bad seq.",
    )
    first_bad_seq = models.BigIntegerField(null=True, blank=True, help_text="The first event that fails, if one.")
    reason = models.TextField(help_text="Why, as audit_verify names it.")
    details = models.JSONField(default=dict, help_text="The verification's full answer when the break was found.")
    detected_at = models.DateTimeField(help_text="When the checkpoint job first found it.")
    resolved_at = models.DateTimeField(
        null=True, blank=True, help_text="When the chain verified again, or another break took its place."
    )
    admins_notified = models.PositiveIntegerField(default=0, help_text="Admins an email was recorded for.")

    class Meta:
        ordering = ["-detected_at"]
        constraints = [
            # One open break at a time: the job resolves the old one before recording a new one.
            models.UniqueConstraint(
                fields=["resolved_at"],
                condition=models.Q(resolved_at__isnull=True),
                nulls_distinct=False,
                name="audit_one_open_chain_break",
            )
        ]

    def __str__(self) -> str:
        return f"audit chain break at seq {self.first_bad_seq}: {self.reason}"
