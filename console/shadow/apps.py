from django.apps import AppConfig


class ShadowConfig(AppConfig):
    name = "console.shadow"
    label = "shadow"
    verbose_name = "Shadow evaluation"

    def ready(self) -> None:
        from console.ledger.hooks import register_after_ingest, register_archive_hold, register_decision_filter
        from console.shadow import tasks, workspace
        from console.shadow.selectors import shadow_failed_condition

        register_after_ingest(tasks.shadow_runs_open)
        register_archive_hold("shadow runs queued or running", _shadow_runs_at_work)
        register_decision_filter(
            "shadow_failed",
            label="Shadow run failed",
            condition=shadow_failed_condition,
            help_text="The shadow run (the answer with the gate disabled) failed; its page offers a retry.",
        )
        workspace.register()


def _shadow_runs_at_work(decision_ids) -> int:
    from console.shadow.models import ShadowRun, ShadowStatus

    at_work = [ShadowStatus.QUEUED, ShadowStatus.RUNNING]
    return ShadowRun.objects.filter(decision_id__in=decision_ids, status__in=at_work).count()
