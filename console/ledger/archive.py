"""Archive a month: its decisions and everything stored per decision leave the database for files.

The decisions and their per-decision tables are partitioned by month (console/ledger/partitions.py),
so a month's rows are a set of partitions. Archiving one, in a single transaction:

1. writes every row that goes to gzipped CSV files in a folder of its own (one file per table,
   a header line first) and a manifest with each file's rows and SHA-256;
2. deletes the rows of other tables that point at the month's decisions, and what hangs off
   them, after writing them out too: span checks, question vectors, pool items with their grades
   and labels, disputes, shadow runs and trial calls. The archive is refused while work on the
   month's decisions is still under way: apps report it through `hooks.register_archive_hold`
   (an open dispute, a queued shadow run or trial call). The statistics then describe the months
   that remain, labels included;
3. takes the month out of the day counters and score bins (the analysis reads those), so that
   totals and the statistics agree with what is left (the monitor's stored daily figures stay:
   they are its history);
4. detaches the month's partitions and drops them, per-decision tables first, then the decisions;
5. deletes the passages no remaining decision refers to, after writing them out too (their text
   readable, though the table may hold it deflated: console/ledger/compression.py);
6. writes one audit event per route, with the month, the counts and the manifest's SHA-256.

The current month and later ones are refused: decisions still arrive for them. The month's request
ids are released: a decision sent again later for an archived month is stored again, in a new,
empty partition of that month.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path

from django.db import connection, models, transaction
from django.db.models.deletion import Collector, ProtectedError
from django.db.models.fields.composite import CompositePrimaryKey
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record_many
from console.core.errors import Conflict, InvalidInput, NotFound
from console.core.partitions import month_of
from console.ledger.compression import decompress_text
from console.ledger.hooks import archive_holds
from console.ledger.models import PASSAGE_RANKS_SQL, Decision, Passage
from console.ledger.partitions import decision_month_partitions

_PASSAGE_BATCH = 5_000  # passages inflated and written out at a time


@dataclass
class ArchiveResult:
    month: date
    folder: Path
    decisions_by_route: dict[str, int] = field(default_factory=dict)
    files: dict[str, dict] = field(default_factory=dict)  # file name -> {"rows": n, "sha256": hex}

    @property
    def decisions(self) -> int:
        return sum(self.decisions_by_route.values())


def month_archive(*, actor: Actor, month: date, folder: Path) -> ArchiveResult:
    """Archive `month` into `folder` (created; must not exist yet). Run as the tables' owner."""
    month = month_of(month)
    if month >= month_of(timezone.now()):
        raise InvalidInput(f"{month:%Y-%m} is the current month or later: decisions still arrive for it.")
    parts = [p for p in decision_month_partitions() if p.month == month]
    decisions_part = next((p.name for p in parts if p.parent == Decision._meta.db_table), None)
    if decisions_part is None:
        raise NotFound(f"No decisions are stored for {month:%Y-%m}.")
    if folder.exists():
        raise Conflict(f"{folder} exists already; archives are never overwritten.")
    partitioned = {p.parent for p in parts}
    month_ids = models.expressions.RawSQL(f"SELECT id FROM {decisions_part}", [])  # noqa: S611 - a catalog name
    dependants = [
        (rel.related_model, rel.field)
        for rel in Decision._meta.related_objects
        if not rel.many_to_many and rel.related_model._meta.db_table not in partitioned
    ]
    held = archive_holds(month_ids)
    if held:
        listed = ", ".join(f"{n:,} {what}" for what, n in sorted(held.items()))
        raise Conflict(f"Work on decisions of {month:%Y-%m} is still under way ({listed}); archive it later.")
    folder.mkdir(parents=True)
    result = ArchiveResult(month=month, folder=folder)
    try:
        with transaction.atomic():
            result.decisions_by_route = _decisions_by_route(decisions_part)
            # Rows that point at the month's decisions from outside its partitions.
            _dependants_delete(dependants, month_ids, result)
            for part in parts:
                _export(_rows_query(part.name, decisions=part.parent == Decision._meta.db_table), part.parent, result)
            _counters_forget(month)
            with connection.cursor() as cursor:  # the request ids become free again (see the docstring)
                cursor.execute(
                    f"DELETE FROM ledger_requestkey AS k USING {decisions_part} AS d "
                    "WHERE k.route_id = d.route_id AND k.request_id = d.request_id"
                )
            with connection.cursor() as cursor:  # the passages that may be the month's alone
                cursor.execute(
                    "CREATE TEMPORARY TABLE archive_passages ON COMMIT DROP AS "
                    f"SELECT DISTINCT unnest(passage_ids) AS id FROM {decisions_part}"
                )
            for part in parts:  # per-decision tables first, then the decisions (decision_month_partitions)
                with connection.cursor() as cursor:
                    cursor.execute(f"ALTER TABLE {part.parent} DETACH PARTITION {part.name}")
                    cursor.execute(f"DROP TABLE {part.name}")
            _orphan_passages_delete(result)
            manifest = _write_manifest(result)
            audit_record_many(
                actor=actor,
                events=[
                    EventSpec(
                        Action.MONTH_ARCHIVED,
                        "route",
                        slug,
                        route=slug,
                        payload={
                            "month": f"{month:%Y-%m}",
                            "decisions": count,
                            "folder": str(folder),
                            "manifest_sha256": manifest,
                        },
                    )
                    for slug, count in sorted(result.decisions_by_route.items())
                ],
            )
    except BaseException:
        for written in folder.iterdir():
            written.unlink()
        folder.rmdir()
        raise
    return result


def _rows_query(part: str, *, decisions: bool) -> str:
    """The SELECT of a partition's rows as the archive writes them: every column, a decision's ranks
    spelt out (the table leaves ranks of 1..n NULL, ledger migration 0025; a file says them)."""
    if not decisions:
        return f"SELECT * FROM {part}"
    with connection.cursor() as cursor:
        columns = [column.name for column in connection.introspection.get_table_description(cursor, part)]
    spelt = f"{PASSAGE_RANKS_SQL} AS passage_ranks"
    listed = ", ".join(spelt if name == "passage_ranks" else f'"{name}"' for name in columns)
    return f"SELECT {listed} FROM {part}"


def _decisions_by_route(part: str) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.slug, count(*) FROM {part} d JOIN ledger_route r ON r.id = d.route_id GROUP BY r.slug"
        )
        return dict(cursor.fetchall())


def _dependants_delete(dependants, month_ids, result: ArchiveResult) -> None:
    """Delete every dependant table's rows of the month, those that protect others first (a label
    protects its pool item): a table whose rows are still protected waits for the next round."""
    waiting = list(dependants)
    while waiting:
        postponed = []
        for model, link in waiting:
            queryset = model._base_manager.filter(**{f"{link.attname}__in": month_ids})
            try:
                _collect_and_delete(queryset, result)
            except ProtectedError:
                postponed.append((model, link))
        if len(postponed) == len(waiting):
            raise Conflict(
                "Rows outside the month protect its decisions' rows: "
                + ", ".join(m._meta.db_table for m, _ in postponed)
            )
        waiting = postponed


def _collect_and_delete(queryset, result: ArchiveResult) -> None:
    """Write out and delete these rows and what Django would delete with them (grades with their
    pool item, ...), through Django's collector, which knows every app's on_delete rules."""
    collector = Collector(using=queryset.db)
    collector.collect(queryset)
    for model, instances in collector.data.items():
        ids = [obj.pk for obj in instances]
        if not ids:
            continue
        table, key = model._meta.db_table, _key_columns(model)
        if len(key) == 1:  # one array parameter, however many rows the month has
            _export(f"SELECT * FROM {table} WHERE {key[0]} = ANY(%s)", table, result, params=[ids])
        else:
            sql, params = model._base_manager.filter(pk__in=ids).values("pk").query.sql_with_params()
            _export(f"SELECT * FROM {table} WHERE ({', '.join(key)}) IN ({sql})", table, result, params=list(params))
    for fast in collector.fast_deletes:
        table, key = fast.model._meta.db_table, _key_columns(fast.model)
        sql, params = fast.values("pk").query.sql_with_params()
        _export(f"SELECT * FROM {table} WHERE ({', '.join(key)}) IN ({sql})", table, result, params=list(params))
    collector.delete()


def _key_columns(model) -> tuple[str, ...]:
    """The primary key's columns: one, or several for a composite key (question vectors, request
    keys), whose `pk.column` is None."""
    pk = model._meta.pk
    return tuple(field.column for field in pk.fields) if isinstance(pk, CompositePrimaryKey) else (pk.column,)


def _export(query: str, table: str, result: ArchiveResult, *, params: list | None = None) -> None:
    """Append the query's rows to `<table>.csv.gz` in the archive (CSV, a header line first), in one
    pass: the row count is the COPY's own. COPY takes no parameters: a query with some is
    materialised in a temporary table first."""
    path = result.folder / f"{table}.csv.gz"
    first = not path.exists()
    out = None
    with connection.cursor() as cursor:
        if params:
            cursor.execute(f"CREATE TEMPORARY TABLE archive_rows ON COMMIT DROP AS {query}", params)
            query = "SELECT * FROM archive_rows"
        try:
            with cursor.cursor.copy(
                f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER {'true' if first else 'false'})"
            ) as copy:
                for chunk in copy:
                    out = out or gzip.open(path, "ab")
                    out.write(chunk)
        finally:
            if out is not None:
                out.close()
        rows = cursor.cursor.rowcount
        if params:
            cursor.execute("DROP TABLE archive_rows")
    if rows > 0:
        result.files.setdefault(path.name, {"rows": 0})["rows"] += rows
    elif first and path.exists():  # a header and nothing else
        path.unlink()


def _counters_forget(month: date) -> None:
    """Take the month out of the counters the ledger's triggers keep (a detached partition fires no
    trigger): its days' counts go, and the all-time score bins lose what those days held."""
    end = date(month.year + month.month // 12, month.month % 12 + 1, 1)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ledger_routescoretotal AS t SET decisions = t.decisions - m.decisions "
            "FROM (SELECT route_id, score_bin, sum(decisions) AS decisions FROM ledger_routescorecount "
            "WHERE day >= %s AND day < %s GROUP BY 1, 2) AS m "
            "WHERE t.route_id = m.route_id AND t.score_bin = m.score_bin",
            [month, end],
        )
        cursor.execute("DELETE FROM ledger_routescorecount WHERE day >= %s AND day < %s", [month, end])
        cursor.execute("DELETE FROM ledger_routedaycount WHERE day >= %s AND day < %s", [month, end])
        cursor.execute(
            "DELETE FROM ledger_routecutoffcount WHERE hour >= %s AND hour < %s",
            [datetime.combine(month, time(), UTC), datetime.combine(end, time(), UTC)],
        )


def _orphan_passages_delete(result: ArchiveResult) -> None:
    """Passages of the month's decisions that no row of any table refers to any more: no decision
    of another month logged them, and no row points at them.

    No index holds the decisions' passage ids, so the decisions left of the passages' routes are
    read once (the month's own partitions are gone by now), each id probed in a hash of the month's
    passages; an archive runs once a month. Deleting them reads those decisions once more: the
    passages' delete trigger (ledger migration 0024) checks that no decision logged one.
    """
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE archive_passages")  # a temporary table: the planner must know it is the small side
        cursor.execute(
            f"DELETE FROM archive_passages a USING {Decision._meta.db_table} d "
            "CROSS JOIN LATERAL unnest(d.passage_ids) AS l(id) "
            "WHERE l.id = a.id AND d.route_id IN "
            "(SELECT DISTINCT o.route_id FROM ledger_passage p JOIN archive_passages c ON c.id = p.id "
            "JOIN ledger_passageorigin o ON o.id = p.origin_id)"
        )
    references = " AND ".join(
        f"NOT EXISTS (SELECT 1 FROM {rel.related_model._meta.db_table} x WHERE x.{rel.field.column} = p.id)"
        for rel in Passage._meta.related_objects
        if not rel.many_to_many
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE archive_orphans ON COMMIT DROP AS "
            "SELECT p.id FROM ledger_passage p JOIN archive_passages a ON a.id = p.id"
            + (f" WHERE {references}" if references else "")
        )
    _passages_export(result)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM ledger_passage WHERE id IN (SELECT id FROM archive_orphans)")
        cursor.execute("DROP TABLE archive_orphans")
        cursor.execute("DROP TABLE archive_passages")


_PASSAGE_FILE_COLUMNS = (
    "p.id, p.external_id, o.corpus_snapshot, t.text AS text, o.source, "
    "coalesce(p.uri, o.uri_prefix || p.external_id) AS uri, p.embedding, p.content_key, o.route_id"
)


def _passages_export(result: ArchiveResult) -> None:
    """Write out the orphaned passages with their text readable: the table may hold it deflated
    (compression.py), which PostgreSQL cannot undo, so each batch is inflated here and the COPY
    reads it back from the parameters. The file spells each passage's origin out (route, corpus
    snapshot, source, whole uri) in the columns the table had before origins were kept apart, so files from
    before and after read alike."""
    last = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT p.id, p.text FROM ledger_passage p JOIN archive_orphans o ON o.id = p.id "
                "WHERE p.id > %s ORDER BY p.id LIMIT %s",
                [last, _PASSAGE_BATCH],
            )
            rows = cursor.fetchall()
        if not rows:
            return
        last = rows[-1][0]
        _export(
            f"SELECT {_PASSAGE_FILE_COLUMNS} FROM unnest(%s::bigint[], %s::text[]) AS t(id, text) "
            "JOIN ledger_passage p ON p.id = t.id JOIN ledger_passageorigin o ON o.id = p.origin_id ORDER BY p.id",
            Passage._meta.db_table,
            result,
            params=[[pk for pk, _ in rows], [decompress_text(stored) for _, stored in rows]],
        )


def _write_manifest(result: ArchiveResult) -> str:
    for name, entry in result.files.items():
        entry["sha256"] = hashlib.sha256((result.folder / name).read_bytes()).hexdigest()
    body = json.dumps(
        {"month": f"{result.month:%Y-%m}", "decisions": result.decisions_by_route, "files": result.files},
        indent=2,
        sort_keys=True,
    ).encode()
    (result.folder / "manifest.json").write_bytes(body)
    return hashlib.sha256(body).hexdigest()
