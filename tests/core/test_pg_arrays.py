"""Array literals read back as exactly the values written, through a COPY row and through a
client-side parameter (Django's cursor quotes parameters itself), for the values that could be
misread: quotes, backslashes, braces, commas, blanks, the word NULL, and doubles at their edges."""

import math
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import connection

from console.core.pg_arrays import bool_array, float_array, int_array, text_array, timestamp_array

TEXTS = [
    "",
    " ",
    "NULL",
    "null",
    '"',
    '\\"',
    "\\",
    "a\\b",
    "{}",
    "{1,2}",
    "a,b",
    " padded ",
    "line\nbreak\ttab\r",
    "ünïcødé ✓ 中文 𝄞",
    "'; DROP TABLE ledger_decision; --",
    "$$",
    None,
]
FLOATS = [0.0, -0.0, 0.1, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1e-300, 1e16, None]
INTS = [0, -1, 1, 2**63 - 1, -(2**63), 12345678901, None]
TIMES = [
    datetime(2026, 12, 5, 9, 30, 1, 123456, tzinfo=UTC),
    datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=-5, minutes=-30))),
    None,
]


def _through_a_parameter(literal: str, cast: str):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT %s::{cast}", [literal])
        return cursor.fetchone()[0]


def _through_copy(literal: str, cast: str):
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE array_literal_check (value {cast})")
        with cursor.cursor.copy("COPY array_literal_check (value) FROM STDIN") as copy:
            copy.write_row((literal,))
        cursor.execute("SELECT value FROM array_literal_check")
        return cursor.fetchone()[0]


@pytest.mark.django_db
@pytest.mark.parametrize("send", [_through_a_parameter, _through_copy])
@pytest.mark.parametrize(
    ("literal", "cast", "values"),
    [
        (text_array, "text[]", TEXTS),
        (float_array, "double precision[]", FLOATS),
        (int_array, "bigint[]", INTS),
        (timestamp_array, "timestamptz[]", TIMES),
        (bool_array, "boolean[]", [True, False, None, False]),
    ],
)
def test_a_literal_reads_back_as_the_values_written(send, literal, cast, values):
    read = send(literal(values), cast)
    assert read == values
    if literal is float_array:  # equal doubles, and the sign of zero kept too
        assert [None if v is None else math.copysign(1, v) for v in read] == [
            None if v is None else math.copysign(1, v) for v in values
        ]


@pytest.mark.django_db
def test_infinities_and_nan_read_back():
    read = _through_a_parameter(float_array([math.inf, -math.inf, math.nan]), "double precision[]")
    assert read[:2] == [math.inf, -math.inf] and math.isnan(read[2])


@pytest.mark.django_db
def test_empty_arrays_are_empty():
    for literal, cast in ((int_array, "bigint[]"), (text_array, "text[]"), (float_array, "float8[]")):
        assert _through_a_parameter(literal([]), cast) == []


@pytest.mark.django_db
def test_a_value_of_the_wrong_kind_is_refused_not_changed():
    from django.db import DataError, transaction

    with pytest.raises(DataError), transaction.atomic():
        _through_a_parameter(int_array([1, 2.5]), "bigint[]")
    with pytest.raises(DataError), transaction.atomic():
        _through_a_parameter(int_array([True]), "bigint[]")


def test_a_boolean_array_takes_only_booleans():
    """1 and 0 would read as true and false in PostgreSQL; they are refused before they get there."""
    for value in (1, 0, "t", 1.0):
        with pytest.raises(TypeError):
            bool_array([True, value])
