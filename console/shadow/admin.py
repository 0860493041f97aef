from django import forms
from django.contrib import admin

from audit.services import Actor
from console.accounts.models import Route
from console.core.admin import ReadOnlyAdmin
from console.core.errors import InvalidInput
from console.shadow.models import ShadowRun
from console.shadow.pipelines import validate_shadow_config
from console.shadow.selectors import route_shadow_config
from console.shadow.services import route_shadow_set


@admin.register(ShadowRun)
class ShadowRunAdmin(ReadOnlyAdmin):
    """Read-only: runs change through their jobs and the audited retry (refusal page or API)."""

    list_display = ["pk", "decision", "pipeline", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "pipeline"]


class RouteAdminForm(forms.ModelForm):
    """Edits a route's shadow pipeline (the one route setting the admin may change); every change
    goes through an audited service. Registered here because the shadow app owns that setting."""

    shadow_kind = forms.ChoiceField(
        label="Shadow pipeline",
        required=False,
        choices=[("", "None"), ("reference", "Built-in reference pipeline (extractive)"), ("http", "HTTP pipeline")],
    )
    shadow_url = forms.CharField(
        label="Shadow pipeline URL",
        required=False,
        max_length=2000,
        help_text='For an HTTP pipeline: receives {"request_id", "question", "passages", "gate": "disabled"} '
        'and answers {"answer"}.',
    )

    class Meta:
        model = Route
        fields: list[str] = []  # the other fields change through their own services

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = route_shadow_config(self.instance)
        self.fields["shadow_kind"].initial = config.get("kind", "")
        self.fields["shadow_url"].initial = config.get("url", "")

    def clean(self):
        data = super().clean()
        kind, url = data.get("shadow_kind"), (data.get("shadow_url") or "").strip()
        if kind != "http" and url:
            self.add_error("shadow_url", "Only an HTTP pipeline has a URL.")
            return data
        config = {"kind": "http", "url": url} if kind == "http" else ({"kind": kind} if kind else {})
        try:
            data["shadow_config"] = validate_shadow_config(config)
        except InvalidInput as exc:
            self.add_error("shadow_url" if kind == "http" else "shadow_kind", exc.message)
        return data


@admin.register(Route)
class RouteAdmin(admin.ModelAdmin):
    form = RouteAdminForm
    list_display = ["slug", "name", "shadow_pipeline", "created_at"]
    fields = ["slug", "name", "shadow_kind", "shadow_url", "created_at"]
    readonly_fields = ["slug", "name", "created_at"]
    list_select_related = ["shadow_settings"]

    @admin.display(description="Shadow pipeline")
    def shadow_pipeline(self, route: Route) -> str:
        config = route_shadow_config(route)
        return config.get("url") or config.get("kind") or "—"

    def has_add_permission(self, request) -> bool:
        return False  # routes are created with `manage.py create_route` (audited)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # decisions refer to their route for ever

    def save_model(self, request, obj: Route, form: RouteAdminForm, change: bool) -> None:
        route_shadow_set(actor=Actor.user(request.user), route=obj, config=form.cleaned_data["shadow_config"])
