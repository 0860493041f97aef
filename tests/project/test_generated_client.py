"""A client generated from the schema the server serves works against it: openapi-python-client
builds a package from `/api/schema/` (failing on any warning, such as a body it cannot type or
names that clash), and an integrator drives a live server through it: ingest, look a decision up,
page through the route's decisions by cursor, read the route's policy and revalidate it by ETag.

The generated models parse every answer (a required field missing is a KeyError), and the client
sends `Authorization: Bearer <key>`, as every generated client does.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests.disputes.conftest import sign_policy
from tests.factories import make_route, make_token, make_user, record, served_record

# A server of its own and a code generator: about ten seconds.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PACKAGE = "console_api_client"
# No post hooks: the generator would run ruff (or whatever is configured) over its output. JSON
# Lines is text to a client; the generator knows only `text/*` as such.
CONFIG = {"post_hooks": [], "content_type_overrides": {"application/x-ndjson": "text/plain"}}


def _generate(schema: dict, directory: Path):
    (directory / "openapi.json").write_text(json.dumps(schema))
    (directory / "config.json").write_text(json.dumps(CONFIG))
    generator = Path(sys.executable).parent / "openapi-python-client"
    result = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(directory / "openapi.json"),
            "--config",
            str(directory / "config.json"),
            "--output-path",
            str(directory / PACKAGE),
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(directory))


@pytest.fixture
def generated(tmp_path):
    yield lambda schema: _generate(schema, tmp_path)
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def test_a_client_generated_from_the_schema_ingests_looks_up_pages_and_reads_the_policy(live_server, generated):
    route = make_route("it-support")
    sign_policy(route, make_user("client-owner", "policy_owner", route=route))
    token = make_token(make_user("client-integrator", "integrator", route=route))
    schema = httpx.get(
        live_server.url + "/api/schema/",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/vnd.oai.openapi+json"},
    )
    assert schema.status_code == 200, schema.text
    package = generated(schema.json())
    # Every operation's module imports (its models resolve), not only the ones driven below.
    operations = importlib.import_module(PACKAGE + ".api.v1")
    names = [module.name for module in pkgutil.iter_modules(operations.__path__)]
    modules = [importlib.import_module(f"{operations.__name__}.{name}") for name in names]
    assert len(modules) == sum(len(item) for item in schema.json()["paths"].values())
    from console_api_client.api.v1 import (
        v1_decisions_create,
        v1_routes_decisions_list,
        v1_routes_decisions_retrieve,
        v1_routes_policy_retrieve,
    )
    from console_api_client.models import Decision, DecisionBatchRequest, IngestResult, RoutePolicy
    from console_api_client.types import UNSET

    # Closed at the end: a kept-alive connection holds a server thread, and its database session.
    with package.AuthenticatedClient(base_url=live_server.url, token=token, raise_on_unexpected_status=True) as client:
        records = [record(), record(), served_record(), record(), served_record()]
        batch = DecisionBatchRequest.from_dict({"decisions": records})
        sent = v1_decisions_create.sync_detailed(client=client, body=batch)
        assert sent.status_code == 201, sent.content
        assert isinstance(sent.parsed, IngestResult) and (sent.parsed.created, sent.parsed.unchanged) == (5, 0)

        found = v1_routes_decisions_retrieve.sync(slug="it-support", request_id=records[2]["request_id"], client=client)
        assert isinstance(found, Decision)
        assert (found.request_id, found.outcome, found.served_answer) == (
            records[2]["request_id"],
            "served",
            records[2]["served_answer"],
        )

        listed, cursor, pages = [], None, 0
        while True:
            page = v1_routes_decisions_list.sync(slug="it-support", client=client, limit=2, cursor=cursor or UNSET)
            pages += 1
            listed += [decision.request_id for decision in page.results]
            if not page.next_:
                break
            (cursor,) = parse_qs(urlsplit(page.next_).query)["cursor"]
        assert pages == 3 and sorted(listed) == sorted(r["request_id"] for r in records)

        policy = v1_routes_policy_retrieve.sync_detailed(slug="it-support", client=client)
        assert policy.status_code == 200 and isinstance(policy.parsed, RoutePolicy)
        assert policy.parsed.cutoff == 0.85
        unchanged = v1_routes_policy_retrieve.sync_detailed(
            slug="it-support", client=client, if_none_match=policy.headers["ETag"]
        )
        assert unchanged.status_code == 304 and unchanged.content == b""
