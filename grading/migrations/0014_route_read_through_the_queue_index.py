"""The pool items' own index on the route goes: grading_queue_idx and grading_gold_idx lead with it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0009_user_sessions"),
        ("grading", "0013_item_decision_time"),
    ]

    operations = [
        migrations.AlterField(
            model_name="gradingitem",
            name="route",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="grading_items",
                to="accounts.route",
            ),
        ),
    ]
