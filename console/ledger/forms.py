from django import forms

from console.core.forms import ISO_DATE_FORMATS, IsoDateInput
from console.ledger.hooks import decision_filters
from console.ledger.models import Outcome
from console.ledger.selectors import DEFAULT_SORT, SORTS, DecisionFilters


class DecisionFilterForm(forms.Form):
    """The refusals list filters. Versions and segments are free text `key=value` pairs."""

    q = forms.CharField(
        required=False,
        max_length=200,
        label="Search",
        help_text='Words in the question or claim; "a phrase", or, -word.',
    )
    route = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(
        required=False,
        initial=Outcome.REFUSED,
        choices=[
            ("refused", "Refused"),
            ("served", "Served"),
            ("served_with_evidence", "Served with evidence"),
            ("any", "Any"),
        ],
    )
    score_min = forms.FloatField(required=False, min_value=-1e9, max_value=1e9, label="Score from")
    score_max = forms.FloatField(required=False, min_value=-1e9, max_value=1e9, label="Score to")
    date_from = forms.DateField(
        required=False, input_formats=ISO_DATE_FORMATS, widget=IsoDateInput(), help_text="UTC, as YYYY-MM-DD."
    )
    date_to = forms.DateField(
        required=False,
        input_formats=ISO_DATE_FORMATS,
        widget=IsoDateInput(),
        help_text="UTC, inclusive, as YYYY-MM-DD.",
    )
    model = forms.CharField(required=False, max_length=200, label="Model version")
    retriever = forms.CharField(required=False, max_length=200, label="Retriever version")
    corpus = forms.CharField(required=False, max_length=200, label="Corpus version")
    gate = forms.CharField(required=False, max_length=200, label="Gate version")
    segment = forms.CharField(required=False, max_length=200, help_text="key=value, e.g. language=en")
    no_supporting_passage = forms.BooleanField(
        required=False,
        label="No supporting passage",
        help_text="No claim unit was found in any logged passage: a retrieval problem, not a gate one.",
    )
    sort = forms.ChoiceField(
        required=False,
        label="Order",
        initial=DEFAULT_SORT,
        choices=[(key, sort.label.capitalize()) for key, sort in SORTS.items()],
    )

    def __init__(self, *args, routes=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["route"].choices = [("", "All routes")] + [(r.slug, r.name) for r in routes]
        for hook in decision_filters():  # filters of upper apps, e.g. "disputed"
            self.fields[hook.name] = forms.BooleanField(required=False, label=hook.label, help_text=hook.help_text)

    def clean_segment(self):
        raw = self.cleaned_data["segment"].strip()
        if not raw:
            return None
        key, sep, value = raw.partition("=")
        if not sep or not key.strip():
            raise forms.ValidationError("Write the segment as key=value.")
        return {key.strip(): value.strip()}

    def to_filters(self) -> DecisionFilters:
        data = self.cleaned_data
        versions = {k: data[k] for k in ("model", "retriever", "corpus", "gate") if data.get(k)}
        outcome = data.get("outcome") or Outcome.REFUSED
        return DecisionFilters(
            route=data.get("route") or None,
            outcome=None if outcome == "any" else outcome,
            score_min=data.get("score_min"),
            score_max=data.get("score_max"),
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            versions=versions or None,
            segments=data.get("segment"),
            no_supporting_passage=bool(data.get("no_supporting_passage")),
            text=data.get("q") or "",
            extra=tuple(hook.name for hook in decision_filters() if data.get(hook.name)),
        )

    def sort_key(self) -> str:
        return (self.cleaned_data.get("sort") if self.is_bound and self.is_valid() else "") or DEFAULT_SORT
