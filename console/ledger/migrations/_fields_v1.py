"""Frozen for migrations: the ledger's own field classes as console/ledger/models.py defined them at
commit 9e2ab6f (2026-12-03), used by ledger 0008, 0011, 0014 and 0018. Never edit this module; a field
that changes how it is stored is a new class in a new module beside it, and a new migration.

Each class deconstructs under the path of the live field it stands for: makemigrations compares
fields by their deconstructed path and arguments, so the migrations' state and the models agree
and no change is reported, while applying the migrations uses the behaviour frozen here. A new
migration that makemigrations writes names the live class; point it at a frozen one instead
(tests/project/test_frozen_migrations.py fails until then).

Django's migration loader skips modules whose name starts with an underscore.
"""

from __future__ import annotations

from django.db import models

from console.ledger.migrations._compression_v1 import compress_text, decompress_text


class DigestField(models.BinaryField):
    """A SHA-256 digest stored as its 32 bytes (bytea), read and written as 64 hex characters."""

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "console.ledger.models.DigestField", args, kwargs

    def from_db_value(self, value, expression, connection):
        return None if value is None else bytes(value).hex()

    def to_python(self, value):
        if isinstance(value, bytes | memoryview):
            return bytes(value).hex()
        return value

    def get_db_prep_value(self, value, connection, prepared=False):
        if isinstance(value, str):
            value = bytes.fromhex(value)
        return super().get_db_prep_value(value, connection, prepared)


class CompressedTextField(models.TextField):
    """Text stored in a bytea column, deflated when that is shorter (`_compression_v1`), read and
    written as `str`."""

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "console.ledger.models.CompressedTextField", args, kwargs

    def db_type(self, connection) -> str:
        return "bytea"

    def from_db_value(self, value, expression, connection):
        return None if value is None else decompress_text(value, connection)

    def get_db_prep_value(self, value, connection, prepared=False):
        value = super().get_db_prep_value(value, connection, prepared)
        return compress_text(value) if isinstance(value, str) else value
