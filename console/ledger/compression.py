"""Passage text as stored: bytea holding the UTF-8 text, compressed when that is shorter.

PostgreSQL's own compression (pglz) never takes a passage of a few hundred characters: it
compresses only values past the TOAST threshold (about 2 kB a row) and only for 25% savings, and
lz4 is not built into the embedded server. A lone short text gives a compressor nothing earlier to
refer back to, so passages are compressed with a dictionary built from stored passages
(`PassageDictionary`): zstd with a dictionary trained on them takes a passage of 500 characters to
about a third, as deflate with a preset of their text did, in about a tenth of deflate's time
(bench/README.md). Values written with the earlier forms stay as they are and read as before.

A stored value is one of

* the text's UTF-8 bytes, as they are (short texts, texts that do not shrink, the empty text),
* the byte 0xFF, the length of the UTF-8 text as 4 bytes big-endian, then the raw deflate stream
  (RFC 1951: no zlib header or checksum; the length checks the result instead),
* the byte 0xFE, the id of a `PassageDictionary` as 2 bytes big-endian, the length of the UTF-8
  text as 4 bytes big-endian, then the raw deflate stream made with that dictionary preset (the
  dictionary is passage text: the form before trained dictionaries), or
* the byte 0xFD, the id of a trained `PassageDictionary` as 2 bytes big-endian, the length of the
  UTF-8 text as 4 bytes big-endian, then one zstd frame (RFC 8878) made with that dictionary, with
  no checksum, content size or dictionary id of its own (the header holds them).

0xFD to 0xFF never occur in UTF-8, so the first byte tells the forms apart. What a dictionary is
follows from its bytes: a trained zstd dictionary starts with zstd's dictionary magic number, which
passage text cannot (0x37 followed by 0xA4, a continuation byte, is not UTF-8). Readers in Python
call `decompress_text`; SQL that needs the text's length in bytes uses `utf8_length_sql`, and a
reader of only the first characters selects `head_sql` and reads it with `decompress_head`.
PostgreSQL cannot decompress either form, so SQL never reads the text itself: `Passage.text_sha256`
is the SHA-256 of the UTF-8 text (worked out in Python, not stored), and byte offsets (span checks)
are offsets into the UTF-8 text, never into the stored bytes.

Dictionaries are immutable rows (the database refuses to change or delete them, ledger migration
0014), so each process keeps every dictionary it has read, by id, for good: reading a dictionary's
passages costs one query per dictionary a process has not seen yet, never one per row. Writers ask
`newest_dictionary`, which reads the newest dictionary's id again at most every few seconds.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import zstandard

MARKER = 0xFF  # plain deflate
DICTIONARY_MARKER = 0xFE  # deflate with a preset dictionary of passage text
TRAINED_MARKER = 0xFD  # zstd with a trained dictionary
DICTIONARY_MAX_BYTES = 32 * 1024  # deflate's window: the most of a preset that deflate can use
# A trained dictionary's size. On storage.py's 500-character passages at level 3, one of 256 KiB
# stores them in about 154 bytes against 165 for one of 32 KiB (bench/README.md, seventh session),
# in the same time. Each process digests it once (about 1 MB), for every thread.
TRAINED_MAX_BYTES = 256 * 1024
TRAINED_MAGIC = b"\x37\xa4\x30\xec"  # zstd's dictionary magic number, little-endian, as a trained dictionary starts
_HEADER = 5  # the marker and the length
_DICTIONARY_HEADER = 7  # the marker, the dictionary id and the length
_LEVEL = 6  # zlib's default: level 9 gains nothing on passages of this size
# zstd's level with a trained dictionary, on 500-character passages: 3 is within 5% of 9's bytes at
# a seventh of its time; 1 stores about 10% more.
_TRAINED_LEVEL = 3

# How long a process trusts its answer to "which dictionary is the newest": a new dictionary is
# rare (the first one, then at most one a day), but until the first exists, every second counts.
_NEWEST_SECONDS = 60.0
_NONE_YET_SECONDS = 1.0


def is_trained(data: bytes) -> bool:
    """Whether a dictionary's bytes are a trained zstd dictionary (else: passage text, a deflate preset)."""
    return data[:4] == TRAINED_MAGIC


@dataclass(frozen=True)
class PresetDictionary:
    """A dictionary ready to compress with. A preset of passage text comes with a deflater that has
    already read it: setting 32 KiB as the preset of a fresh deflater makes zlib hash all of it, for
    every passage (about 60 us against 12 for deflate alone); a copy of one that has read it skips
    that (about 35 us). A trained dictionary is digested for compression once per process
    (`trained_dictionary`); each thread has a compressor of its own over it (zstd's compressors must
    not be shared between threads, a digested dictionary may be)."""

    id: int
    data: bytes
    primed: Any = field(init=False, compare=False, repr=False)

    @property
    def trained(self) -> bool:
        return is_trained(self.data)

    def __post_init__(self) -> None:
        if self.trained:
            object.__setattr__(self, "primed", threading.local())
        else:
            deflater = zlib.compressobj(_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, zdict=self.data)
            object.__setattr__(self, "primed", deflater)

    def zstd_compressor(self) -> zstandard.ZstdCompressor:
        """This thread's compressor with the trained dictionary."""
        local = self.primed
        compressor = getattr(local, "compressor", None)
        if compressor is None:
            compressor = local.compressor = zstandard.ZstdCompressor(
                level=_TRAINED_LEVEL,
                dict_data=trained_dictionary(self.id, self.data),
                write_checksum=False,
                write_content_size=False,
                write_dict_id=False,
            )
        return compressor


# Trained dictionaries digested for compression and decompression, by id, shared by every thread of
# the process. zstd's digested forms are read-only once made (its manual: a CDict or DDict may be used
# by several threads at once); they are made here, under the lock, before any thread sees them, so
# no two threads make one at the same time. Each thread then keeps only a small context of its own
# (about 34 KiB) where it once kept a digested copy too (about 1 MB for 256 KiB).
_digested: dict[int, zstandard.ZstdCompressionDict] = {}
_digested_lock = threading.Lock()


def trained_dictionary(dictionary_id: int, data: bytes) -> zstandard.ZstdCompressionDict:
    """Dictionary `dictionary_id` (whose bytes are `data`) digested for compressing at the level
    passages are written with and for decompressing, made once per process. A stored dictionary's
    id is at least 1; a candidate not stored (id 0, the build judging one) is digested afresh and
    not kept."""
    if dictionary_id <= 0:
        return _digest(data)
    digested = _digested.get(dictionary_id)
    if digested is None:
        with _digested_lock:
            digested = _digested.get(dictionary_id)
            if digested is None:
                digested = _digested[dictionary_id] = _digest(data)
    return digested


def _digest(data: bytes) -> zstandard.ZstdCompressionDict:
    digested = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
    digested.precompute_compress(level=_TRAINED_LEVEL)
    # A first decompression digests it for decompressing, here rather than in two threads at once.
    frame = zstandard.ZstdCompressor(level=_TRAINED_LEVEL, dict_data=digested).compress(b"passage")
    zstandard.ZstdDecompressor(dict_data=digested).decompress(frame)
    return digested


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
        if dictionary.trained:
            packed = dictionary.zstd_compressor().compress(data)
            marker = TRAINED_MARKER
        else:
            deflater = dictionary.primed.copy()
            packed = deflater.compress(data) + deflater.flush()
            marker = DICTIONARY_MARKER
        header = bytes((marker,)) + dictionary.id.to_bytes(2, "big") + len(data).to_bytes(4, "big")
    if len(header) + len(packed) >= len(data):
        return data
    return header + packed


def decompress_text(stored: bytes | memoryview) -> str:
    """The text a stored value holds; raises ValueError on a deflated value that is damaged."""
    stored = bytes(stored)
    if not stored or stored[0] not in _COMPRESSED:
        return stored.decode()
    if stored[0] == TRAINED_MARKER:
        return _unzstd(stored).decode()
    length, inflater, stream = _inflater(stored)
    data = inflater.decompress(stream, length)
    if len(data) != length or not inflater.eof or inflater.unconsumed_tail:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data.decode()


_COMPRESSED = frozenset((MARKER, DICTIONARY_MARKER, TRAINED_MARKER))
_decompressors = threading.local()  # this thread's zstd decompressor per trained dictionary, by id


def _unzstd(stored: bytes) -> bytes:
    """The UTF-8 bytes of a value stored with a trained dictionary (TRAINED_MARKER)."""
    dictionary_id = int.from_bytes(stored[1:3], "big")
    length = int.from_bytes(stored[3:_DICTIONARY_HEADER], "big")
    by_id = _decompressors.__dict__.setdefault("by_id", {})
    decompressor = by_id.get(dictionary_id)
    if decompressor is None:
        data = dictionary_data(dictionary_id)
        if not is_trained(data):
            raise ValueError(
                f"A compressed passage text names passage dictionary {dictionary_id}, which is not trained."
            )
        decompressor = by_id[dictionary_id] = zstandard.ZstdDecompressor(
            dict_data=trained_dictionary(dictionary_id, data)
        )
    try:
        data = decompressor.decompress(stored[_DICTIONARY_HEADER:], max_output_size=length)
    except zstandard.ZstdError as error:
        raise ValueError("A compressed passage text is damaged: its zstd frame does not decode.") from error
    if len(data) != length:
        raise ValueError("A compressed passage text is damaged: its length does not match its header.")
    return data


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
        if row is None:
            _newest = None
        elif _newest is None or _newest.id != row[0]:
            # The same dictionary keeps its object, and with it each thread's compressor.
            _newest = PresetDictionary(row[0], dictionary_data(row[0]))
        _newest_until = now + (_NONE_YET_SECONDS if _newest is None else _NEWEST_SECONDS)
    return _newest


def dictionaries_forget() -> None:
    """Drop what this process remembers of dictionaries (tests: their rows roll back)."""
    global _newest, _newest_until
    _dictionaries.clear()
    with _digested_lock:
        _digested.clear()
    _decompressors.__dict__.pop("by_id", None)
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
        f"WHEN {_deflated_sql(column, DICTIONARY_MARKER)} OR {_deflated_sql(column, TRAINED_MARKER)} "
        f"THEN {_uint32_sql(column, 3)} "
        f"ELSE octet_length({column}) END"
    )


def head_sql(column: str, chars: int) -> str:
    """SQL for a prefix of the value stored in `column` that holds at least the text's first `chars`
    characters (read it with `decompress_head`): UTF-8 takes at most 4 bytes a character, and
    deflate's codes take at most 15 bits a byte (a literal's code; a match of 3 or more bytes takes
    at most 43 bits, its distance reaching into a preset dictionary or not), so twice that (and
    room for block headers) of a deflated value always inflates to them. A zstd frame decodes only
    whole blocks (128 KiB of text each), so a value stored with a trained dictionary is read whole."""
    raw, deflated = 4 * chars, _DICTIONARY_HEADER + 8 * chars + 1024
    return (
        f"CASE WHEN {_deflated_sql(column, TRAINED_MARKER)} THEN {column} "
        f"WHEN {_deflated_sql(column, MARKER)} OR {_deflated_sql(column, DICTIONARY_MARKER)} "
        f"THEN substring({column} FROM 1 FOR {deflated}) ELSE substring({column} FROM 1 FOR {raw}) END"
    )


def decompress_head(stored: bytes | memoryview, chars: int) -> str:
    """The first `chars` characters (all, if fewer) of the text whose stored prefix `head_sql` read."""
    stored = bytes(stored)
    if stored[:1] == bytes((TRAINED_MARKER,)):
        data = _unzstd(stored)
    elif stored[:1] in (bytes((MARKER,)), bytes((DICTIONARY_MARKER,))):
        _, inflater, stream = _inflater(stored)
        data = inflater.decompress(stream, 4 * chars)
    else:
        data = stored[: 4 * chars]
    # A prefix may end inside a character: only that last, incomplete one is dropped.
    return data.decode(errors="ignore")[:chars]
