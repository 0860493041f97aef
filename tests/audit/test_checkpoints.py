"""Signed checkpoints: whoever owns the database cannot re-chain an edit or drop the newest events
without `audit_verify` naming it, because the head was signed with a key that is not in the database."""

from __future__ import annotations

import base64
import json
import logging
import stat
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.db import transaction

from audit import checkpoints, tasks
from audit.models import Action, AuditEvent
from audit.selectors import audit_chain_verify
from audit.services import Actor, audit_checkpoint_create, audit_record
from tests.audit.attack import delete_newest, rechain_after_edit


def _append(n: int) -> None:
    with transaction.atomic():
        for i in range(n):
            audit_record(
                actor=Actor.system("test"),
                action=Action.ROUTE_UPDATED,
                object_type="route",
                object_id=i,
                payload={"i": i},
                route="it-support",
            )


def _log_lines(settings) -> list[dict]:
    return [json.loads(line) for line in settings.AUDIT_CHECKPOINT_LOG.read_text().splitlines()]


def _head() -> tuple[int, str]:
    return AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()


def test_a_checkpoint_signs_the_head_into_the_log_with_a_private_key_file(db, settings, capsys):
    _append(3)
    call_command("audit_checkpoint")
    assert capsys.readouterr().out.startswith("signed seq 3")
    [line] = _log_lines(settings)
    assert (line["seq"], line["hash"]) == _head()
    key_file = settings.AUDIT_SIGNING_KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    assert checkpoints.signature_valid(key.public_key(), line)
    assert not checkpoints.signature_valid(Ed25519PrivateKey.generate().public_key(), line)
    # Nothing new: nothing signed. New events: a new line.
    call_command("audit_checkpoint")
    assert "already checkpointed" in capsys.readouterr().out
    _append(2)
    assert tasks.audit_checkpoint.delay().get()["seq"] == 5
    assert [entry["seq"] for entry in _log_lines(settings)] == [3, 5]
    result = audit_chain_verify()
    assert result["ok"] is True and result["checkpoints"]["count"] == 2 and result["checkpoints"]["latest_seq"] == 5


def test_the_key_can_come_from_the_environment(db, settings):
    key = Ed25519PrivateKey.generate()
    settings.AUDIT_SIGNING_KEY = base64.b64encode(
        key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    ).decode()
    _append(1)
    result = audit_checkpoint_create()
    assert result["signed"] and result["key_id"] == checkpoints.key_id(key.public_key())
    assert not settings.AUDIT_SIGNING_KEY_FILE.exists()
    assert audit_chain_verify()["ok"] is True


def test_the_checkpoint_runs_on_the_beat_schedule():
    entry = django_settings.CELERY_BEAT_SCHEDULE["audit-checkpoint"]
    assert entry["task"] == tasks.audit_checkpoint.name == "audit.audit_checkpoint"
    assert entry["schedule"] == 600.0


@pytest.mark.django_db(transaction=True)
def test_a_rechained_edit_is_named_by_verify(settings, auditor):
    _append(2)
    audit_checkpoint_create()
    _append(4)
    audit_checkpoint_create()
    _append(2)
    early, late = (entry["seq"] for entry in _log_lines(settings))
    target = early + 2
    rechain_after_edit(target, '{"i": 99, "forged": true}')
    assert AuditEvent.objects.get(seq=target).payload["forged"] is True
    # Every link holds: without the checkpoints the edit would pass.
    empty_log = settings.AUDIT_CHECKPOINT_LOG.with_name("none.jsonl")
    real_log, settings.AUDIT_CHECKPOINT_LOG = settings.AUDIT_CHECKPOINT_LOG, empty_log
    assert audit_chain_verify()["ok"] is True
    settings.AUDIT_CHECKPOINT_LOG = real_log
    result = audit_chain_verify()
    assert result["ok"] is False
    assert result["first_bad_seq"] == early + 1 and result["checkpoint_seq"] == late
    assert result["reason"].startswith("rewritten") and f"between seq {early + 1} and {late}" in result["reason"]
    body = auditor.get("/api/v1/audit/verify").json()
    assert body["ok"] is False and body["first_bad_seq"] == early + 1
    with pytest.raises(CommandError, match="rewritten"):
        call_command("audit_verify")
    # And the job will not bless the forged chain with a new checkpoint.
    with pytest.raises(CommandError, match="broken"):
        call_command("audit_checkpoint")
    assert len(_log_lines(settings)) == 2


@pytest.mark.django_db(transaction=True)
def test_deleting_the_newest_events_is_named_as_a_truncated_tail(settings, auditor):
    _append(10)
    audit_checkpoint_create()
    signed_seq, _ = _head()
    delete_newest(3)
    result = audit_chain_verify()
    assert result["ok"] is False and result["first_bad_seq"] == signed_seq - 2
    assert result["reason"].startswith("truncated") and f"signed seq {signed_seq}" in result["reason"]
    assert auditor.get("/api/v1/audit/verify").json()["reason"].startswith("truncated")
    with pytest.raises(CommandError, match="truncated"):
        call_command("audit_verify")
    # New events appended over the gap take the deleted seqs: now the checkpoint's hash differs.
    _append(5)
    result = audit_chain_verify()
    assert result["ok"] is False and result["reason"].startswith("rewritten")


def test_a_checkpoint_forged_without_the_key_is_named(db, settings):
    _append(2)
    audit_checkpoint_create()
    seq, head = _head()
    forged = checkpoints.sign(Ed25519PrivateKey.generate(), seq=seq + 5, head_hash="f" * 64, at="2030-01-01T00:00:00")
    checkpoints.log_append(forged)
    with settings.AUDIT_CHECKPOINT_LOG.open("a") as handle:
        handle.write("not json\n")
    result = audit_chain_verify()
    assert result["ok"] is False and result["first_bad_seq"] is None
    assert any("line 2" in p and "signature is not valid" in p for p in result["checkpoint_problems"])
    assert any("line 3" in p for p in result["checkpoint_problems"])


def test_checkpoints_without_their_key_cannot_vouch(db, settings):
    _append(2)
    audit_checkpoint_create()
    settings.AUDIT_SIGNING_KEY_FILE.unlink()
    result = audit_chain_verify()
    assert result["ok"] is False and "cannot be checked" in result["reason"]


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - the handler's protocol
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_webhook_gets_each_checkpoint_and_its_failure_is_not_fatal(db, settings, caplog):
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings.AUDIT_CHECKPOINT_WEBHOOK = f"http://127.0.0.1:{server.server_port}/checkpoints"
        _append(1)
        assert audit_checkpoint_create()["webhook"] is True
        assert _Receiver.received == _log_lines(settings)
    finally:
        server.shutdown()
        server.server_close()
    settings.AUDIT_CHECKPOINT_WEBHOOK = f"http://127.0.0.1:{server.server_port}/checkpoints"  # nobody listens now
    _append(1)
    with caplog.at_level(logging.WARNING, logger="audit.checkpoints"):
        result = audit_checkpoint_create()
    assert result["signed"] is True and result["webhook"] is False
    assert len(_log_lines(settings)) == 2 and "webhook failed" in caplog.text


def test_the_checkpoint_webhook_obeys_the_egress_policy(db, settings, caplog):
    """The copy meant for another machine goes through the one outbound client: a loopback URL
    is refused unless OUTBOUND_ALLOWED_NETWORKS lists it, and the refusal is logged, not raised."""
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings.OUTBOUND_ALLOWED_NETWORKS = ()
        settings.AUDIT_CHECKPOINT_WEBHOOK = f"http://127.0.0.1:{server.server_port}/checkpoints"
        _append(1)
        with caplog.at_level(logging.WARNING, logger="audit.checkpoints"):
            result = audit_checkpoint_create()
    finally:
        server.shutdown()
        server.server_close()
    assert result["signed"] is True and result["webhook"] is False and _Receiver.received == []
    assert "refused to call the checkpoint webhook" in caplog.text and "loopback" in caplog.text
