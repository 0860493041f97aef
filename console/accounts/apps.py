from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "console.accounts"
    label = "accounts"
    verbose_name = "Accounts, roles and API tokens"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from console.accounts.middleware import session_signed_in

        # Every sign-in records its browser session for the Security page (console.accounts.middleware).
        user_logged_in.connect(session_signed_in, dispatch_uid="accounts-user-session")
        # Audit sits below accounts and imports nothing of it: its pages ask these checks through
        # the hook (audit/hooks.py), so every permission check still lives here.
        from audit.hooks import TrailAccess, register_trail_access
        from console.accounts import permissions, selectors

        register_trail_access(
            TrailAccess(
                can_read_trail=permissions.can_read_audit,
                can_read_history=permissions.can_read_stats,
                route_slugs=permissions.route_slugs,
                trail_readers=tuple(permissions.AUDIT_READERS),
                history_readers=tuple(permissions.STATS_READERS),
                admin_addresses=selectors.admin_addresses,
            )
        )
