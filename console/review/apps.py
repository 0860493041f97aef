from django.apps import AppConfig


class ReviewConfig(AppConfig):
    """The decision dossier: everything about one decision, assembled from every app.

    It sits on top of the dependency rule (docs/architecture.md): it may import any app and no app
    imports it, so the ledger never has to know what the apps above it add to a decision."""

    name = "console.review"
    label = "review"
    verbose_name = "Decision review"

    def ready(self) -> None:
        from console.review.selectors import final_label_annotations, final_label_of, gap_cluster_labels
        from console.similarity.hooks import NeighbourFact, register_cluster_figures, register_neighbour_fact

        register_cluster_figures(gap_cluster_labels)
        register_neighbour_fact(NeighbourFact("label", final_label_annotations, final_label_of))
