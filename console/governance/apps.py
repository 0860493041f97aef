from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "console.governance"
    label = "governance"
    verbose_name = "Policy sign-off"
