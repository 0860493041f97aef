from django.apps import AppConfig


class DisputesConfig(AppConfig):
    name = "console.disputes"
    label = "disputes"
    verbose_name = "Disputes and appeals"

    def ready(self) -> None:
        # Lower apps offer hooks; this app plugs into them (they may not import it).
        from console.analysis.hooks import register_side_panel
        from console.disputes import tasks, views
        from console.disputes.selectors import dispute_status_annotations, dispute_status_of
        from console.ledger.hooks import (
            register_after_ingest,
            register_archive_hold,
            register_decision_filter,
            register_route_figures,
            register_route_summary,
        )
        from console.similarity.hooks import NeighbourFact, register_neighbour_fact

        register_after_ingest(tasks.appeals_attach)
        register_decision_filter(
            "disputed",
            label="Disputed",
            condition=views.disputed_condition,
            badge=True,
            help_text="Someone disputed the refusal, or the person refused appealed it.",
        )
        register_side_panel(views.analysis_side_panel)
        register_route_summary(views.dashboard_lines)
        register_route_figures(views.health_figures)
        register_archive_hold("disputes open", _open_disputes)
        # Each similar refusal shows whether it was disputed and how that ended.
        register_neighbour_fact(NeighbourFact("dispute", dispute_status_annotations, dispute_status_of))


def _open_disputes(decision_ids) -> int:
    from console.disputes.models import Dispute, Status

    return Dispute.objects.filter(decision_id__in=decision_ids, status=Status.OPEN).count()
