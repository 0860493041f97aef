from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "console.governance"
    label = "governance"
    verbose_name = "Policy sign-off"

    def ready(self) -> None:
        from console.governance.selectors import not_following_policy_condition
        from console.ledger.hooks import register_decision_filter
        from console.trials.hooks import register_cutoff_in_force

        register_cutoff_in_force(_signed_cutoff)
        register_decision_filter(
            "not_following_policy",
            label="Gate not following policy",
            condition=not_following_policy_condition,
            badge=True,
            help_text="The gate logged a cutoff other than the signed cutoff in force at the decision's time.",
        )


def _signed_cutoff(route) -> tuple[float, str] | None:
    """Gate trials compare the current gate at the signed cutoff of the policy in force."""
    from console.governance.selectors import policy_in_force

    policy = policy_in_force(route)
    return None if policy is None else (policy.cutoff, f"policy v{policy.version}")
