"""Shadow's section of the admins' route pages: which pipeline answers the route's refused
questions with the gate disabled (console/accounts/hooks.py). Saved through `route_shadow_set`,
as `manage.py create_route --shadow` does."""

from __future__ import annotations

from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from console.core.errors import InvalidInput
from console.shadow.pipelines import MAX_URL_CHARS, validate_shadow_config
from console.shadow.services import route_shadow_set

NONE, REFERENCE, HTTP = "none", "reference", "http"


class RouteShadowForm(forms.Form):
    pipeline = forms.ChoiceField(
        label="Shadow pipeline",
        choices=[
            (NONE, "None: refused questions are graded on the logged claim"),
            (REFERENCE, "The built-in extractive reference pipeline"),
            (HTTP, "Our own pipeline, over HTTP"),
        ],
        help_text="Re-answers each refused question with the gate disabled, on the same logged passages.",
        error_messages={
            "required": "Choose a shadow pipeline (or none).",
            "invalid_choice": "Choose one of the three.",
        },
    )
    url = forms.CharField(
        required=False,
        max_length=MAX_URL_CHARS,
        label="Pipeline address",
        help_text="Only for our own pipeline: the http(s) address the console posts each question to.",
        error_messages={"max_length": f"Keep the address under {MAX_URL_CHARS} characters."},
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        pipeline = cleaned.get("pipeline")
        if pipeline is None:
            return cleaned
        config = {} if pipeline == NONE else {"kind": pipeline}
        if pipeline == HTTP:
            if not cleaned.get("url", "").strip():
                self.add_error("url", "Give the address of your pipeline.")
                return cleaned
            config["url"] = cleaned["url"]
        try:
            cleaned["config"] = validate_shadow_config(config)
        except InvalidInput as exc:
            self.add_error("url", exc.message)
        return cleaned


def _initial(route: Route | None) -> dict[str, Any]:
    config = route.shadow_config if route is not None else {}
    return {"pipeline": config.get("kind", NONE), "url": config.get("url", "")}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    old = route.shadow_config
    return route_shadow_set(actor=actor, route=route, config=data["config"]).shadow_config != old


def register() -> None:
    register_route_section(
        RouteSection(
            key="shadow", title="Shadow pipeline", order=30, form_class=RouteShadowForm, initial=_initial, save=_save
        )
    )
