from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "console.ledger"
    label = "ledger"
    verbose_name = "Decision ledger"
    # Stored passages name their dictionary by id: the app role may only add and read them
    # (console/core/db_roles.py), and a trigger refuses changes to anyone (migration 0014).
    append_only_models = ("PassageDictionary",)

    def ready(self) -> None:
        from console.ledger import workspace

        workspace.register()
