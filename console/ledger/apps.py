from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "console.ledger"
    label = "ledger"
    verbose_name = "Decision ledger"

    def ready(self) -> None:
        from console.ledger import workspace

        workspace.register()
