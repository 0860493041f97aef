"""The small forms of the operating-points page (cost calculator, band simulator, certified
cutoff, planner, calibration). The table's own parameters go through `console.analysis.params`,
shared with the API."""

from __future__ import annotations

from django import forms

from console.analysis.params import MAX_BINS, calibration_query, certified_cutoff_query
from console.analysis.reports import DEFAULT_BAND
from console.core.errors import InvalidInput


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
    c_w = forms.FloatField(label="Cost of a wrong answer (c_w)", min_value=0, max_value=1e6, initial=20.0,
                           help_text="In units of one correct answer.")
    c_a = forms.FloatField(label="Cost of a refusal (c_a)", min_value=0, max_value=1e6, initial=0.5)
    q = forms.FloatField(label="Share of wrong answers a citation check catches (q)", min_value=0, max_value=1,
                         initial=0.6, required=False)
    c_v = forms.FloatField(label="Cost of a caught wrong answer (c_v)", min_value=0, max_value=1e6, initial=0.2,
                           required=False)


class BandForm(_PanelForm):
    band_lower = forms.FloatField(label="Serve with evidence from", min_value=-1e6, max_value=1e6,
                                  initial=DEFAULT_BAND[0])
    band_cutoff = forms.FloatField(label="Serve from (cutoff)", min_value=-1e6, max_value=1e6,
                                   initial=DEFAULT_BAND[1])

    def clean(self):
        data = super().clean()
        lower, cutoff = data.get("band_lower"), data.get("band_cutoff")
        if lower is not None and cutoff is not None and lower > cutoff:
            raise forms.ValidationError("The band's lower edge must not be above the cutoff.")
        return data


class CertifyForm(_PanelForm):
    alpha = forms.FloatField(label="Wrong-answer rate to certify (alpha)", min_value=0.001, max_value=0.999,
                             initial=0.1)
    delta = forms.FloatField(label="Error probability (delta)", min_value=0.0001, max_value=0.5, initial=0.05)
    grid = forms.CharField(label="Cutoffs to scan", required=False, max_length=20_000, initial="0:0.99:0.01",
                           help_text="start:stop:step ranges and numbers, comma-separated (as the API's grid)")

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
    by = forms.CharField(label="By", required=False, max_length=80, initial="",
                         help_text="segment.<key> or version.<key>, e.g. segment.language")

    def clean_by(self) -> tuple[str, str] | None:
        raw = (self.cleaned_data.get("by") or "").strip()
        try:
            return calibration_query({"by": raw}).by if raw else None
        except InvalidInput:
            raise forms.ValidationError("Write segment.<key> or version.<key>.") from None
