import csv
from collections.abc import Iterator

from django.core.exceptions import PermissionDenied
from django.http import QueryDict, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from console.accounts import permissions
from console.core.replica import replica_reads
from console.ledger import selectors
from console.ledger.forms import DecisionFilterForm
from console.ledger.models import Outcome

PAGE_SIZE = 50


def _require_decision_reader(request) -> None:
    if not permissions.can_read_decisions(request.user):
        raise PermissionDenied("Your role does not allow reading decisions.")


# Keys of the list's address that are not filters: the page cursors and the export switch.
_PAGING = ("before", "after", "page")


# Values the list takes when a key is absent: an address need not carry them.
_DEFAULTS = {"outcome": Outcome.REFUSED, "sort": selectors.DEFAULT_SORT}


def _set_only(query: QueryDict, *, drop_defaults: bool) -> QueryDict:
    """The query without empty values (a submitted form sends every field, set or not) and,
    with ``drop_defaults``, without values the list takes anyway (refusals, newest first)."""
    kept = QueryDict(mutable=True)
    for key, values in query.lists():
        for value in values:
            if value.strip() and not (drop_defaults and value == _DEFAULTS.get(key)):
                kept.appendlist(key, value)
    kept.pop("format", None)
    return kept


@require_GET
@vary_on_headers("HX-Request")
def refusal_list(request):
    _require_decision_reader(request)
    given = _set_only(request.GET, drop_defaults=False)
    address = _set_only(request.GET, drop_defaults=True)
    exporting = request.GET.get("format") == "csv"
    if not request.htmx and not exporting and any(not v.strip() for vs in request.GET.lists() for v in vs[1]):
        # A submitted form: reload at the address with only the filters set, so it reads well
        # and can be shared. (An address typed with defaults in it is left alone.)
        return redirect(f"{reverse('refusal-list')}{'?' if address else ''}{address.urlencode()}")
    form = DecisionFilterForm(given or None, routes=selectors.readable_routes(request.user))
    valid = form.is_bound and form.is_valid()
    filters = form.to_filters() if valid else selectors.DecisionFilters()
    sort = form.sort_key()
    if exporting and (valid or not form.is_bound):
        return _csv_response(selectors.decision_list(request.user, filters, sort))
    page = selectors.decision_page(
        request.user, filters, before=given.get("before", ""), after=given.get("after", ""), size=PAGE_SIZE, sort=sort
    )
    selectors.decision_badges(page.decisions)
    query = address.copy()
    for key in _PAGING:
        query.pop(key, None)
    here = address.urlencode()
    context = {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "here": here,
        "sort_links": _sort_links(query, sort),
    }
    if request.htmx:
        response = render(request, "ledger/partials/decision_table.html", {**context, "filters_oob": True})
        response["HX-Push-Url"] = f"{reverse('refusal-list')}{'?' if here else ''}{here}"
        return response
    return render(request, "ledger/refusal_list.html", context)


def _sort_links(query: QueryDict, sort: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the address that sorts by it (the other direction when it is the
    current order) and its aria-sort state."""
    links = {}
    for column, (first, second) in {"date": ("newest", "oldest"), "score": ("score", "-score")}.items():
        target = second if sort == first else first
        with_sort = query.copy()
        with_sort["sort"] = target
        if target == selectors.DEFAULT_SORT:
            del with_sort["sort"]
        state = "none"
        if sort in (first, second):
            state = "descending" if selectors.SORTS[sort].descending else "ascending"
        links[column] = {"query": with_sort.urlencode(), "aria_sort": state}
    return links


CSV_COLUMNS = (
    "request_id",
    "route",
    "occurred_at",
    "outcome",
    "gate_name",
    "gate_score",
    "cutoff",
    "question",
    "claim",
    "model",
    "retriever",
    "corpus",
    "gate",
    "claim_units",
    "claim_units_found",
    "no_supporting_passage",
)


class _Echo:
    """A file that hands back what is written, so csv.writer can feed a streamed response."""

    def write(self, value: str) -> str:
        return value


def _cell(value) -> str:
    """A spreadsheet runs a cell that starts with =, +, -, @ as a formula: the question and claim
    are user text, so such a cell gets a leading apostrophe (scores are numbers and left alone)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _csv_rows(decisions) -> Iterator[list]:
    yield list(CSV_COLUMNS)
    # The rows are read while the response streams, after the view returned: the scope is opened here.
    with replica_reads():
        yield from _csv_decision_rows(decisions)


def _csv_decision_rows(decisions) -> Iterator[list]:
    for d in decisions.iterator(chunk_size=2000):
        support = getattr(d, "support", None)
        done = support is not None and support.status == "done"
        yield [
            _cell(d.request_id),
            d.route.slug,
            d.occurred_at.isoformat(),
            d.outcome,
            _cell(d.gate_name),
            repr(d.gate_score),
            repr(d.cutoff),
            _cell(d.question),
            _cell(d.claim),
            *(_cell(d.versions.get(k, "")) for k in ("model", "retriever", "corpus", "gate")),
            support.units if done else "",
            support.units_supported if done else "",
            ("yes" if support.no_supporting_passage else "no") if done else "",
        ]


def _csv_response(decisions) -> StreamingHttpResponse:
    """Every decision of the filtered list in its order, one row each, streamed as it is read."""
    writer = csv.writer(_Echo())
    response = StreamingHttpResponse(
        (writer.writerow(row) for row in _csv_rows(decisions)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="refusals.csv"'
    return response
