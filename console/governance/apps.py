from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "console.governance"
    label = "governance"
    verbose_name = "Policy sign-off"

    def ready(self) -> None:
        from console.governance import demo
        from console.ledger.hooks import register_after_demo

        register_after_demo(demo.demo_policies)
