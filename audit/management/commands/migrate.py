"""`migrate` as the owner role, then the app role's grants (see console/core/db_roles.py).

It lives in the audit app because the audit trail is what the split protects: the app role may
only add and read events, never alter the table or disable its append-only trigger."""

from django.core.management.commands.migrate import Command as DjangoMigrateCommand

from console.core.db_roles import app_privileges_grant, as_owner


class Command(DjangoMigrateCommand):
    help = DjangoMigrateCommand.help + (
        " Runs as the owner role (DATABASE_OWNER_URL) when one is set, then grants the app role its privileges."
    )

    def handle(self, *args, **options):
        alias = options["database"]
        with as_owner(alias) as app_role:
            super().handle(*args, **options)
            if app_role:
                app_privileges_grant(alias=alias, app_role=app_role)
