import re

from django import forms

from grading.models import Verdict
from grading.services.labels import MAX_NOTE, MAX_SECONDS


class GradeForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 2}))
    seconds_spent = forms.FloatField(required=False, min_value=0, max_value=MAX_SECONDS)


_CLAIM_FIELD = re.compile(r"claim-(\d{1,4})")


def posted_claims(data) -> list[dict]:
    """`[{"index", "verdict"}]` from the page's radio groups `claim-<index>`, one per claim marked;
    whether every claim is there, and each verdict valid, is the service's check."""
    return sorted(
        ({"index": int(match[1]), "verdict": data.get(key)} for key in data if (match := _CLAIM_FIELD.fullmatch(key))),
        key=lambda claim: claim["index"],
    )


class ClaimGradeForm(forms.Form):
    """A long answer's grade from the queue page: a radio group `claim-<index>` per claim (read by
    `posted_claims`), the note and the time on screen."""

    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 2}))
    seconds_spent = forms.FloatField(required=False, min_value=0, max_value=MAX_SECONDS)

    def clean(self) -> dict:
        cleaned = super().clean()
        cleaned["claims"] = posted_claims(self.data)
        if not cleaned["claims"]:
            raise forms.ValidationError("Mark every claim (keys 1, 2, 3).")
        return cleaned


class AdjudicationForm(forms.Form):
    verdict = forms.ChoiceField(choices=[(Verdict.CORRECT, "Correct"), (Verdict.INCORRECT, "Incorrect")])
    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 3}))


class ClaimAdjudicationForm(forms.Form):
    """A long answer's adjudication: a radio group `claim-<index>` for each claim the graders disputed."""

    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 3}))

    def clean(self) -> dict:
        cleaned = super().clean()
        cleaned["claims"] = posted_claims(self.data)
        return cleaned


class GuidelinesForm(forms.Form):
    guidelines = forms.CharField(
        required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 18, "class": "mono"})
    )
    # The sha256 of the published text the editor's change was shown against (the confirm step sets it).
    base = forms.CharField(required=False, max_length=200, widget=forms.HiddenInput)

    def clean_base(self) -> str:
        # Anything else did not come from the review step: the post goes to that step.
        base = self.cleaned_data["base"]
        return base if re.fullmatch(r"[0-9a-f]{64}", base) else ""

    def clean_guidelines(self) -> str:
        # Browsers post a textarea's line breaks as CRLF; store the text as it was written.
        return self.cleaned_data["guidelines"].replace("\r\n", "\n")


# --------------------------------------------------------------------------- admins: plans and gold items


class PlanBandForm(forms.Form):
    """One score band of a sampling plan; a row left empty is no band."""

    low = forms.FloatField(
        label="Scores from",
        required=False,
        min_value=-1e6,
        max_value=1e6,
        error_messages={"invalid": "Write the lower edge as a number, e.g. 0.5."},
    )
    high = forms.FloatField(
        label="up to (not included)",
        required=False,
        min_value=-1e6,
        max_value=1e6,
        error_messages={"invalid": "Write the upper edge as a number, e.g. 0.85."},
    )
    target = forms.IntegerField(
        label="Items to grade",
        required=False,
        min_value=1,
        max_value=1_000_000,
        error_messages={
            "invalid": "Write how many items to grade as a whole number.",
            "min_value": "A band needs at least 1 item to grade.",
        },
    )

    def clean(self):
        data = super().clean()
        low, high, target = (data.get(name) for name in ("low", "high", "target"))
        given = [name for name in ("low", "high", "target") if self.data.get(self.add_prefix(name), "").strip()]
        if given and len(given) < 3:
            for name, words in (("low", "the lower edge"), ("high", "the upper edge"), ("target", "how many items")):
                if name not in given:
                    self.add_error(name, f"Give {words} too, or clear the whole row.")
        elif low is not None and high is not None and low >= high:
            self.add_error("high", "The upper edge must be above the lower edge.")
        return data

    def band(self) -> tuple[float, float, int] | None:
        data = self.cleaned_data
        if data.get("low") is None or data.get("high") is None or data.get("target") is None:
            return None
        return data["low"], data["high"], data["target"]


class BaseBandFormSet(forms.BaseFormSet):
    def clean(self):
        if any(self.errors):
            return
        bands = sorted(band for form in self.forms if (band := form.band()) is not None)
        for (low, high, _), (next_low, next_high, _) in zip(bands, bands[1:], strict=False):
            if next_low < high:
                raise forms.ValidationError(
                    f"The bands {low:g} to {high:g} and {next_low:g} to {next_high:g} overlap; "
                    "a score may fall in one band only."
                )

    def bands(self) -> list[tuple[float, float, int]]:
        return [band for form in self.forms if (band := form.band()) is not None]


BandFormSet = forms.formset_factory(PlanBandForm, formset=BaseBandFormSet, extra=0, max_num=20, absolute_max=20)
# Empty rows offered below a plan's bands for new ones.
BLANK_BAND_ROWS = 3


class PlanForm(forms.Form):
    gold_percent = forms.FloatField(
        label="Gold items, as a share of items handed out (%)",
        min_value=0,
        max_value=50,
        initial=0,
        help_text="0 hands out none; at most 50.",
        error_messages={
            "required": "Give a share of gold items, 0 for none.",
            "invalid": "Write the share of gold items as a number of percent, e.g. 5.",
            "min_value": "The share of gold items cannot be below 0%%.",
            "max_value": "The share of gold items can be at most 50%%.",
        },
    )
    window_days = forms.IntegerField(
        label="Days of past traffic the rates are set from",
        min_value=1,
        max_value=366,
        initial=30,
        help_text="Each band's rate is its target over its decisions in these days.",
        error_messages={
            "required": "Give a number of days, e.g. 30.",
            "invalid": "Write the number of days as a whole number.",
            "min_value": "The window must be at least 1 day.",
            "max_value": "The window can be at most 366 days.",
        },
    )


class GoldItemForm(forms.Form):
    request_id = forms.CharField(
        label="Request id of the decision",
        max_length=200,
        help_text="Its question and passages are shown to graders with the answer below.",
        error_messages={"required": "Give the request id of a decision of this route."},
    )
    verdict = forms.ChoiceField(
        label="The answer is",
        choices=[(Verdict.CORRECT, "Correct"), (Verdict.INCORRECT, "Incorrect")],
        widget=forms.RadioSelect,
        error_messages={"required": "Say whether the answer is correct or incorrect."},
    )
    answer = forms.CharField(
        label="Answer graders judge",
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Leave empty to use the decision's own answer under review.",
        error_messages={"max_length": "The answer can be at most %(limit_value)d characters."},
    )

    def clean_request_id(self) -> str:
        return self.cleaned_data["request_id"].strip()

    def clean_answer(self) -> str | None:
        # Browsers post a textarea's line breaks as CRLF; empty means the decision's answer.
        return self.cleaned_data["answer"].replace("\r\n", "\n").strip() or None
