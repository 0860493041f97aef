"""A trained passage dictionary may hold up to 256 KiB (32 KiB before): on 500-character passages it
stores each in about 11 fewer bytes, in the same time (bench/README.md). Dictionaries are never
changed or deleted, so once one larger than 32 KiB is stored this cannot go backwards: the old
check refuses it.
"""

import django.db.models.functions.text
import django.db.models.lookups
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0025_ranks_left_out_when_in_order"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="passagedictionary",
            name="passage_dictionary_max_bytes",
        ),
        migrations.AddConstraint(
            model_name="passagedictionary",
            constraint=models.CheckConstraint(
                condition=django.db.models.lookups.LessThanOrEqual(
                    django.db.models.functions.text.Length("data"), 262144
                ),
                name="passage_dictionary_max_bytes",
            ),
        ),
    ]
