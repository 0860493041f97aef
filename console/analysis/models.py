from django.db import models


class StatsResult(models.Model):
    """A computed statistics document (operating points, calibration, certified cutoff), kept so
    the next request with the same parameters on the same data does not compute it again.

    A row is only ever read back when its `data_version` equals the route's current one (see
    `console.analysis.selectors.data_version`), so a stale row is never served; it is overwritten
    the next time the same parameters are computed. Rows are derived data that can be rebuilt at
    any time from decisions and labels, so writing one is not an audited action, and the table is
    unlogged (migration 0003): PostgreSQL empties it after a crash, and documents are computed again.
    """

    route = models.ForeignKey("accounts.Route", on_delete=models.CASCADE, related_name="stats_results")
    kind = models.CharField(max_length=32, help_text="Which document: operating_points, calibration, ...")
    params_key = models.CharField(max_length=64, help_text="SHA-256 of the canonical JSON of the parameters.")
    params = models.JSONField(help_text="The parameters the document was computed for.")
    data_version = models.CharField(
        max_length=200, help_text="Route's data version when computed: decisions and labels it saw."
    )
    document = models.TextField(help_text="The response body as computed: JSON text, served as stored.")
    compute_ms = models.FloatField(help_text="How long the computation took, in milliseconds.")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["route", "kind", "params_key"], name="one_stats_result_per_query"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} for route {self.route_id} ({self.params_key[:8]})"
