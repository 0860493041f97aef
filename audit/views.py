from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from audit.models import AuditEvent
from audit.selectors import audit_chain_verify
from console.accounts import permissions
from console.accounts.models import Role


@require_GET
def audit_log(request):
    if not permissions.has_role(request.user, [Role.AUDITOR, Role.ADMIN]):
        raise PermissionDenied("Only auditors may read the audit trail.")
    page = Paginator(AuditEvent.objects.order_by("-seq"), 100).get_page(request.GET.get("page"))
    verification = audit_chain_verify() if request.GET.get("verify") else None
    return render(request, "audit/audit_log.html", {"page": page, "verification": verification})
