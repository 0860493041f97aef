from django.apps import AppConfig


class TrialsConfig(AppConfig):
    name = "console.trials"
    label = "trials"
    verbose_name = "Candidate gate trials"

    def ready(self) -> None:
        from console.ledger.hooks import register_archive_hold

        register_archive_hold("trial calls queued or calling", _calls_at_work)


def _calls_at_work(decision_ids) -> int:
    from console.trials.models import CallStatus, TrialCall

    at_work = [CallStatus.QUEUED, CallStatus.CALLING]
    return TrialCall.objects.filter(decision_id__in=decision_ids, status__in=at_work).count()
