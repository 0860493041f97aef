"""The OpenAPI schema is the contract: schemathesis, with every check and the stateful phase, finds
no response that disagrees with it, for each kind of caller.

The schema is read once with an admin token (it is not public) and written to a file; each caller
then runs the fuzzer against the live test server with its own token, or none. Each run is bounded
(`--max-examples`, a fixed seed) so the four finish in a few minutes on two cores; CONTRACT_EXAMPLES
raises the bound for a longer hunt.

The coverage phase (every boundary and every wrong type of every field, about 150 s a caller here)
runs for the admin, whose requests get past the permission check to the validation it exercises;
for the other callers most of those requests would stop at the same 401/403, which the fuzzing and
stateful phases already check. CONTRACT_ALL_PHASES=1 runs it for every caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.analysis.populations import label_each
from tests.disputes.conftest import sign_policy
from tests.factories import ingest, make_route, make_token, make_user, record, served_record

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
CALLERS = ["admin", "integrator", "grader", None]
EVERY_PHASE = "examples,coverage,fuzzing,stateful"


def _phases(role: str | None) -> str:
    if role == "admin" or os.environ.get("CONTRACT_ALL_PHASES") == "1":
        return EVERY_PHASE
    return "examples,fuzzing,stateful"


def _schema_file(token: str, directory: Path) -> Path:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    path = directory / "openapi.json"
    path.write_text(json.dumps(json.loads(response.content)))
    return path


@pytest.mark.parametrize("role", CALLERS, ids=[role or "no-token" for role in CALLERS])
def test_every_answer_of_the_api_matches_its_schema_for_each_kind_of_caller(live_server, tmp_path, settings, role):
    # The fuzzer sends hundreds of bad tokens from one address (the ignored_auth check); the sign-in
    # throttle would answer them 429 after twenty. The throttle has tests of its own.
    settings.LOGIN_FAILURES_PER_CLIENT = 100_000
    route = make_route("it-support")
    # Refusals and served answers, each labelled, and a signed policy: the statistics documents have
    # rows and bands, the lookups a policy in force, the route's policy an ETag.
    ids = ingest(
        [record(gate={"name": "nli", "score": s, "cutoff": 0.85}) for s in (0.2, 0.5, 0.7)]
        + [served_record() for _ in range(2)]
    )
    label_each(ids, [True, False, True, False, True])
    sign_policy(route, make_user("contract-owner", "policy_owner", route=route))
    schema = _schema_file(make_token(make_user("contract-reader", "admin")), tmp_path)
    headers = []
    if role is not None:
        token = make_token(make_user(f"contract-{role}", role, route=None if role == "admin" else route))
        headers = ["--header", f"Authorization: Token {token}"]
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "--config-file",
            str(Path(__file__).with_name("schemathesis.toml")),
            "run",
            str(schema),
            "--url",
            live_server.url,
            *headers,
            "--checks",
            "all",
            "--phases",
            _phases(role),
            "--max-examples",
            os.environ.get("CONTRACT_EXAMPLES", "10"),
            "--seed",
            "20261101",
            "--workers",
            "1",
            "--request-timeout",
            "20",
            "--suppress-health-check",
            "all",
            "--no-shrink",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
