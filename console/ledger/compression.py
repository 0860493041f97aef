"""Passage text as stored: bytea holding the UTF-8 text, deflated when that is shorter.

PostgreSQL's own compression (pglz) never takes a passage of a few hundred characters: it
compresses only values past the TOAST threshold (about 2 kB a row) and only for 25% savings, and
lz4 is not built into the embedded server. Deflate takes such a passage to a little over half.

A stored value is either

* the text's UTF-8 bytes, as they are (short texts, texts that do not shrink, the empty text), or
* the byte 0xFF, the length of the UTF-8 text as 4 bytes big-endian, then the raw deflate stream
  (RFC 1951: no zlib header or checksum; the length checks the result instead).

0xFF never occurs in UTF-8, so the first byte tells the two apart. Readers in Python call
`decompress_text`; SQL that needs the text's length in bytes uses `utf8_length_sql`, and a reader
of only the first characters selects `head_sql` and reads it with `decompress_head`. PostgreSQL
cannot inflate, so SQL never reads the text itself: `text_sha256` stays the SHA-256 of the UTF-8
text, and byte offsets (span checks) are offsets into the UTF-8 text, never into the stored bytes.
"""

from __future__ import annotations

import zlib

MARKER = 0xFF
_HEADER = 5  # the marker and the length
_LEVEL = 6  # zlib's default: level 9 gains nothing on passages of this size


def compress_text(text: str) -> bytes:
    """The stored form of `text` (see the module docstring): deflated only if that saves bytes."""
    data = text.encode()
    if len(data) <= _HEADER:
        return data
    packed = zlib.compress(data, _LEVEL, -zlib.MAX_WBITS)
    if _HEADER + len(packed) >= len(data):
        return data
    return bytes((MARKER,)) + len(data).to_bytes(4, "big") + packed


def decompress_text(stored: bytes | memoryview) -> str:
    """The text a stored value holds; raises ValueError on a deflated value that is damaged."""
    stored = bytes(stored)
    if not stored or stored[0] != MARKER:
        return stored.decode()
    length = int.from_bytes(stored[1:_HEADER], "big")
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    data = inflater.decompress(stored[_HEADER:], length)
    if len(data) != length or not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data.decode()


def _deflated_sql(column: str) -> str:
    """SQL that is true when the value stored in `column` is deflated (it starts with the marker)."""
    return f"substring({column} FROM 1 FOR 1) = '\\x{MARKER:02x}'::bytea"


def utf8_length_sql(column: str) -> str:
    """SQL for the length in bytes of the UTF-8 text stored in `column`, without inflating it."""
    return (
        f"CASE WHEN {_deflated_sql(column)} "
        f"THEN (get_byte({column}, 1) << 24) | (get_byte({column}, 2) << 16) "
        f"| (get_byte({column}, 3) << 8) | get_byte({column}, 4) "
        f"ELSE octet_length({column}) END"
    )


def head_sql(column: str, chars: int) -> str:
    """SQL for a prefix of the value stored in `column` that holds at least the text's first `chars`
    characters (read it with `decompress_head`): UTF-8 takes at most 4 bytes a character, and
    deflate's codes take at most 15 bits a byte, so twice that (and room for block headers) of a
    deflated value always inflates to them."""
    raw, deflated = 4 * chars, _HEADER + 8 * chars + 1024
    return (
        f"CASE WHEN {_deflated_sql(column)} "
        f"THEN substring({column} FROM 1 FOR {deflated}) ELSE substring({column} FROM 1 FOR {raw}) END"
    )


def decompress_head(stored: bytes | memoryview, chars: int) -> str:
    """The first `chars` characters (all, if fewer) of the text whose stored prefix `head_sql` read."""
    stored = bytes(stored)
    if stored[:1] == bytes((MARKER,)):
        data = zlib.decompressobj(-zlib.MAX_WBITS).decompress(stored[_HEADER:], 4 * chars)
    else:
        data = stored[: 4 * chars]
    # A prefix may end inside a character: only that last, incomplete one is dropped.
    return data.decode(errors="ignore")[:chars]
