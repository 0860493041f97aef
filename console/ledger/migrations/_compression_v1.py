"""Frozen for migrations: passage text's stored forms as console/ledger/compression.py wrote and read
them at commit 9e2ab6f (2026-12-03), used by ledger 0011, 0014 and 0019 and by `_fields_v1`. Never
edit this module; a new stored form is a new module beside it and a new migration.

A stored value is the text's UTF-8 bytes; or 0xFF, the UTF-8 length (4 bytes big-endian) and the
raw deflate stream; or 0xFE, a `ledger_passagedictionary` id (2 bytes), the UTF-8 length and the
raw deflate stream made with that dictionary preset. Migrations never compress with a dictionary,
and they read dictionaries through the connection they are given rather than the live module's
per-process cache (a migration's rows may roll back with it).

Django's migration loader skips modules whose name starts with an underscore.
"""

from __future__ import annotations

import zlib

MARKER = 0xFF  # plain deflate
DICTIONARY_MARKER = 0xFE  # deflate with a preset dictionary
_HEADER = 5  # the marker and the length
_DICTIONARY_HEADER = 7  # the marker, the dictionary id and the length
_LEVEL = 6


def compress_text(text: str) -> bytes:
    """The stored form of `text` without a dictionary: deflated only if that saves bytes."""
    data = text.encode()
    if len(data) <= _HEADER:
        return data
    packed = zlib.compress(data, _LEVEL, -zlib.MAX_WBITS)
    header = bytes((MARKER,)) + len(data).to_bytes(4, "big")
    if len(header) + len(packed) >= len(data):
        return data
    return header + packed


def decompress_text(stored: bytes | memoryview, connection) -> str:
    """The text a stored value holds, reading its dictionary (if it names one) through `connection`;
    raises ValueError on a deflated value that is damaged or names a dictionary that does not exist."""
    stored = bytes(stored)
    if not stored or stored[0] not in (MARKER, DICTIONARY_MARKER):
        return stored.decode()
    if stored[0] == MARKER:
        length, inflater, stream = (
            int.from_bytes(stored[1:_HEADER], "big"),
            zlib.decompressobj(-zlib.MAX_WBITS),
            stored[_HEADER:],
        )
    else:
        length = int.from_bytes(stored[3:_DICTIONARY_HEADER], "big")
        dictionary = _dictionary_data(int.from_bytes(stored[1:3], "big"), connection)
        inflater, stream = zlib.decompressobj(-zlib.MAX_WBITS, zdict=dictionary), stored[_DICTIONARY_HEADER:]
    data = inflater.decompress(stream, length)
    if len(data) != length or not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data.decode()


def _dictionary_data(dictionary_id: int, connection) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute("SELECT data FROM ledger_passagedictionary WHERE id = %s", [dictionary_id])
        row = cursor.fetchone()
    if row is None:
        raise ValueError(f"A compressed passage text names passage dictionary {dictionary_id}, which does not exist.")
    return bytes(row[0])
