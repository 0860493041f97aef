from datetime import datetime, time, timedelta

from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from audit.models import Action, AuditEvent
from audit.selectors import audit_events_for_object
from console.core.forms import ISO_DATE_FORMATS, IsoDateInput


class AuditFilterForm(forms.Form):
    """Filters of the audit page; each narrows the events the user may read."""

    action = forms.ChoiceField(required=False, choices=[("", "Any action"), *Action.choices])
    actor = forms.CharField(
        required=False, max_length=200, help_text="Whole or start, e.g. user:grader1, token:, system:"
    )
    object = forms.CharField(required=False, max_length=240, help_text="type:id, e.g. decision:12 or route:it-support")
    date_from = forms.DateField(
        required=False,
        input_formats=ISO_DATE_FORMATS,
        widget=IsoDateInput(),
        label="From",
        help_text="UTC, as YYYY-MM-DD.",
    )
    date_to = forms.DateField(
        required=False, input_formats=ISO_DATE_FORMATS, widget=IsoDateInput(), label="To", help_text="UTC, inclusive."
    )

    def clean_object(self) -> tuple[str, str] | None:
        raw = self.cleaned_data["object"].strip()
        if not raw:
            return None
        kind, sep, oid = raw.partition(":")
        if not sep or not kind.strip() or not oid.strip():
            raise forms.ValidationError("Write the object as type:id, e.g. decision:12.")
        return kind.strip(), oid.strip()

    def apply(self, events: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        data = self.cleaned_data
        if data.get("object"):
            events = audit_events_for_object(*data["object"], events)
        if data.get("action"):
            events = events.filter(action=data["action"])
        if data.get("actor"):
            events = events.filter(actor__startswith=data["actor"].strip())
        utc = timezone.get_fixed_timezone(0)
        if data.get("date_from"):
            events = events.filter(at__gte=datetime.combine(data["date_from"], time.min, tzinfo=utc))
        if data.get("date_to"):
            events = events.filter(at__lt=datetime.combine(data["date_to"] + timedelta(days=1), time.min, tzinfo=utc))
        return events
