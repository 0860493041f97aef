from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    # The label predates the move from console/policy: kept so the stored tables keep their names.
    name = "console.analysis"
    label = "policy"
    verbose_name = "Operating points analysis"
