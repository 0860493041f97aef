from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"
    # The app role may only add and read events (console/core/db_roles.py); a trigger refuses
    # changes to anyone.
    append_only_models = ("AuditEvent",)

    def ready(self) -> None:
        from audit.selectors import chain_health
        from console.core.hooks import register_report

        register_report("audit_chain", chain_health)
