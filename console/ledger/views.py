from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from console.accounts import permissions
from console.ledger import selectors
from console.ledger.forms import DecisionFilterForm

PAGE_SIZE = 50


def _require_decision_reader(request) -> None:
    if not permissions.can_read_decisions(request.user):
        raise PermissionDenied("Your role does not allow reading decisions.")


@require_GET
@vary_on_headers("HX-Request")
def refusal_list(request):
    _require_decision_reader(request)
    form = DecisionFilterForm(request.GET or None, routes=selectors.readable_routes(request.user))
    filters = form.to_filters() if form.is_bound and form.is_valid() else selectors.DecisionFilters()
    page = selectors.decision_page(request.user, filters, before=request.GET.get("before", ""),
                                   after=request.GET.get("after", ""), size=PAGE_SIZE)
    query = request.GET.copy()
    for key in ("before", "after", "page"):
        query.pop(key, None)
    context = {"form": form, "page": page, "query": query.urlencode()}
    template = "ledger/partials/decision_table.html" if request.htmx else "ledger/refusal_list.html"
    return render(request, template, context)
