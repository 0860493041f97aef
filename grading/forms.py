import re

from django import forms

from grading.models import Verdict
from grading.services.labels import MAX_NOTE, MAX_SECONDS


class GradeForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 2}))
    seconds_spent = forms.FloatField(required=False, min_value=0, max_value=MAX_SECONDS)


class AdjudicationForm(forms.Form):
    verdict = forms.ChoiceField(choices=[(Verdict.CORRECT, "Correct"), (Verdict.INCORRECT, "Incorrect")])
    note = forms.CharField(required=False, max_length=MAX_NOTE, widget=forms.Textarea(attrs={"rows": 3}))


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
