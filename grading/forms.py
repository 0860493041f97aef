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
