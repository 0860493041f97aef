from django.apps import AppConfig


class TrialsConfig(AppConfig):
    name = "console.trials"
    label = "trials"
    verbose_name = "Candidate gate trials"
