"""One paging shape for every list endpoint of the API: `{"results": [...], "next": url | null}`.

A page is read by keyset, never by OFFSET: the list's order ends with a unique column (the id), the
`next` URL carries an opaque cursor holding the last row's values of those columns, and the next
page starts strictly after them. A page then costs one index range scan however deep it is, and a
row inserted while a client pages never shifts what it sees (an OFFSET would repeat or skip rows).

The cursor is signed (Django's signing, salted per list): a client cannot make one up or carry one
over to another list, so a cursor that does not verify is a 400 `invalid_cursor` rather than a silent
first page. It holds no permission: every page re-applies the caller's filters and access.

`next` is the request's own URL with `cursor` set (every other parameter kept, `limit` included), so
a client follows it until it is null. Lists that an endpoint bounds by a parameter of its own (the
`k` nearest neighbours, the clusters of one run) come whole, with `next: null` (`whole()`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core import signing
from django.db.models import Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers

from console.core.errors import InvalidInput, detail

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
_SALT = "console.core.paging"


def whole(results: list) -> dict[str, Any]:
    """A list that fits one page by its own bound: the shape, with no next page."""
    return {"results": results, "next": None}


def page_schema(
    name: str, item: Any, *, also_as: str | None = None, **kept: serializers.Field
) -> serializers.Serializer:
    """The OpenAPI shape of a page of `item`s: `results` and `next`, with what a list sent before it took
    this shape and still sends: its items under their old key (`also_as`) and other keys (`kept`)."""
    if also_as:
        kept[also_as] = serializers.ListField(
            child=copy.deepcopy(item), help_text="The same items as `results` (the older key)."
        )
    return inline_serializer(
        name,
        {
            "results": serializers.ListField(child=copy.deepcopy(item)),
            "next": serializers.URLField(
                allow_null=True, help_text="The next page, with the same parameters; null on the last page."
            ),
            **kept,
        },
    )


def page_parameters(default: int, maximum: int = MAX_LIMIT) -> list[OpenApiParameter]:
    """`limit` and `cursor`, as every paged list documents them."""
    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": maximum},
            description=f"Items per page, 1 to {maximum}; default {default}.",
        ),
        OpenApiParameter("cursor", str, description="Opaque; taken from a `next` URL."),
    ]


def read_limit(params: Mapping[str, Any], *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    """`limit`: a whole number from 1 to `maximum`; absent or empty is `default`."""
    raw = (params.get("limit") or "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 7 and 1 <= int(raw) <= maximum):
        message = f"limit must be a whole number from 1 to {maximum}; got {raw[:40]!r}."
        raise InvalidInput(message, code="invalid_parameter", details=[detail("limit", "invalid_limit", message)])
    return int(raw)


class Keyset:
    """A list's order for paging: column names, each with `-` for descending, the last one unique.

    `Keyset("orders", "-opened_at", "-pk")` pages a queryset newest first; `scope` names the list,
    so a cursor of one list is refused by another.
    """

    def __init__(self, scope: str, *order: str) -> None:
        if not order:
            raise ValueError("a keyset needs at least one column")
        self.scope = scope
        self.order = order

    def page(
        self,
        request,
        queryset: QuerySet,
        *,
        default_limit: int = DEFAULT_LIMIT,
        max_limit: int = MAX_LIMIT,
        cursor: Sequence[Any] | None = None,
        limit: int | None = None,
    ) -> tuple[list, str | None]:
        """The page of `queryset` the request asks for (its `limit` and `cursor`), and the URL of the
        next one (None on the last page). `cursor` starts the list after given values instead, for a
        list that has a parameter of its own for that (the audit trail's `after`); `limit` is the page's
        size when the caller has read it already, with its other parameters."""
        if limit is None:
            limit = read_limit(request.query_params, default=default_limit, maximum=max_limit)
        raw = request.query_params.get("cursor")
        if raw:
            cursor = self.decode(raw)
        ordered = queryset.order_by(*self.order)
        if cursor is not None:
            ordered = ordered.filter(self.after(cursor))
        rows = list(ordered[: limit + 1])
        if len(rows) <= limit:
            return rows, None
        rows = rows[:limit]
        return rows, next_url(request, cursor=self.encode(rows[-1]))

    def after(self, values: Sequence[Any]) -> Q:
        """Rows strictly after `values` in this order: (a > x) or (a = x and b > y) or ..., with `<`
        for descending columns; the bound on the first column alone lets PostgreSQL start an index
        scan at the cursor."""
        names = [column.lstrip("-") for column in self.order]
        condition = Q()
        for position, column in enumerate(self.order):
            step = "lt" if column.startswith("-") else "gt"
            equal = {names[i]: values[i] for i in range(position)}
            condition |= Q(**equal, **{f"{names[position]}__{step}": values[position]})
        first = "lte" if self.order[0].startswith("-") else "gte"
        return condition & Q(**{f"{names[0]}__{first}": values[0]})

    def encode(self, row: Any) -> str:
        values = [_plain(_value(row, column.lstrip("-"))) for column in self.order]
        return signing.dumps(values, salt=f"{_SALT}:{self.scope}")

    def decode(self, raw: str) -> list[Any]:
        try:
            values = signing.loads(raw, salt=f"{_SALT}:{self.scope}")
        except signing.BadSignature:
            values = None
        if not isinstance(values, list) or len(values) != len(self.order) or None in values:
            message = "cursor is not one this list gave out; follow the `next` URL as it is."
            raise InvalidInput(message, code="invalid_parameter", details=[detail("cursor", "invalid_cursor", message)])
        return values


def next_url(request, **changes: str) -> str:
    """The request's absolute URL with `changes` set in its query string, the other parameters kept."""
    query = request.query_params.copy() if hasattr(request, "query_params") else request.GET.copy()
    for key, value in changes.items():
        query[key] = value
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


def _value(row: Any, name: str) -> Any:
    return row.pk if name == "pk" else getattr(row, name)


def _plain(value: Any) -> Any:
    """A cursor value as JSON holds it; the ORM reads it back when it filters (an ISO date-time
    string compares as the date-time it writes; repr keeps a float exact through JSON)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    return value
