"""Audit payloads hash in a canonical form that survives the database: numbers PostgreSQL's jsonb
writes back in another form (1e16, -0.0, 1e308, 5e-324, integers past 2^53), deep nesting and every
Unicode plane never break the chain, and hostile values reach the API as a 400, never a 500."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from audit.chain import GENESIS_HASH, SCHEME_PYTHON_JSON, event_hash
from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, audit_record
from tests.audit.attack import TRIGGER, superuser_cursor
from tests.governance.conftest import draft_body

HOSTILE_NUMBERS = ["1e16", "-0.0", "1e308", "5e-324", "9007199254740993", "-12345678901234567890123", "1E+2", "0.1"]


def _raw_post(client, url: str, body: str):
    return client.generic("POST", url, body.encode("utf-8", "surrogatepass"), content_type="application/json")


@pytest.mark.parametrize("literal", ["1e16", "-0.0", "1e308", "5e-324"])
def test_a_draft_with_a_number_the_database_rewrites_leaves_the_chain_verifying(reviewer, owner, auditor, literal):
    body = json.dumps(draft_body(cutoff=0.5)).replace('"cutoff": 0.5', f'"cutoff": {literal}')
    response = _raw_post(reviewer, "/api/v1/routes/it-support/policies", body)
    assert response.status_code < 500, response.content[:300]
    verify = auditor.get("/api/v1/audit/verify").json()
    assert verify["ok"] is True, verify


@pytest.mark.parametrize("literal", HOSTILE_NUMBERS)
def test_every_number_json_can_carry_survives_in_a_payload(db, literal):
    value = json.loads(literal)
    with transaction.atomic():
        audit_record(
            actor=Actor.system("test"),
            action=Action.ROUTE_UPDATED,
            object_type="route",
            object_id=1,
            payload={"n": value, "nested": [{"n": value}]},
        )
    result = audit_chain_verify()
    assert result["ok"] is True, result


def test_every_unicode_plane_and_deep_nesting_survive_in_a_payload(db):
    text = "".join(chr(c) for c in (0x41, 0xE9, 0x20AC, 0xFFFD, 0x1F600, 0x20000, 0xE0001, 0x10FFFD, 0x7F, 0x1F))
    deep: object = text
    for _ in range(200):
        deep = [deep, {"k": 1e16}]
    with transaction.atomic():
        audit_record(
            actor=Actor.system("test"),
            action=Action.ROUTE_UPDATED,
            object_type="route",
            object_id=1,
            payload={text: text, "deep": deep, "a\nb": '\\"\t'},
        )
    assert audit_chain_verify()["ok"] is True


def test_a_new_event_stores_the_canonical_text_it_hashed(db):
    with transaction.atomic():
        event = audit_record(
            actor=Actor.system("test"),
            action=Action.ROUTE_UPDATED,
            object_type="route",
            object_id=1,
            payload={"b": 1e16, "a": -0.0, "c": 2**60},
        )
    stored = AuditEvent.objects.get(seq=event.seq)
    assert stored.payload_text == '{"a":0,"b":10000000000000000,"c":"1152921504606846976"}'
    assert stored.payload == {"a": 0, "b": 10000000000000000, "c": "1152921504606846976"}
    assert stored.hash_scheme == 2


def _append_three() -> None:
    for i in range(3):
        with transaction.atomic():
            audit_record(
                actor=Actor.system("t"), action=Action.ROUTE_UPDATED, object_type="r", object_id=i, payload={"i": i}
            )


def _old_scheme_event(seq: int, prev_hash: str, payload: dict) -> str:
    """An event as the console wrote them before scheme 2: hashed from Python's json of the payload.

    The database now accepts only scheme 2 appends (audit migration 0009), so it is written as a
    restore of an old trail would be, by the cluster's superuser with triggers off for its session."""
    at = timezone.now()
    fields = dict(seq=seq, at=at, actor="system:old", action="route_updated", object_type="route", object_id="1")
    digest = event_hash(payload=payload, prev_hash=prev_hash, route="", **fields)
    with superuser_cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(
            "INSERT INTO audit_auditevent (seq, at, actor, action, object_type, object_id, payload, hash_scheme, "
            "route, prev_hash, hash) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, '', %s, %s)",
            [seq, at, fields["actor"], fields["action"], "route", "1", json.dumps(payload), SCHEME_PYTHON_JSON]
            + [prev_hash, digest],
        )
    return digest


@pytest.mark.django_db(transaction=True)
def test_events_hashed_by_the_old_scheme_still_verify_before_and_among_new_ones():
    head = _old_scheme_event(1, GENESIS_HASH, {"i": 1, "text": "naïve"})
    _old_scheme_event(2, head, {"i": 2})
    with transaction.atomic():
        audit_record(actor=Actor.system("test"), action=Action.ROUTE_UPDATED, object_type="route", object_id=1)
    assert list(AuditEvent.objects.order_by("seq").values_list("hash_scheme", flat=True)) == [1, 1, 2]
    result = audit_chain_verify()
    assert result["ok"] is True and result["events"] == 3, result


@pytest.mark.django_db(transaction=True)
def test_a_payload_edited_without_its_canonical_text_is_named(auditor):
    _append_three()
    target = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True)[1]
    with superuser_cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
        cursor.execute("UPDATE audit_auditevent SET payload = '{\"i\": 99}' WHERE seq = %s", [target])
        cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")
    result = auditor.get("/api/v1/audit/verify").json()
    assert (result["ok"], result["first_bad_seq"], result["link"]) == (False, target, "payload")


@pytest.mark.django_db(transaction=True)
def test_an_edited_canonical_text_is_named_with_the_expected_and_stored_hash():
    _append_three()
    target = AuditEvent.objects.order_by("-seq").first()
    with superuser_cursor() as cursor:
        cursor.execute(f"ALTER TABLE audit_auditevent DISABLE TRIGGER {TRIGGER}")
        cursor.execute(
            "UPDATE audit_auditevent SET payload = '{\"i\": 99}', payload_text = '{\"i\":99}' WHERE seq = %s",
            [target.seq],
        )
        cursor.execute(f"ALTER TABLE audit_auditevent ENABLE TRIGGER {TRIGGER}")
    result = audit_chain_verify()
    assert result["first_bad_seq"] == target.seq and result["link"] == "hash"
    assert result["stored_hash"] == target.hash and result["expected_hash"] != target.hash
    with pytest.raises(CommandError) as failure:
        call_command("audit_verify")
    message = str(failure.value)
    assert f"seq {target.seq}" in message and "route_updated" in message
    assert target.hash in message and result["expected_hash"] in message


@pytest.mark.parametrize(
    "field, literal",
    [
        ("cutoff", "1e400"),
        ("cutoff", "-1e400"),
        ("exchange_rate", "NaN"),
        ("band_lower", "Infinity"),
        ("costs", '{"c_w": 1e999, "c_a": 0.5}'),
        ("exchange_answers", '[{"rate": 1' + "0" * 400 + '.5, "accept": true}]'),
        ("rationale", '"nul \\u0000 byte"'),
        ("refusal_message", '"lone \\ud800 surrogate"'),
        ("owner", '"\\udfff"'),
    ],
)
def test_a_draft_carrying_a_non_finite_number_or_unstorable_text_is_a_400(reviewer, owner, auditor, field, literal):
    body = json.dumps(draft_body(**{field: "__HOSTILE__"})).replace('"__HOSTILE__"', literal)
    response = _raw_post(reviewer, "/api/v1/routes/it-support/policies", body)
    assert response.status_code == 400, response.content[:300]
    assert set(response.json()) == {"error"}
    assert auditor.get("/api/v1/audit/verify").json()["ok"] is True


@pytest.mark.parametrize("costs", [{"c_w": 0.5, "c_a": 0.5}, {"c_w": 0.0, "c_a": 0.5, "q": 0.6, "c_v": 0.2}])
def test_costs_under_which_a_gate_never_pays_are_a_400_not_a_500(reviewer, owner, costs):
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(costs=costs), format="json")
    assert response.status_code == 400, response.content[:300]
    assert "costs" in {d["field"] for d in response.json()["error"]["details"]}


def test_an_exported_event_can_be_rehashed_outside_the_console_from_its_canonical_text(route, auditor):
    import hashlib
    from datetime import UTC, datetime

    import rfc8785

    with transaction.atomic():
        audit_record(
            actor=Actor.system("t"), action=Action.ROUTE_UPDATED, object_type="r", object_id=1, payload={"n": 1e16}
        )
    response = auditor.get("/api/v1/audit/export")
    last = json.loads(b"".join(response.streaming_content).decode().splitlines()[-1])
    assert last["hash_scheme"] == 2 and last["payload_text"] == '{"n":10000000000000000}'
    kind, _, oid = last["object"].partition(":")
    document = {
        "scheme": 2,
        "seq": last["seq"],
        "at": datetime.fromisoformat(last["at"]).astimezone(UTC).isoformat(timespec="microseconds"),
        "actor": last["actor"],
        "action": last["action"],
        "object_type": kind,
        "object_id": oid,
        "payload": last["payload_text"],
        "prev_hash": last["prev_hash"],
        "route": last["route"] or "",
    }
    assert hashlib.sha256(rfc8785.dumps(document)).hexdigest() == last["hash"]
