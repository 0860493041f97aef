"""`flush` as the owner role: the app role may not TRUNCATE the audit trail (the test runner
empties the tables of a test database with this command between transactional tests)."""

from django.core.management.commands.flush import Command as DjangoFlushCommand

from console.core.db_roles import as_owner


class Command(DjangoFlushCommand):
    def handle(self, **options):
        with as_owner(options["database"]):
            super().handle(**options)
