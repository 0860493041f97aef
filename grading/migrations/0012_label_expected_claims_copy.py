"""Final labels carry a copy of their decision's target claim count K (``expected_claims``), set by
the trigger that already copies its route, score and time, and followed when a decision is edited:
a long route's graded sample is then read from the labels alone, where it joined every labelled
decision across the month partitions for that one column (issue 31's statistics benchmark: most of
a cold request's time)."""

from django.db import migrations, models

COPY_FUNCTION = """
CREATE OR REPLACE FUNCTION grading_finallabel_copy_decision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT route_id, gate_score, occurred_at, expected_claims
      INTO NEW.decision_route_id, NEW.decision_score, NEW.decision_occurred_at, NEW.decision_expected_claims
      FROM ledger_decision WHERE id = NEW.decision_id;
    NEW.item_stratum := NULL;
    NEW.item_inclusion_probability := NULL;
    IF NEW.item_id IS NOT NULL THEN
        SELECT stratum, inclusion_probability INTO NEW.item_stratum, NEW.item_inclusion_probability
        FROM grading_gradingitem WHERE id = NEW.item_id;
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE FUNCTION grading_finallabel_follow_decision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grading_finallabel AS label
       SET decision_route_id = d.route_id, decision_score = d.gate_score, decision_occurred_at = d.occurred_at,
           decision_expected_claims = d.expected_claims
      FROM new_rows d
     WHERE label.decision_id = d.id
       AND (label.decision_route_id, label.decision_score, label.decision_occurred_at, label.decision_expected_claims)
           IS DISTINCT FROM (d.route_id, d.gate_score, d.occurred_at, d.expected_claims);
    RETURN NULL;
END
$$;
UPDATE grading_finallabel AS label
   SET decision_expected_claims = d.expected_claims
  FROM ledger_decision d
 WHERE d.id = label.decision_id AND d.expected_claims IS NOT NULL;
"""

# Migration 0005's functions, as they stood before this one.
PREVIOUS_FUNCTIONS = """
CREATE OR REPLACE FUNCTION grading_finallabel_copy_decision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT route_id, gate_score, occurred_at INTO NEW.decision_route_id, NEW.decision_score, NEW.decision_occurred_at
    FROM ledger_decision WHERE id = NEW.decision_id;
    NEW.item_stratum := NULL;
    NEW.item_inclusion_probability := NULL;
    IF NEW.item_id IS NOT NULL THEN
        SELECT stratum, inclusion_probability INTO NEW.item_stratum, NEW.item_inclusion_probability
        FROM grading_gradingitem WHERE id = NEW.item_id;
    END IF;
    RETURN NEW;
END
$$;
CREATE OR REPLACE FUNCTION grading_finallabel_follow_decision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE grading_finallabel AS label
       SET decision_route_id = d.route_id, decision_score = d.gate_score, decision_occurred_at = d.occurred_at
      FROM new_rows d
     WHERE label.decision_id = d.id
       AND (label.decision_route_id, label.decision_score, label.decision_occurred_at)
           IS DISTINCT FROM (d.route_id, d.gate_score, d.occurred_at);
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0011_claim_labels"),
        ("ledger", "0021_long_answers"),
    ]

    operations = [
        migrations.AddField(
            model_name="finallabel",
            name="decision_expected_claims",
            field=models.PositiveIntegerField(
                blank=True, editable=False, help_text="The decision's expected_claims (K).", null=True
            ),
        ),
        # The function goes back first, then the column: a label written in between would otherwise
        # name a column no longer there.
        migrations.RunSQL(COPY_FUNCTION, PREVIOUS_FUNCTIONS),
    ]
