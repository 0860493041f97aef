"""The migrations describe the models: a model changed without its migration fails here, before a
deployment's `migrate` leaves the schema behind the code."""

from django.core.management import call_command


def test_the_migrations_hold_every_model_change(db):
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
