"""Schemathesis hooks for the API fuzz run (loaded through SCHEMATHESIS_HOOKS): besides what the
schema generates, send the inputs that once made the API answer 500.

A schema cannot express them (they are valid JSON of the right types), so these hooks draw them:
numbers past a double (10**400) or past single precision in an embedding, ranks past int4, lone
surrogates in every text field, timestamps that leave the calendar in UTC, JSON nested deeply,
the calendar's last day as a filter, non-ASCII digits and NUL in an audit object, NUL in a path
segment. The explicit cases are in tests/project/test_bad_inputs.py; here they meet the rest of
whatever the fuzzer generates.
"""

from __future__ import annotations

import copy
from typing import Any

import schemathesis
from hypothesis import strategies as st

from tests.sample_record import BASE_RECORD

LONE = "\ud800"
HUGE = 10**400
# Deep enough to hit the validators' nesting, shallow enough for the fuzzer's own json.dumps.
NESTED: Any = []
for _ in range(400):
    NESTED = [NESTED]

# One passage, with an embedding, so the poisons below reach the embedding validator too.
RECORD = {
    **copy.deepcopy(BASE_RECORD),
    "request_id": "fuzz-1",
    "passages": [{**BASE_RECORD["passages"][0], "embedding": [0.1, 0.2]}],
}
RECORD_POISON = [
    (("gate", "score"), HUGE),
    (("gate", "cutoff"), HUGE),
    (("passages", 0, "retrieval_score"), HUGE),
    (("passages", 0, "embedding"), [HUGE]),
    (("passages", 0, "embedding"), [1e300]),
    (("passages", 0, "rank"), 2**31),
    (("passages", 0, "rank"), 2**63),
    (("occurred_at",), "0001-01-01T00:00:00+01:00"),
    (("occurred_at",), "9999-12-31T23:59:59-01:00"),
    (("segments", "language"), NESTED),
    (("versions", "model"), NESTED),
    *[
        ((*path,), f"x{LONE}")
        for path in (
            ("request_id",),
            ("route",),
            ("question",),
            ("claim",),
            ("gate", "name"),
            ("passages", 0, "id"),
            ("passages", 0, "text"),
            ("passages", 0, "source"),
            ("passages", 0, "uri"),
            ("versions", "model"),
            ("segments", "language"),
        )
    ],
]
LABEL = {"route": "it-support", "request_id": "fuzz-1", "verdict": "correct", "source": "fuzz"}
QUERY_POISON = [{"to": "9999-12-31"}, {"from": "0001-01-01", "to": "9999-12-31"}]
AUDIT_OBJECTS = ["decision:\u00b2", "decision:1\x00", "decision:" + "9" * 60]  # a URL cannot carry a lone surrogate


def _poisoned(path: tuple, value: Any) -> dict:
    record = copy.deepcopy(RECORD)
    *parents, last = path
    target: Any = record
    for part in parents:
        target = target[part]
    target[last] = value
    return record


def _is(ctx, method: str, path: str) -> bool:
    operation = ctx.operation
    return operation is not None and operation.method.upper() == method and operation.path == path


@schemathesis.hook
def flatmap_body(ctx, body):
    if _is(ctx, "POST", "/api/v1/decisions"):
        bad = st.sampled_from(RECORD_POISON).map(lambda pv: {"decisions": [_poisoned(*pv)]})
        return st.one_of(st.just(body), bad)
    if _is(ctx, "POST", "/api/v1/labels"):
        bad = st.sampled_from(["route", "request_id", "source"]).map(
            lambda field: {"labels": [dict(LABEL, **{field: f"x{LONE}"})]}
        )
        return st.one_of(st.just(body), bad)
    if _is(ctx, "POST", "/api/v1/verify"):
        return st.one_of(
            st.just(body),
            st.just({"text": "Open Settings", "claim": f"Open{LONE}"}),
            st.just({"text": f"a{LONE}", "claim": "a"}),
        )
    return st.just(body)


@schemathesis.hook
def flatmap_query(ctx, query):
    operation = ctx.operation
    if operation is None or operation.method.upper() != "GET":
        return st.just(query)
    if operation.path == "/api/v1/audit/events":
        return st.one_of(st.just(query), st.sampled_from(AUDIT_OBJECTS).map(lambda value: {"object": value}))
    if operation.path.endswith(("/operating-points", "/certified-cutoff", "/calibration")):
        return st.one_of(st.just(query), st.sampled_from(QUERY_POISON))
    return st.just(query)


@schemathesis.hook
def flatmap_path_parameters(ctx, path_parameters):
    if not path_parameters:
        return st.just(path_parameters)
    texts = [name for name, value in path_parameters.items() if isinstance(value, str)]
    if not texts:
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.just({**path_parameters, texts[0]: "a\x00b"}))
