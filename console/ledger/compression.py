"""Passage text as stored: bytea holding the UTF-8 text, deflated when that is shorter.

PostgreSQL's own compression (pglz) never takes a passage of a few hundred characters: it
compresses only values past the TOAST threshold (about 2 kB a row) and only for 25% savings, and
lz4 is not built into the embedded server. Deflate takes such a passage to a little over half, and
to about a third with a preset dictionary: a lone short text gives deflate nothing earlier to
refer back to, so the stream starts with up to 32 KiB of other passages' text already "seen"
(zlib's `zdict`), and the passage's words become references into it.

A stored value is one of

* the text's UTF-8 bytes, as they are (short texts, texts that do not shrink, the empty text),
* the byte 0xFF, the length of the UTF-8 text as 4 bytes big-endian, then the raw deflate stream
  (RFC 1951: no zlib header or checksum; the length checks the result instead), or
* the byte 0xFE, the id of a `PassageDictionary` as 2 bytes big-endian, the length of the UTF-8
  text as 4 bytes big-endian, then the raw deflate stream made with that dictionary preset.

0xFE and 0xFF never occur in UTF-8, so the first byte tells the three apart. Readers in Python call
`decompress_text`; SQL that needs the text's length in bytes uses `utf8_length_sql`, and a reader
of only the first characters selects `head_sql` and reads it with `decompress_head`. PostgreSQL
cannot inflate, so SQL never reads the text itself: `Passage.text_sha256` is the SHA-256 of the
UTF-8 text (worked out in Python, not stored), and byte offsets (span checks) are offsets into the
UTF-8 text, never into the stored bytes.

Dictionaries are immutable rows (the database refuses to change or delete them, ledger migration
0014), so each process keeps every dictionary it has read, by id, for good: reading a dictionary's
passages costs one query per dictionary a process has not seen yet, never one per row. Writers ask
`newest_dictionary`, which reads the newest dictionary's id again at most every few seconds.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any

MARKER = 0xFF  # plain deflate
DICTIONARY_MARKER = 0xFE  # deflate with a preset dictionary
DICTIONARY_MAX_BYTES = 32 * 1024  # deflate's window: older bytes can never be referred to
_HEADER = 5  # the marker and the length
_DICTIONARY_HEADER = 7  # the marker, the dictionary id and the length
_LEVEL = 6  # zlib's default: level 9 gains nothing on passages of this size

# How long a process trusts its answer to "which dictionary is the newest": a new dictionary is
# rare (the first one, then at most one a day), but until the first exists, every second counts.
_NEWEST_SECONDS = 60.0
_NONE_YET_SECONDS = 1.0


@dataclass(frozen=True)
class PresetDictionary:
    """A dictionary and a deflater that has already read it. Setting 32 KiB as the preset of a fresh
    deflater makes zlib hash all of it, for every passage (about 60 us against 12 for deflate
    alone); a copy of one that has read it skips that (about 35 us)."""

    id: int
    data: bytes
    primed: Any = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        deflater = zlib.compressobj(_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=self.data)
        object.__setattr__(self, "primed", deflater)


# Every dictionary this process has read, by id (they never change), and the newest one as last read.
_dictionaries: dict[int, bytes] = {}
_newest: PresetDictionary | None = None
_newest_until = 0.0  # time.monotonic() after which `_newest` is read again


def compress_text(text: str, dictionary: PresetDictionary | None = None) -> bytes:
    """The stored form of `text` (see the module docstring): deflated, with `dictionary` preset if
    one is given, only if that saves bytes."""
    data = text.encode()
    if dictionary is None:
        if len(data) <= _HEADER:
            return data
        packed = zlib.compress(data, _LEVEL, -zlib.MAX_WBITS)
        header = bytes((MARKER,)) + len(data).to_bytes(4, "big")
    else:
        if len(data) <= _DICTIONARY_HEADER:
            return data
        deflater = dictionary.primed.copy()
        packed = deflater.compress(data) + deflater.flush()
        header = bytes((DICTIONARY_MARKER,)) + dictionary.id.to_bytes(2, "big") + len(data).to_bytes(4, "big")
    if len(header) + len(packed) >= len(data):
        return data
    return header + packed


def decompress_text(stored: bytes | memoryview) -> str:
    """The text a stored value holds; raises ValueError on a deflated value that is damaged."""
    stored = bytes(stored)
    if not stored or stored[0] not in (MARKER, DICTIONARY_MARKER):
        return stored.decode()
    length, inflater, stream = _inflater(stored)
    data = inflater.decompress(stream, length)
    if len(data) != length or not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data.decode()


def _inflater(stored: bytes):
    """(UTF-8 length, an inflater set up for the value's form, the deflate stream) of a deflated value."""
    if stored[0] == MARKER:
        return int.from_bytes(stored[1:_HEADER], "big"), zlib.decompressobj(-zlib.MAX_WBITS), stored[_HEADER:]
    length = int.from_bytes(stored[3:_DICTIONARY_HEADER], "big")
    dictionary = dictionary_data(int.from_bytes(stored[1:3], "big"))
    return length, zlib.decompressobj(-zlib.MAX_WBITS, zdict=dictionary), stored[_DICTIONARY_HEADER:]


def dictionary_data(dictionary_id: int) -> bytes:
    """The bytes of dictionary `dictionary_id`, read from the database the first time this process
    needs them; raises ValueError for an id no dictionary has (a damaged value)."""
    data = _dictionaries.get(dictionary_id)
    if data is None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT data FROM ledger_passagedictionary WHERE id = %s", [dictionary_id])
            row = cursor.fetchone()
        if row is None:
            raise ValueError(
                f"A compressed passage text names passage dictionary {dictionary_id}, which does not exist."
            )
        data = _dictionaries[dictionary_id] = bytes(row[0])
    return data


def newest_dictionary() -> PresetDictionary | None:
    """The dictionary new passages are compressed with (None before the first is built), as read at
    most `_NEWEST_SECONDS` ago (`_NONE_YET_SECONDS` while there was none)."""
    global _newest, _newest_until
    now = time.monotonic()
    if now >= _newest_until:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT id FROM ledger_passagedictionary ORDER BY id DESC LIMIT 1")
            row = cursor.fetchone()
        _newest = None if row is None else PresetDictionary(row[0], dictionary_data(row[0]))
        _newest_until = now + (_NONE_YET_SECONDS if _newest is None else _NEWEST_SECONDS)
    return _newest


def dictionaries_forget() -> None:
    """Drop what this process remembers of dictionaries (tests: their rows roll back)."""
    global _newest, _newest_until
    _dictionaries.clear()
    _newest, _newest_until = None, 0.0


def _deflated_sql(column: str, marker: int) -> str:
    """SQL that is true when the value stored in `column` starts with `marker`."""
    return f"substring({column} FROM 1 FOR 1) = '\\x{marker:02x}'::bytea"


def _uint32_sql(column: str, offset: int) -> str:
    """SQL for the 4 bytes big-endian at `offset` (from 0) of the value stored in `column`."""
    return " | ".join(f"(get_byte({column}, {offset + i}) << {8 * (3 - i)})" for i in range(4))


def utf8_length_sql(column: str) -> str:
    """SQL for the length in bytes of the UTF-8 text stored in `column`, without inflating it."""
    return (
        f"CASE WHEN {_deflated_sql(column, MARKER)} THEN {_uint32_sql(column, 1)} "
        f"WHEN {_deflated_sql(column, DICTIONARY_MARKER)} THEN {_uint32_sql(column, 3)} "
        f"ELSE octet_length({column}) END"
    )


def head_sql(column: str, chars: int) -> str:
    """SQL for a prefix of the value stored in `column` that holds at least the text's first `chars`
    characters (read it with `decompress_head`): UTF-8 takes at most 4 bytes a character, and
    deflate's codes take at most 15 bits a byte (a literal's code; a match of 3 or more bytes takes
    at most 43 bits, its distance reaching into a preset dictionary or not), so twice that (and
    room for block headers) of a deflated value always inflates to them."""
    raw, deflated = 4 * chars, _DICTIONARY_HEADER + 8 * chars + 1024
    return (
        f"CASE WHEN {_deflated_sql(column, MARKER)} OR {_deflated_sql(column, DICTIONARY_MARKER)} "
        f"THEN substring({column} FROM 1 FOR {deflated}) ELSE substring({column} FROM 1 FOR {raw}) END"
    )


def decompress_head(stored: bytes | memoryview, chars: int) -> str:
    """The first `chars` characters (all, if fewer) of the text whose stored prefix `head_sql` read."""
    stored = bytes(stored)
    if stored[:1] in (bytes((MARKER,)), bytes((DICTIONARY_MARKER,))):
        _, inflater, stream = _inflater(stored)
        data = inflater.decompress(stream, 4 * chars)
    else:
        data = stored[: 4 * chars]
    # A prefix may end inside a character: only that last, incomplete one is dropped.
    return data.decode(errors="ignore")[:chars]
