"""The small forms of the operating-points page (cost calculator, band simulator, certified
cutoff, planner, calibration). The table's own parameters go through `console.analysis.params`,
shared with the API."""

from __future__ import annotations

from django import forms

from console.analysis.params import MAX_BINS, calibration_query, certified_cutoff_query
from console.analysis.reports import DEFAULT_BAND
from console.core.errors import InvalidInput
from console.core.forms import ISO_DATE_FORMATS, IsoDateInput
from console.stats.policy_math import citation_adjusted_cost, cost_threshold_problem


class _PanelForm(forms.Form):
    """A GET form that falls back to each field's initial value when the parameter is absent."""

    def __init__(self, params, **kwargs):
        data = {name: params.get(name, field.initial) for name, field in self.base_fields.items()}
        super().__init__(data, **kwargs)

    def values(self) -> dict:
        """Cleaned values, or the initial ones when the form does not validate."""
        if self.is_valid():
            return self.cleaned_data
        return {name: field.initial for name, field in self.fields.items()}


class CostForm(_PanelForm):
    c_w = forms.FloatField(
        label="Cost of a wrong answer (c_w)",
        min_value=0,
        max_value=1e6,
        initial=20.0,
        help_text="In units of one correct answer.",
    )
    c_a = forms.FloatField(label="Cost of a refusal (c_a)", min_value=0, max_value=1e6, initial=0.5)
    q = forms.FloatField(
        label="Share of wrong answers a citation check catches (q)",
        min_value=0,
        max_value=1,
        initial=0.6,
        required=False,
    )
    c_v = forms.FloatField(
        label="Cost of a caught wrong answer (c_v)", min_value=0, max_value=1e6, initial=0.2, required=False
    )

    def clean(self):
        """Refuse costs whose threshold tau = (c_w - c_a) / (1 + c_w) leaves (0, 1), saying why; with
        a citation check the wrong-answer cost that counts is the adjusted one."""
        data = super().clean()
        c_w, c_a, q, c_v = (data.get(name) for name in ("c_w", "c_a", "q", "c_v"))
        if c_w is None or c_a is None:
            return data
        problem = cost_threshold_problem(c_w, c_a)
        if problem is None and q is not None and c_v is not None:
            problem = cost_threshold_problem(citation_adjusted_cost(c_w, c_v, q), c_a)
            if problem:
                problem = f"With the citation check: {problem}"
        if problem:
            raise forms.ValidationError(problem)
        return data


class BandForm(_PanelForm):
    band_lower = forms.FloatField(
        label="Serve with evidence from", min_value=-1e6, max_value=1e6, initial=DEFAULT_BAND[0]
    )
    band_cutoff = forms.FloatField(label="Serve from (cutoff)", min_value=-1e6, max_value=1e6, initial=DEFAULT_BAND[1])

    def clean(self):
        data = super().clean()
        lower, cutoff = data.get("band_lower"), data.get("band_cutoff")
        if lower is not None and cutoff is not None and lower > cutoff:
            raise forms.ValidationError("The band's lower edge must not be above the cutoff.")
        return data


class CertifyForm(_PanelForm):
    alpha = forms.FloatField(
        label="Wrong-answer rate to certify (alpha)", min_value=0.001, max_value=0.999, initial=0.1
    )
    delta = forms.FloatField(label="Error probability (delta)", min_value=0.0001, max_value=0.5, initial=0.05)
    grid = forms.CharField(
        label="Cutoffs to scan",
        required=False,
        max_length=20_000,
        initial="0:0.99:0.01",
        help_text="start:stop:step ranges and numbers, comma-separated (as the API's grid)",
    )

    def clean_grid(self) -> tuple[float, ...]:
        raw = (self.cleaned_data.get("grid") or "").strip() or self.fields["grid"].initial
        try:
            return certified_cutoff_query({"grid": raw}).grid
        except InvalidInput as exc:
            raise forms.ValidationError(exc.details[0]["message"]) from None

    def values(self) -> dict:
        values = super().values()
        if not isinstance(values["grid"], tuple):  # the form did not validate: the initial text, parsed
            values["grid"] = certified_cutoff_query({"grid": values["grid"]}).grid
        return values


class PlannerForm(_PanelForm):
    half_width = forms.FloatField(label="Half-width wanted (±)", min_value=0.005, max_value=0.5, initial=0.05)
    compare = forms.CharField(label="Tell apart", required=False, max_length=60, initial="")

    def __init__(self, params, *, pairs: list[tuple[float, float]], **kwargs):
        super().__init__(params, **kwargs)
        choices = [(f"{a:g}-{b:g}", f"{a:g} and {b:g}") for a, b in pairs]
        self.fields["compare"] = forms.ChoiceField(label="Tell apart cutoffs", choices=choices, required=False)
        if choices and not self.data.get("compare"):
            self.data = {**self.data, "compare": choices[len(choices) // 2][0]}


class CalibrationForm(_PanelForm):
    bins = forms.IntegerField(label="Bins", min_value=1, max_value=MAX_BINS, initial=10)
    by = forms.CharField(
        label="By",
        required=False,
        max_length=80,
        initial="",
        help_text="segment.<key> or version.<key>, e.g. segment.language",
    )

    def clean_by(self) -> tuple[str, str] | None:
        raw = (self.cleaned_data.get("by") or "").strip()
        try:
            return calibration_query({"by": raw}).by if raw else None
        except InvalidInput:
            raise forms.ValidationError("Write segment.<key> or version.<key>.") from None


class SettingsForm(forms.Form):
    """The table's settings as the page shows them. Parsing is `console.analysis.params`, shared
    with the API, so this form only renders: it is built from the query the page already parsed."""

    def __init__(self, *, routes, route, query, interval_labels: dict[str, str]):
        window = query.window
        versions, segments = dict(window.versions), window.segments
        initial = {
            "route": route.slug,
            "from": window.date_from,
            "to": window.date_to,
            "version.model": versions.get("model", ""),
            "version.gate": versions.get("gate", ""),
            "segment": ",".join(f"{key}={value}" for key, value in segments),
            "confidence": query.confidence,
            "interval": query.interval,
        }
        super().__init__(initial=initial)
        date = IsoDateInput()
        self.fields.update(
            {
                "route": forms.ChoiceField(label="Route", choices=[(r.slug, r.name) for r in routes]),
                "from": forms.DateField(label="From", required=False, widget=date, input_formats=ISO_DATE_FORMATS),
                "to": forms.DateField(label="To", required=False, widget=date, input_formats=ISO_DATE_FORMATS),
                "version.model": forms.CharField(label="Model version", required=False),
                "version.gate": forms.CharField(label="Gate version", required=False),
                "segment": forms.CharField(
                    label="Segment", required=False, widget=forms.TextInput(attrs={"placeholder": "language=de"})
                ),
                "confidence": forms.FloatField(
                    label="Confidence", widget=forms.TextInput(attrs={"size": 5, "inputmode": "decimal"})
                ),
                "interval": forms.ChoiceField(label="Interval", choices=list(interval_labels.items())),
            }
        )
