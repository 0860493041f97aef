from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        from audit.selectors import chain_health
        from console.core.hooks import register_report

        register_report("audit_chain", chain_health)
