"""Final labels carry a copy of their pool item's stratum and inclusion probability, set by the
trigger that already copies their decision's route, score and time: the graded sample is then read
from the labels alone, where it joined every item of the pool (a hash of the whole pool table per
statistics request, and the pool holds an item for every decision)."""

from django.db import migrations, models

COPY_FUNCTION = """
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
UPDATE grading_finallabel AS label
   SET item_stratum = item.stratum, item_inclusion_probability = item.inclusion_probability
  FROM grading_gradingitem item WHERE item.id = label.item_id;
"""

DECISION_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION grading_finallabel_copy_decision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT route_id, gate_score, occurred_at INTO NEW.decision_route_id, NEW.decision_score, NEW.decision_occurred_at
    FROM ledger_decision WHERE id = NEW.decision_id;
    RETURN NEW;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0004_decision_reference_checked"),
    ]

    operations = [
        migrations.AddField(
            model_name="finallabel",
            name="item_inclusion_probability",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="finallabel",
            name="item_stratum",
            field=models.CharField(blank=True, editable=False, max_length=64, null=True),
        ),
        migrations.RunSQL(COPY_FUNCTION, DECISION_ONLY_FUNCTION),
    ]
