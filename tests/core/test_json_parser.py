"""The API's JSON parser reads a body into the same values whichever of its two paths parses it
(orjson for most bodies, Python's json module for the rest), and refuses the same bodies."""

from __future__ import annotations

import io
import json

import pytest
from rest_framework.exceptions import ParseError

from console.core import parsers
from console.core.parsers import SafeJSONParser


def parse(body: bytes, encoding: str = "utf-8"):
    return SafeJSONParser().parse(io.BytesIO(body), parser_context={"encoding": encoding})


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": [1, -0, 2.5, 1e-400, 1E+308, 0.1e1, true, null, "x\\u00e9\\ud83d\\ude00"]}',
        b'{"a": 1, "a": 2}',
        b'  [ {"b": "\\u0000"} ] ',
        b'{"segments": {"n": 9223372036854775807, "m": -9223372036854775808}}',
    ],
)
def test_a_body_parses_to_the_values_the_json_module_gives(body):
    assert parse(body) == json.loads(body)


@pytest.mark.parametrize(
    "number", [b"18446744073709551616", b"-9223372036854775809", b"123456789012345678901234567890"]
)
def test_an_integer_beyond_64_bits_stays_an_exact_integer(number):
    value = parse(b'{"n": ' + number + b"}")["n"]
    assert isinstance(value, int) and value == int(number)


@pytest.mark.parametrize(
    "body", [b"", b"NaN", b"[1e400]", b'{"a": 1', b"\xef\xbb\xbf{}", b'"a\tb"', b"[" * 5000 + b"]" * 5000]
)
def test_a_body_the_json_module_refuses_is_refused(body):
    with pytest.raises(ParseError):
        parse(body)


def test_a_lone_surrogate_reaches_the_surrogate_check_as_before():
    with pytest.raises(Exception) as caught:
        parse(b'{"text": "\\ud800"}')
    assert "lone surrogate" in str(caught.value)


def test_a_body_in_another_encoding_goes_through_the_json_module(monkeypatch):
    calls = []
    monkeypatch.setattr(parsers.orjson, "loads", lambda raw: calls.append(raw))
    assert parse('{"a": "é"}'.encode("latin-1"), encoding="latin-1") == {"a": "é"}
    assert calls == []


def test_a_plain_body_is_parsed_by_orjson(monkeypatch):
    calls = []
    real = parsers.orjson.loads
    monkeypatch.setattr(parsers.orjson, "loads", lambda raw: calls.append(raw) or real(raw))
    assert parse(b'{"a": [1, 2.5, "three"]}') == {"a": [1, 2.5, "three"]}
    assert len(calls) == 1
