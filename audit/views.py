from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from audit.selectors import audit_chain_verify, readable_events
from console.accounts import permissions


@require_GET
def audit_log(request):
    if not permissions.can_read_audit(request.user):
        raise PermissionDenied("Only auditors may read the audit trail.")
    page = Paginator(readable_events(request.user).order_by("-seq"), 100).get_page(request.GET.get("page"))
    verification = audit_chain_verify() if request.GET.get("verify") else None
    return render(request, "audit/audit_log.html", {"page": page, "verification": verification})
