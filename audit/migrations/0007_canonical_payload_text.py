"""Audit events get their payload's canonical text and a hash-scheme version (audit/chain.py).

Existing events keep scheme 1 and verify as they always did; adding the columns touches no row
(a constant default is catalog-only in PostgreSQL), so the append-only trigger is not involved.
The one-off default 1 is not kept: every new event names its scheme.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0006_payload_gin_pending_list"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="hash_scheme",
            field=models.PositiveSmallIntegerField(
                default=1,
                help_text="How `hash` was computed (audit/chain.py): 1 Python's json of the payload as read back, "
                "2 RFC 8785 over the stored payload text.",
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditevent",
            name="payload_text",
            field=models.TextField(
                blank=True,
                null=True,
                help_text="The payload's RFC 8785 canonical text, which scheme 2 hashes; `payload` is this text read "
                "as jsonb. Empty for scheme 1 events.",
            ),
        ),
        migrations.AddConstraint(
            model_name="auditevent",
            constraint=models.CheckConstraint(
                condition=models.Q(hash_scheme=1) | models.Q(hash_scheme=2, payload_text__isnull=False),
                name="audit_scheme_has_its_payload_text",
            ),
        ),
    ]
