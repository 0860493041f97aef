"""The ledger's sections of the admins' route pages: the route's name (the section that creates
routes, console/accounts/hooks.py) and how its answers are judged (answer form, harm model, gate
functional: `RouteAnswerSettings`). The other sections save their apps' own settings."""

from __future__ import annotations

from typing import Any

from django import forms

from audit.services import Actor
from console.accounts.hooks import RouteSection, register_route_section
from console.accounts.models import Route
from console.accounts.services import route_create
from console.ledger.models import AnswerForm, GateFunctional, HarmModel
from console.ledger.selectors import answer_settings
from console.ledger.services import (
    ANSWER_SETTINGS,
    UNCHANGED,
    answer_settings_dict,
    route_answer_settings_set,
    route_update,
)
from console.ledger.validation import MAX_EXPECTED_CLAIMS


class RouteBasicsForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        label="Name",
        help_text="How the route is called on every page.",
        error_messages={"required": "Give the route a name."},
    )


class RouteAnswersForm(forms.Form):
    """Every field may be absent from a post (a script that knows only the other sections): an
    absent field leaves the setting as it is. The page itself always sends them all."""

    answer_form = forms.ChoiceField(
        choices=AnswerForm.choices,
        required=False,
        label="Answers",
        help_text="Short answers get one verdict; long answers are graded claim by claim.",
    )
    harm_model = forms.ChoiceField(
        choices=HarmModel.choices,
        required=False,
        label="Harm model",
        help_text="What a partly supported answer costs; it decides which figure a cutoff must hold.",
    )
    support_threshold = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Support threshold s0",
        help_text="For the at-least harm model: the share of an answer's claims that must be supported.",
        error_messages={"invalid": "Give a number from 0 to 1."},
    )
    expected_claims = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_EXPECTED_CLAIMS,
        label="Expected claims K",
        help_text="The claims a complete answer makes, for recall; decisions may send their own. Empty: unknown.",
        error_messages={"invalid": "Give a whole number of claims."},
    )
    gate_functional = forms.ChoiceField(
        choices=[("", "Unspecified"), *GateFunctional.choices],
        required=False,
        label="The gate's score estimates",
        help_text="When a decision does not say. Compare it with the harm model: a mean-support score under "
        "all-or-nothing harm reads the wrong event.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name in ANSWER_SETTINGS:
            if self.add_prefix(name) not in self.data:
                data[name] = UNCHANGED
        if data.get("harm_model") == HarmModel.AT_LEAST and data.get("support_threshold") is None:
            self.add_error("support_threshold", "The at-least harm model needs a support threshold.")
        return data


def _answers_initial(route: Route | None) -> dict[str, Any]:
    if route is None:
        return {"answer_form": AnswerForm.SHORT, "harm_model": HarmModel.ALL_OR_NOTHING, "gate_functional": ""}
    return answer_settings_dict(answer_settings(route))


def _answers_save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    wanted = {name: data.get(name, UNCHANGED) for name in ANSWER_SETTINGS}
    # An empty choice is no choice (the page always sends one): keep the setting.
    for name in ("answer_form", "harm_model"):
        if not wanted[name]:
            wanted[name] = UNCHANGED
    _, changed = route_answer_settings_set(actor=actor, route=route, **wanted)
    return changed


def _initial(route: Route | None) -> dict[str, Any]:
    return {"name": route.name if route is not None else ""}


def _save(*, actor: Actor, user, route: Route, data: dict[str, Any]) -> bool:
    return route_update(actor=actor, route=route, name=data["name"])


def _create(*, actor: Actor, slug: str, data: dict[str, Any]) -> Route:
    return route_create(actor=actor, slug=slug, name=data["name"])


def register() -> None:
    register_route_section(
        RouteSection(
            key="route",
            title="Route",
            order=10,
            form_class=RouteBasicsForm,
            initial=_initial,
            save=_save,
            create=_create,
        )
    )
    register_route_section(
        RouteSection(
            key="answers",
            title="Answers",
            order=15,
            form_class=RouteAnswersForm,
            initial=_answers_initial,
            save=_answers_save,
        )
    )
