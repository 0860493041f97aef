from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "console.ledger"
    label = "ledger"
    verbose_name = "Decision ledger"
