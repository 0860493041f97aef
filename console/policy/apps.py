from django.apps import AppConfig


class PolicyConfig(AppConfig):
    name = "console.policy"
    label = "policy"
    verbose_name = "Operating points and policy"
