"""Shadow's section of the admins' route pages: which pipeline answers the route's refused
questions with the gate disabled (console/accounts/hooks.py); and its options of
`manage.py create_route` (`--shadow`, `--shadow-url`). Both save through `route_shadow_set`."""

from __future__ import annotations

from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import (
    CreateRouteOption,
    RouteSection,
    register_create_route_option,
    register_route_section,
)
from console.accounts.models import Route
from console.core.errors import InvalidInput
from console.shadow.pipelines import MAX_URL_CHARS, validate_shadow_config
from console.shadow.selectors import route_shadow_config
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
    config = route_shadow_config(route) if route is not None else {}
    return {"pipeline": config.get("kind", NONE), "url": config.get("url", "")}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    return route_shadow_set(actor=actor, route=route, config=data["config"])


def _add_create_route_arguments(parser) -> None:
    shadow = parser.add_mutually_exclusive_group()
    shadow.add_argument(
        "--shadow",
        choices=["reference", "none"],
        help="Shadow pipeline: the built-in extractive reference pipeline, or none.",
    )
    shadow.add_argument("--shadow-url", help="Shadow pipeline: an http(s) URL answering POSTed questions.")


def _config_of(options: dict[str, Any]) -> dict | None:
    """The pipeline the command's options name (validated), or None when they name none."""
    shadow, url = options.get("shadow"), options.get("shadow_url")
    if shadow is None and url is None:
        return None
    if url:
        return validate_shadow_config({"kind": "http", "url": url})
    return validate_shadow_config({} if shadow == "none" else {"kind": shadow})


def _apply_create_route_options(*, actor: Actor, route: Route, created: bool, options: dict[str, Any]) -> str | None:
    config = _config_of(options)
    if config is None:
        return None
    route_shadow_set(actor=actor, route=route, config=config)
    return None if created else f"Route {route.slug}: shadow pipeline set to {config or 'none'}."


def register() -> None:
    register_route_section(
        RouteSection(
            key="shadow", title="Shadow pipeline", order=30, form_class=RouteShadowForm, initial=_initial, save=_save
        )
    )
    register_create_route_option(
        CreateRouteOption(
            key="shadow",
            add_arguments=_add_create_route_arguments,
            apply=_apply_create_route_options,
            check=_config_of,
            changes_existing=lambda options: _config_of(options) is not None,
        )
    )
