from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from audit.forms import AuditFilterForm
from audit.hooks import trail_access
from audit.selectors import audit_chain_verify, readable_events


@require_GET
def audit_log(request):
    if not trail_access().can_read_trail(request.user):
        raise PermissionDenied("Only auditors may read the audit trail.")
    given = QueryDict(mutable=True)
    for key in ("action", "actor", "object", "date_from", "date_to"):
        if request.GET.get(key, "").strip():
            given[key] = request.GET[key]
    form = AuditFilterForm(given or None)
    events = readable_events(request.user)
    if form.is_bound and form.is_valid():
        events = form.apply(events)
    page = Paginator(events.order_by("-seq"), 100).get_page(request.GET.get("page"))
    verification = audit_chain_verify() if request.GET.get("verify") else None
    return render(
        request,
        "audit/audit_log.html",
        {"page": page, "verification": verification, "form": form, "query": given.urlencode()},
    )
