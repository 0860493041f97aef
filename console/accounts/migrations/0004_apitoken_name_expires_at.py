from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_alter_rolegrant_role"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="name",
            field=models.CharField(
                blank=True,
                default="",
                help_text="What the token is for (the integration using it), chosen by an admin.",
                max_length=100,
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="After this instant the API refuses the token; empty means it never expires.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="last_used_at",
            field=models.DateTimeField(
                blank=True, help_text="Last API call made with it (to the minute).", null=True
            ),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="revoked_at",
            field=models.DateTimeField(
                blank=True, help_text="When an admin revoked it; refused from then.", null=True
            ),
        ),
    ]
