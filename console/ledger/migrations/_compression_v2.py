"""Frozen for migrations: the stored form that ledger 0022 added, as console/ledger/compression.py
wrote it on 2026-12-04. Never edit this module; a new stored form is a new module beside it.

0xFD, a `ledger_passagedictionary` id (2 bytes big-endian), the UTF-8 length (4 bytes big-endian),
then one zstd frame made with that dictionary (a trained zstd dictionary), with no checksum, content
size or dictionary id in the frame. The forms before it are `_compression_v1`'s.

Django's migration loader skips modules whose name starts with an underscore.
"""

from __future__ import annotations

import zstandard

from console.ledger.migrations import _compression_v1

TRAINED_MARKER = 0xFD
_DICTIONARY_HEADER = 7  # the marker, the dictionary id and the length


def decompress_text(stored: bytes | memoryview, connection) -> str:
    """The text a stored value of any form up to this one holds, reading its dictionary through
    `connection`; raises ValueError on a damaged value or one naming no dictionary."""
    stored = bytes(stored)
    if not stored or stored[0] != TRAINED_MARKER:
        return _compression_v1.decompress_text(stored, connection)
    length = int.from_bytes(stored[3:_DICTIONARY_HEADER], "big")
    dictionary = zstandard.ZstdCompressionDict(
        _compression_v1._dictionary_data(int.from_bytes(stored[1:3], "big"), connection),
        dict_type=zstandard.DICT_TYPE_FULLDICT,
    )
    try:
        data = zstandard.ZstdDecompressor(dict_data=dictionary).decompress(
            stored[_DICTIONARY_HEADER:], max_output_size=length
        )
    except zstandard.ZstdError as error:
        raise ValueError("A compressed passage text is damaged: its zstd frame does not decode.") from error
    if len(data) != length:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data.decode()
