"""Schemathesis against the OpenAPI schema: no generated request may produce a 500.

The fuzzer runs as a subprocess against the live test server with an admin token, so every
operation is reachable; it generates inputs from the schema (valid and invalid) and fails on any
server error. tests/project/fuzz_hooks.py adds inputs a schema cannot describe (numbers past a
double, lone surrogates, NUL, the calendar's edges) that once answered 500.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import ingest, make_route, make_token, make_user, record

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def test_no_generated_request_makes_the_api_fail_with_a_server_error(live_server, tmp_path):
    make_route("it-support")
    ingest([record() for _ in range(3)])
    token = make_token(make_user("fuzz-admin", "admin"))
    schemathesis = Path(sys.executable).parent / "schemathesis"
    result = subprocess.run(
        [
            str(schemathesis),
            "run",
            f"{live_server.url}/api/schema/",
            "--header",
            f"Authorization: Token {token}",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            os.environ.get("FUZZ_EXAMPLES", "15"),
            "--generation-deterministic",
            "--request-timeout",
            "20",
            "--suppress-health-check",
            "all",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env={
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.project.fuzz_hooks",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
    )
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-60:])
    assert result.returncode == 0, tail
    assert "Tested: 0" not in result.stdout and "generated" in result.stdout, tail
