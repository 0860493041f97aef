"""The one cache of statistics documents: each is stored under route, kind, the SHA-256 of its
canonical parameters, and the route's data version (`selectors.data_version`: the newest decision
and ingest event of the route, and the state of its final labels).

A stored document is served only while the version is unchanged; any new decision or label changes
the version, so the next request (or the recompute job) computes afresh. Nothing stale is ever
returned and no invalidation is needed. A document is derived data that can be rebuilt at any
time, so storing one writes no audit event (what it reads was audited when it was written).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson
from django.db import DEFAULT_DB_ALIAS, connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from console.accounts.models import Route
from console.analysis import selectors
from console.analysis.models import StatsResult
from console.core.replica import bookkeeping_writes, replica_reads


def params_key(kind: str, params: dict[str, Any]) -> str:
    canonical = json.dumps({"kind": kind, **params}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Document:
    """A statistics document as JSON text (what the API sends, byte for byte as stored)."""

    text: str

    @cached_property
    def data(self) -> dict[str, Any]:
        return json.loads(self.text)


def as_json(document: dict[str, Any]) -> str:
    """The compact JSON text of a document. orjson writes what `json.dumps(..., separators=(",", ":"))`
    writes for these documents (strings, numbers, lists, dicts) in a tenth of the time: 1 ms instead of
    10 for a calibration report of 450 KB, a tenth of a cold request. As with json, numpy's float64
    is written as a number and keys that are not strings as strings; a NaN or an infinity would be
    written null (the statistics report an undefined figure as None, so none reaches here)."""
    return orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY).decode()


def cached(
    route: Route,
    kind: str,
    params: dict[str, Any],
    compute: Callable[[], dict[str, Any]],
    *,
    version: str | None = None,
) -> Document:
    """The stored document for these parameters on the route's current data, or compute and store it.

    The version is read before computing: if data arrives while computing, the document is stored
    under the older version and the next request computes again.

    The version and the computation read in one replica scope (console/core/replica.py), so both
    come from the same database: a version read on the primary with rows from a replica behind it
    would store old figures under a new version. The stored documents themselves are read and
    written on the primary: their table is unlogged, so a standby has none of it.
    """
    with replica_reads():
        version = version or selectors.data_version(route)
        key = params_key(kind, params)
        stored = (
            StatsResult.objects.using(DEFAULT_DB_ALIAS)
            .filter(route=route, kind=kind, params_key=key, data_version=version)
            .values_list("document", flat=True)
            .first()
        )
        if stored is not None:
            return Document(stored)
        started = time.perf_counter()
        document = compute()
    document["computed_at"] = timezone.now().isoformat()
    document["data_version"] = version
    text = as_json(document)
    _store(
        route=route,
        kind=kind,
        params=params,
        params_key=key,
        data_version=version,
        document=text,
        compute_ms=1000 * (time.perf_counter() - started),
    )
    return Document(text)


# One statement, so one round trip. Outside a transaction, the one PostgreSQL wraps around it
# commits without waiting for the write-ahead log (`set_config(..., true)` lasts until that commit),
# as console.core.jobs.commit_without_waiting does for a block: a document lost to a crash is
# computed again by the next request. Its table is unlogged too (migration 0003), but the foreign
# key's lock on the route row is logged, so the commit would still wait for the disk. Inside a
# request's (or a test's) transaction the statement leaves the setting alone: those writes keep
# their wait.
_STORE_SQL = """
INSERT INTO {table} (route_id, kind, params_key, params, data_version, document, compute_ms, computed_at)
SELECT %s, %s, %s, %s, %s, %s, %s, %s {source}
ON CONFLICT (route_id, kind, params_key) DO UPDATE SET
    params = EXCLUDED.params, data_version = EXCLUDED.data_version, document = EXCLUDED.document,
    compute_ms = EXCLUDED.compute_ms, computed_at = EXCLUDED.computed_at
"""
_ASYNCHRONOUS = "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS asynchronous"


def _store(
    *,
    route: Route,
    kind: str,
    params: dict[str, Any],
    params_key: str,
    data_version: str,
    document: str,
    compute_ms: float,
) -> None:
    """Insert or replace the document for (route, kind, params) in one statement (safe under races)."""
    result = StatsResult(
        route=route,
        kind=kind,
        params_key=params_key,
        params=params,
        data_version=data_version,
        document=document,
        compute_ms=compute_ms,
        computed_at=timezone.now(),
    )
    result.clean_fields(exclude=["route"])  # the route was just read; checking it again costs a query
    sql = _STORE_SQL.format(
        table=StatsResult._meta.db_table, source="" if connection.in_atomic_block else _ASYNCHRONOUS
    )
    # A document is derived from reads already made: storing it does not hold the request's later reads
    # on the primary.
    with bookkeeping_writes(), connection.cursor() as cursor:
        cursor.execute(
            sql, [route.pk, kind, params_key, Jsonb(params), data_version, document, compute_ms, result.computed_at]
        )


def is_current(route: Route, kind: str, params: dict[str, Any]) -> bool:
    """Whether the document for these parameters is stored for the route's current data."""
    return (
        StatsResult.objects.using(DEFAULT_DB_ALIAS)
        .filter(route=route, kind=kind, params_key=params_key(kind, params), data_version=selectors.data_version(route))
        .exists()
    )
