"""Form pieces shared by every app's pages."""

from __future__ import annotations

from django import forms

ISO_DATE_FORMATS = ["%Y-%m-%d"]


class IsoDateInput(forms.DateInput):
    """A date typed and shown as YYYY-MM-DD. Not ``type=date``: browsers draw that in the
    reader's locale (mm/dd/yyyy for many), while every date in the console is ISO 8601. The
    pattern lets the browser flag a wrong shape before submitting; the form checks it anyway."""

    input_type = "text"

    def __init__(self, attrs: dict | None = None):
        super().__init__(
            format="%Y-%m-%d",
            attrs={
                "placeholder": "YYYY-MM-DD",
                "pattern": r"\d{4}-\d{2}-\d{2}",
                "inputmode": "numeric",
                "size": 10,
                "maxlength": 10,
                "autocomplete": "off",
                **(attrs or {}),
            },
        )


def iso_date_field(**kwargs) -> forms.DateField:
    return forms.DateField(input_formats=ISO_DATE_FORMATS, widget=IsoDateInput(), **kwargs)
