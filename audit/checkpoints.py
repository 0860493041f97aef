"""Signed checkpoints of the audit chain's head, kept outside the database.

The hash chain alone proves nothing against whoever can write the table: they can edit an event
and recompute every hash after it, or delete the newest events. A checkpoint fixes the head at a
moment — `{"seq", "hash", "at"}` signed with an Ed25519 key that is not in the database — and is
appended to a log file outside the database (and optionally posted to a webhook, for a copy on
another machine). `audit_chain_verify` then checks that the event at every checkpoint's seq still
has the signed hash, and that no checkpoint lies beyond the chain's end.

The key is `AUDIT_SIGNING_KEY` (base64 of the 32-byte Ed25519 private key) or, without it, a
PEM file (`AUDIT_SIGNING_KEY_FILE`, in the data directory by default) created on first use with
mode 0600. Anyone who holds the key or can rewrite the log and the webhook's copy can still forge;
the point is that owning the database is no longer enough.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings

from console.core import outbound

logger = logging.getLogger(__name__)

# Signed bytes start with a fixed label, so a checkpoint signature means nothing in any other protocol.
_DOMAIN = b"abstention-review-console audit checkpoint v1\n"


class SigningKeyMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    seq: int
    hash: str
    at: str  # ISO 8601, UTC
    key_id: str
    signature: str  # base64

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "at": self.at, "key_id": self.key_id, "signature": self.signature}


def signed_bytes(seq: int, head_hash: str, at: str) -> bytes:
    body = json.dumps({"seq": seq, "hash": head_hash, "at": at}, sort_keys=True, separators=(",", ":"))
    return _DOMAIN + body.encode()


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def signing_key(*, create: bool) -> Ed25519PrivateKey:
    """The configured key: the environment's, else the key file, created (0600) when `create`."""
    if settings.AUDIT_SIGNING_KEY:
        raw = base64.b64decode(settings.AUDIT_SIGNING_KEY, validate=True)
        return Ed25519PrivateKey.from_private_bytes(raw)
    path = Path(settings.AUDIT_SIGNING_KEY_FILE)
    if not path.exists():
        if not create:
            raise SigningKeyMissing(f"no audit signing key at {path} (nor AUDIT_SIGNING_KEY)")
        _create_key_file(path)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyMissing(f"{path} does not hold an Ed25519 private key")
    return key


def _create_key_file(path: Path) -> None:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # O_EXCL: two first checkpoints at once must not each write their own key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
        handle.flush()
        os.fsync(handle.fileno())


def sign(key: Ed25519PrivateKey, *, seq: int, head_hash: str, at: str) -> Checkpoint:
    signature = key.sign(signed_bytes(seq, head_hash, at))
    return Checkpoint(
        seq=seq, hash=head_hash, at=at, key_id=key_id(key.public_key()), signature=base64.b64encode(signature).decode()
    )


def signature_valid(public_key: Ed25519PublicKey, checkpoint: dict[str, Any]) -> bool:
    try:
        signature = base64.b64decode(checkpoint["signature"], validate=True)
        public_key.verify(signature, signed_bytes(checkpoint["seq"], checkpoint["hash"], checkpoint["at"]))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return False
    return True


def log_path() -> Path:
    return Path(settings.AUDIT_CHECKPOINT_LOG)


def log_append(checkpoint: Checkpoint) -> None:
    """Append one JSON line, under an exclusive lock, flushed to disk before returning."""
    path = log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(checkpoint.as_dict(), sort_keys=True, separators=(",", ":")) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def log_read() -> tuple[list[dict[str, Any]], list[str]]:
    """Every checkpoint in the log, in file order, and a problem for each line that is not one."""
    path = log_path()
    if not path.exists():
        return [], []
    entries, problems = [], []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not (
                    isinstance(entry, dict)
                    and isinstance(entry.get("seq"), int)
                    and isinstance(entry.get("hash"), str)
                    and isinstance(entry.get("at"), str)
                ):
                    raise ValueError
            except ValueError:
                problems.append(f"checkpoint log line {number} is not a checkpoint")
                continue
            entry["line"] = number
            entries.append(entry)
    return entries, problems


def webhook_post(checkpoint: Checkpoint) -> bool:
    """POST the checkpoint to AUDIT_CHECKPOINT_WEBHOOK through the outbound client. A failure is
    logged, never raised: the local log already holds the checkpoint, and the next one is posted in
    a few minutes."""
    url = settings.AUDIT_CHECKPOINT_WEBHOOK
    if not url:
        return False
    try:
        outbound.post(
            url,
            json.dumps(checkpoint.as_dict()).encode(),
            headers={"Content-Type": "application/json"},
            target="the checkpoint webhook",
            timeout=settings.AUDIT_CHECKPOINT_WEBHOOK_TIMEOUT,
        )
    except outbound.OutboundError as exc:
        logger.warning("audit checkpoint webhook failed: %s", exc)
        return False
    return True
