"""PostgreSQL array literals (`{1,2,NULL}`) for the arrays the ingest path sends by the hundred.

psycopg adapts a Python list in Python, element by element, for COPY rows and for the client-side
parameters Django sends alike. A 500-decision batch carries a thousand short arrays in its
decisions' COPY and a dozen of 500 elements in its look-ups and pool entry, and adapting them cost
it about as much as writing the rows themselves (bench/README.md). A literal is one string, which
psycopg passes through and PostgreSQL's array input reads. Each function writes the text that
reads back as exactly the values given: the statement's cast or the column's type says what the
elements are (`%s::bigint[]`, a `bigint[]` column), and a value of the wrong kind is refused there,
never changed. None is NULL.
"""

from collections.abc import Iterable
from datetime import datetime


def int_array(values: Iterable[int | None]) -> str:
    """Integers as decimal text: `str` of an int is exact at any size."""
    return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"


def float_array(values: Iterable[float | None]) -> str:
    """Floats as `repr` writes them, the shortest text that reads back as the same double;
    PostgreSQL reads it correctly rounded, so the double stored is the one given (`inf`, `-inf`
    and `nan` included, which it reads in any case)."""
    return "{" + ",".join("NULL" if value is None else repr(value) for value in values) + "}"


def bool_array(values: Iterable[bool | None]) -> str:
    """Booleans as `t` and `f`; anything else, 1 and 0 included, is refused here."""
    return (
        "{"
        + ",".join(
            _BOOLEANS[value] if value is None or type(value) is bool else _not_boolean(value) for value in values
        )
        + "}"
    )


def text_array(values: Iterable[str | None]) -> str:
    """Strings each in double quotes, with backslash and double quote escaped by a backslash, the
    only two characters an array's quoted element gives a meaning to: braces, commas, spaces and
    the word NULL inside quotes are text."""
    return "{" + ",".join("NULL" if value is None else _quoted(value) for value in values) + "}"


def timestamp_array(values: Iterable[datetime | None]) -> str:
    """Aware datetimes in ISO 8601 with their offset, which `timestamptz` reads as the same instant."""
    return text_array(None if value is None else value.isoformat() for value in values)


_BOOLEANS = {None: "NULL", True: "t", False: "f"}


def _not_boolean(value) -> str:
    raise TypeError(f"a boolean array takes True, False or None, not {value!r}")


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
