from django.apps import AppConfig


class ShadowConfig(AppConfig):
    name = "console.shadow"
    label = "shadow"
    verbose_name = "Shadow evaluation"
