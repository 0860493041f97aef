"""Pool items read their question and answer from their decision instead of keeping a copy.

An item made from a decision held the decision's question and its served answer or logged claim
again, about 280 bytes a decision. The columns become `own_question` / `own_answer`, which keep only
text the decision does not hold (a shadow run's answer, a gold item's) and are "" otherwise; the
ORM (`GradingItem.objects.with_texts()`) and the queue's claim read the decision's text for "".
Renamed rather than replaced, so the reverse puts the texts back into the same columns. The
decision's foreign key and its index are left as they are.
"""

from django.db import migrations, models

# A served decision's answer is its distinct served answer, or its claim when that is what it served
# (ledger migration 0017). Texts equal to the decision's become "". An item whose text was "" while its decision's is not
# cannot be told apart afterwards and would read the decision's; the pool never wrote one.
FORGET_COPIES = """
UPDATE grading_gradingitem i
   SET own_question = CASE WHEN i.own_question = d.question THEN '' ELSE i.own_question END,
       own_answer = CASE WHEN i.own_answer = CASE i.answer_source WHEN 'served' THEN coalesce(d.distinct_served_answer, d.claim)
                                                                  WHEN 'claim' THEN d.claim END
                         THEN '' ELSE i.own_answer END
  FROM ledger_decision d
 WHERE d.id = i.decision_id
   AND (i.own_question = d.question
        OR i.own_answer = CASE i.answer_source WHEN 'served' THEN coalesce(d.distinct_served_answer, d.claim)
                                               WHEN 'claim' THEN d.claim END)
"""

PUT_COPIES_BACK = """
UPDATE grading_gradingitem i
   SET own_question = CASE WHEN i.own_question = '' THEN d.question ELSE i.own_question END,
       own_answer = CASE WHEN i.own_answer <> '' THEN i.own_answer
                         ELSE coalesce(CASE i.answer_source WHEN 'served' THEN coalesce(d.distinct_served_answer, d.claim)
                                                            WHEN 'claim' THEN d.claim END, '') END
  FROM ledger_decision d
 WHERE d.id = i.decision_id AND (i.own_question = '' OR i.own_answer = '')
"""


class Migration(migrations.Migration):
    dependencies = [
        ("grading", "0007_label_samples"),
        ("ledger", "0018_decision_content_hash_bytea"),
    ]

    operations = [
        migrations.RenameField(model_name="gradingitem", old_name="question", new_name="own_question"),
        migrations.RenameField(model_name="gradingitem", old_name="answer", new_name="own_answer"),
        migrations.AlterField(
            model_name="gradingitem",
            name="own_question",
            field=models.TextField(
                blank=True,
                db_default="",
                default="",
                help_text="The question graders read when it is not the decision's (a gold item without one); "
                "empty means the decision's.",
            ),
        ),
        migrations.AlterField(
            model_name="gradingitem",
            name="own_answer",
            field=models.TextField(
                blank=True,
                db_default="",
                default="",
                help_text="The answer graders judge when the decision does not hold it (a shadow run's, a gold "
                "item's); empty means the decision's served answer or claim, by the answer source.",
            ),
        ),
        migrations.RunSQL(FORGET_COPIES, PUT_COPIES_BACK),
    ]
