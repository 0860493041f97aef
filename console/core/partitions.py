"""Monthly partitions: generic helpers for tables partitioned by RANGE on a timestamp, one partition
per UTC month, named `<table>_yYYYYmMM`. Nothing here names an app's table; the ledger's use of
them (the decisions and their per-decision tables, the statement checks on their reference to a
decision) is console/ledger/partitions.py, and migrations run frozen copies of this SQL
(console/ledger/migrations/_partitions_v1.py).

PostgreSQL wants the partition key in every unique constraint of a partitioned table, so a
partitioned table's primary key holds its key and nothing else can hold a foreign key to its id
alone. Tables that point at such a table keep the id column and get a statement trigger instead,
`console_reference_check` (`reference_check_sql`), which refuses an INSERT naming a row that does
not exist (the same check a foreign key makes on insert).

Partitions are made on demand: `months_ensure` runs `console_month_partitions`, a function owned by
the migrating role (only a table's owner may add partitions to it) that creates what is missing for
every table of the schema partitioned by range. Each partition is created on its own and attached,
which locks the parent against other schema changes only (SHARE UPDATE EXCLUSIVE), not against
reads and writes, as `CREATE TABLE ... PARTITION OF` would. The check that finds everything there
takes no lock at all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db import connection

# One first creation at a time (a 64-bit advisory lock key; "Partitns" in ASCII).
_LOCK_KEY = 0x506172746974_6E73

ENSURE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION console_month_partitions(months date[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $fn$
DECLARE
    parents text[];
    wanted date[];
    parent text;
    month date;
    part text;
    created integer := 0;
BEGIN
    SELECT coalesce(array_agg(DISTINCT date_trunc('month', m)::date), '{{}}') INTO wanted
      FROM unnest(months) AS m WHERE m IS NOT NULL;
    SELECT coalesce(array_agg(c.relname::text ORDER BY c.relname), '{{}}') INTO parents
      FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND NOT c.relispartition AND p.partstrat = 'r';
    IF NOT EXISTS (
        SELECT 1 FROM unnest(parents) AS t(name), unnest(wanted) AS w(month)
         WHERE to_regclass(format('public.%I', t.name || to_char(w.month, '"_y"YYYY"m"MM'))) IS NULL
    ) THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock({_LOCK_KEY});
    FOREACH parent IN ARRAY parents LOOP
        FOREACH month IN ARRAY wanted LOOP
            part := parent || to_char(month, '"_y"YYYY"m"MM');
            -- pg_class read by a query, which sees what a racer committed while this one waited
            -- on the lock (to_regclass reads a cache that may not have caught up yet)
            CONTINUE WHEN EXISTS (
                SELECT 1 FROM pg_class WHERE relname = part AND relnamespace = 'public'::regnamespace);
            EXECUTE format(
                'CREATE TABLE public.%I (LIKE public.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                'INCLUDING STORAGE INCLUDING COMPRESSION)', part, parent);
            EXECUTE format(
                'ALTER TABLE public.%I ATTACH PARTITION public.%I FOR VALUES FROM (%L) TO (%L)',
                parent, part, month::timestamp AT TIME ZONE 'UTC',
                (month + interval '1 month')::timestamp AT TIME ZONE 'UTC');
            created := created + 1;
        END LOOP;
    END LOOP;
    RETURN created;
END
$fn$;
"""

# A statement trigger standing in for a foreign key to a partitioned table's id (see above):
# TG_ARGV[0] is the referring column, TG_ARGV[1] the table referred to. Both checks here look up
# each distinct referred key by index, one at a time: the `OFFSET 0` keeps the NOT EXISTS a
# subquery run per key instead of an anti-join, which the planner (knowing a statement's few
# hundred new rows against a table of millions) ran as a hash of the whole referred table, every
# partition read in full once per statement (27 ms at 88,000 decisions; seconds at ten million).
REFERENCE_CHECK_FUNCTION = """
CREATE OR REPLACE FUNCTION console_reference_check() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    missing bigint;
BEGIN
    EXECUTE format(
        'SELECT n.%1$I FROM (SELECT DISTINCT %1$I FROM new_rows WHERE %1$I IS NOT NULL) n '
        'WHERE NOT EXISTS (SELECT 1 FROM %2$I r WHERE r.id = n.%1$I OFFSET 0) LIMIT 1', TG_ARGV[0], TG_ARGV[1])
    INTO missing;
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'insert or update on table "%" violates the reference to "%"', TG_TABLE_NAME, TG_ARGV[1]
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (%s)=(%s) is not present in table "%s".', TG_ARGV[0], missing, TG_ARGV[1]);
    END IF;
    RETURN NULL;
END
$fn$;
"""


def reference_check_sql(table: str, column: str, referred: str) -> str:
    """The trigger that makes `table.column` refer to `referred.id` on insert."""
    return (
        f"CREATE TRIGGER {table}_{column}_exists AFTER INSERT ON {table} REFERENCING NEW TABLE AS new_rows "
        f"FOR EACH STATEMENT EXECUTE FUNCTION console_reference_check('{column}', '{referred}')"
    )


def month_of(moment: datetime | date) -> date:
    """The first day of the UTC month `moment` falls in."""
    if isinstance(moment, datetime) and moment.tzinfo:
        moment = moment.astimezone(UTC)
    return date(moment.year, moment.month, 1)


def months_ensure(moments: Iterable[datetime | date], *, cursor=None) -> int:
    """Make sure every partitioned table has a partition for the month of each moment; returns how
    many partitions were created. One round trip; no lock when they all exist."""
    months = sorted({month_of(m) for m in moments})
    if not months:
        return 0
    if cursor is None:
        with connection.cursor() as own:
            return months_ensure(months, cursor=own)
    cursor.execute("SELECT console_month_partitions(%s::date[])", [months])
    return cursor.fetchone()[0]


@dataclass(frozen=True)
class MonthPartition:
    parent: str
    name: str
    month: date
    rows: int  # an estimate (the planner's), cheap at any size
    bytes: int


def month_partitions(*, referred: Collection[str] = (), cursor=None) -> list[MonthPartition]:
    """Every month partition of the schema, oldest month first; within a month, partitions of the
    `referred` tables (those other tables' rows point at) come last, so that detaching in this order
    never leaves a month with rows whose referred row is gone."""
    if cursor is None:
        with connection.cursor() as own:
            return month_partitions(referred=referred, cursor=own)
    cursor.execute(
        """
        SELECT parent.relname, part.relname, part.reltuples::bigint, pg_total_relation_size(part.oid)
          FROM pg_inherits i
          JOIN pg_class part ON part.oid = i.inhrelid
          JOIN pg_class parent ON parent.oid = i.inhparent
          JOIN pg_partitioned_table p ON p.partrelid = parent.oid
          JOIN pg_namespace n ON n.oid = parent.relnamespace
         WHERE n.nspname = 'public' AND part.relname ~ '_y[0-9]{4}m[0-9]{2}$'
        """
    )
    found = []
    for parent, name, rows, size in cursor.fetchall():
        month = date(int(name[-7:-3]), int(name[-2:]), 1)
        found.append(MonthPartition(parent, name, month, max(int(rows), 0), int(size)))
    return sorted(found, key=lambda p: (p.month, p.parent in referred, p.parent))


def table_partition_by_month(
    cursor, *, table: str, key: str, refers: tuple[str, str, str] | None = None, months: Iterable[date] = ()
) -> None:
    """Rebuild `table` as a table partitioned by month on `key`, keeping its rows, indexes,
    constraints and triggers (for migrations; runs as the table's owner, in the migration's
    transaction).

    Unique constraints gain `key` (PostgreSQL requires the partition key in each). A foreign key
    that another table held to this one's id becomes a `console_reference_check` trigger on that
    table. With `refers` = (column, table referred to, its key), `key` is a new column copied from
    the referred row, and the reference becomes a foreign key on (column, key) that follows the
    referred row when its month changes (the ledger then traded that key for a statement check:
    console/ledger/partitions.py). `months` are made in advance besides the rows' own.
    """
    old = f"{table}_unpartitioned"
    cursor.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisunique FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid)",
        [table],
    )
    indexes = cursor.fetchall()
    cursor.execute(
        "SELECT k.conname, k.contype, pg_get_constraintdef(k.oid), "
        "ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum ORDER BY u.n) "
        "FROM pg_constraint k WHERE k.conrelid = %s::regclass AND k.contype IN ('p', 'u', 'f') ORDER BY k.contype DESC",
        [table],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
        [table],
    )
    triggers = cursor.fetchall()
    cursor.execute(
        "SELECT k.conrelid::regclass::text, k.conname, a.attname FROM pg_constraint k "
        "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1] "
        "WHERE k.confrelid = %s::regclass AND k.contype = 'f' AND k.conrelid <> k.confrelid",
        [table],
    )
    referring = cursor.fetchall()
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attidentity <> '' AND NOT attisdropped",
        [table],
    )
    identity = [name for (name,) in cursor.fetchall()]

    for other, name, _ in referring:
        cursor.execute(f'ALTER TABLE {other} DROP CONSTRAINT "{name}"')
    for name, _ in triggers:
        cursor.execute(f'DROP TRIGGER "{name}" ON {table}')
    if refers:
        column, referred, referred_key = refers
        cursor.execute(f"ALTER TABLE {table} ADD COLUMN {key} timestamp with time zone")
        cursor.execute(f"UPDATE {table} t SET {key} = r.{referred_key} FROM {referred} r WHERE r.id = t.{column}")
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {key} SET NOT NULL")
    for name, *_ in constraints:
        cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, *_ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    last_ids = {}
    for name in identity:
        cursor.execute(f"SELECT max({name}) FROM {table}")
        last_ids[name] = cursor.fetchone()[0]
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {name} DROP IDENTITY")
    cursor.execute(f"ALTER TABLE {table} RENAME TO {old}")
    cursor.execute(
        f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE "
        f"INCLUDING COMPRESSION INCLUDING COMMENTS) PARTITION BY RANGE ({key})"
    )
    for name in identity:
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {name} ADD GENERATED BY DEFAULT AS IDENTITY")
        if last_ids[name] is not None:
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, %s), %s)", [table, name, last_ids[name]])
    cursor.execute(f"SELECT DISTINCT date_trunc('month', {key} AT TIME ZONE 'UTC')::date FROM {old}")
    months_ensure([*months, *(m for (m,) in cursor.fetchall())], cursor=cursor)
    cursor.execute(f"INSERT INTO {table} SELECT * FROM {old}")
    cursor.execute(f"DROP TABLE {old}")

    for name, kind, definition, columns in constraints:
        if kind == "f":
            cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
            continue
        wanted = columns if key in columns else [*columns, key]
        kind_sql = "PRIMARY KEY" if kind == "p" else "UNIQUE"
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {kind_sql} ({", ".join(wanted)})')
    if refers:
        column, referred, referred_key = refers
        cursor.execute(
            f'ALTER TABLE {table} ADD CONSTRAINT "{table}_{column}_month_fk" FOREIGN KEY ({column}, {key}) '
            f"REFERENCES {referred} (id, {referred_key}) ON UPDATE CASCADE ON DELETE CASCADE"
        )
    for name, definition, unique in indexes:
        if unique and key not in definition:
            raise ValueError(f"{name} is unique without the partition key {key}: {definition}")
        cursor.execute(definition)
    skipped = f"{table}_{refers[0]}_exists" if refers else None
    for name, definition in triggers:
        if name != skipped:
            cursor.execute(definition)
    for other, _, column in referring:
        cursor.execute(reference_check_sql(other, column, table))
    cursor.execute(f"ANALYZE {table}")
