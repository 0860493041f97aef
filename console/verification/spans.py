"""Span verification: does a claim appear, word for word up to case, in a passage, and where.

Pure functions, no Django, no model; `POST /api/v1/verify` (README "Span verification") is the
contract. A common shortcut reports offsets into a lower-cased copy of the text, which are wrong
as soon as case mapping changes a character's length ("İ", the Kelvin
sign, "ẞ"). Here every offset points into the ORIGINAL text.

Rules
-----
- The claim is trimmed with ``str.strip()``. Empty -> ``ClaimEmpty``; more than
  ``MAX_CLAIM_CHARS`` code points -> ``ClaimTooLong``.
- Matching is case-insensitive by full Unicode case folding (``str.casefold``). Folding works
  character by character with no context (Σ, σ and ς all fold to σ; dotless ı stays ı), so the
  folding of a string is the concatenation of its characters' foldings; the search relies on
  that. There is no Unicode normalisation: precomposed "é" does not match "e" + U+0301, because
  a reported span must be the passage's own characters.
- A match is a run of whole original characters whose folding EQUALS the folded claim.
  Partial-fold rule: an occurrence of the folded claim in the folded text that starts or ends
  inside the folding of one original character is not reported, because no span of the
  original folds to the claim there (claim "s" inside "ß" -> "ss"; claim "i" against "İ" ->
  "i" + U+0307). Such an occurrence blocks nothing: the search goes on one folded position
  later, so a whole-character occurrence overlapping it is still found.
- Matches are taken left to right and do not overlap: the leftmost match is accepted and the
  next one must start at or after its end ("aa" in "aaaa" gives two ranges, not three).
- ``match_ranges`` are ``[start, end)`` byte offsets into ``text.encode("utf-8")`` and
  ``char_ranges`` code-point offsets into ``text``: ``text.encode()[s:e].decode()`` and
  ``text[cs:ce]`` are the same matched span. At most ``max_ranges`` are returned;
  ``truncated`` says whether more existed. ``supported`` means at least one match, whatever
  ``max_ranges`` is.
- A text that has no UTF-8 encoding (a lone surrogate, possible from a JSON ``\\ud800`` escape)
  has no byte offsets -> ``TextNotUtf8``.

How it stays O(len(text)) and close to ``bytes.find``
------------------------------------------------------
The verifier reads a passage as its UTF-8 bytes (``EncodedText``; a ``str`` is encoded on the
way in), which is what its byte offsets point into and what ``bytes.find`` is measured on.
Every fast path below bounds its own work by the text's size and hands over to the next one
past that bound, and the last one is linear whatever the input, so the worst case is linear:
periodic texts of characters whose folding changes length ("ßßß...", "ΣΣΣ...", "ﬃﬃ...",
"İİ...", "ΐΐ...", combining marks) against claims that nearly match everywhere run at 20 MB/s
or more (``bench/verify.py`` times each such family), against about 100 KB/s before.

- ASCII text: casefold is ASCII lower-casing and every offset is a byte offset: lower-case
  the bytes and find the claim (StringZilla's SIMD ``translate`` and ``find``; CPython's
  two-way ``find`` for a needle over 64 bytes, where StringZilla's is text x needle).
- Other text, when the folded claim has an anchor (a run of ASCII characters that only ASCII
  characters of a text fold to; ``folding.ClaimPlan``): find the anchor in the lower-cased
  bytes and check the rest of the claim on either side of each hit with a compiled pattern of
  every byte spelling that folds to it (or, for a long claim, by decoding a window on either
  side: the pattern search is window x claim per hit). No decoding, no casefold of the text.
  If too many hits are not matches (a common anchor), or the misses cost more than about two
  steps per byte of text, hand over to the next path.
- A short text (up to 4 KiB) and a short claim without an anchor: one scan of the lower-cased
  bytes with the claim's pattern (``finditer``: leftmost, non-overlapping, whole characters).
- Otherwise: StringZilla's SIMD uncased search (``utf8_uncased_matches``) proposes candidate
  spans, for the whole claim when it is 16 bytes or less, else for its first 16 bytes. It
  implements full case folding too but, unlike the rules above, also reports a match that
  only covers part of a character's folding, and uses a newer Unicode version (it folds a few
  characters Python does not know). So every candidate is checked against the claim's
  pattern (Python's folding); a rejected one is retried one character later. Too many
  rejects, or StringZilla's scan running under 100 MB/s (it reads the text 64 KB at a time),
  hand over to the last path.
- The linear search: casefold the text in chunks (looking at the deadline between them) and
  ``str.find`` the folded claim (two-way for long needles: it never backtracks). Only
  characters that fold to more than one code point shift offsets; a chunk without them maps
  one to one, and a chunk with them gets the folded start of each character (a running sum
  of folding lengths, numpy), built only when a hit falls in it. An occurrence that cuts
  through a character skips ahead by the claim's smallest period; once such occurrences pile
  up, the rest of the text is searched in bulk: array comparisons for a claim of a short
  period, rolling hashes (each candidate compared in full) for any other.
- Character offsets of byte ranges come from counting code points (SIMD) up to each match.
"""

import random
import re
import time
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, islice
from typing import Any, Literal, NamedTuple

import numpy as np
import stringzilla

from console.core.errors import InvalidInput, ServiceError, detail
from console.core.text_units import split_claim_units  # noqa: F401 (the verifier's public name for it)
from console.verification.folding import ClaimPlan, fold_lengths, smallest_period

MAX_CLAIM_CHARS = 2_000
MAX_MATCH_RANGES = 100
VERIFIER_VERSION = "spans-1"

# Misses (anchor hits that are not matches) the anchored search tolerates before it hands over:
# a few per call plus one per 4 KiB keeps its worst case near one pass.
_ANCHOR_MISS_ALLOWANCE = 16
_ANCHOR_MISS_BYTES = 4096
# A miss of the pattern search costs up to (window bytes) x (claim bytes) steps of the regular
# expression engine, when the text nearly spells the claim at every start in the window. The
# misses may cost that much in all, per byte of text plus a fixed amount; and a claim whose
# window alone costs more is checked by decoding around each hit, in time linear in the claim.
_ANCHOR_MISS_WORK_PER_BYTE = 2
_ANCHOR_MISS_WORK_FIXED = 1 << 17
_ANCHOR_WINDOW_WORK = 1 << 14
# A text this short and a claim without an anchor: one regular-expression scan of the text is
# cheaper than setting up the uncased search (which costs about 10 microseconds per claim). The
# scan tries the pattern at every start, so it is also bounded by (text bytes) x (claim bytes).
_SCAN_UP_TO_BYTES = 4096
_SCAN_MAX_WORK = 1 << 16
# StringZilla's searches compare a needle's first 16 bytes or so with SIMD and the rest one
# candidate at a time: on a periodic text that nearly spells a longer needle everywhere, they
# take time proportional to text x needle (a 4 KB claim ran at 60 KB/s). A longer needle is
# found with CPython's find (two-way: linear), or by its SIMD-sized prefix (the uncased search).
_SIMD_FIND_MAX_NEEDLE = 64
_UNCASED_MAX_NEEDLE = 16
# bytes.lower() as a table, for StringZilla's SIMD translate (ASCII letters only, like lower()).
_ASCII_LOWER = bytes(range(256)).lower()
# Rejected uncased candidates tolerated before the search falls back to the full casefold: a
# few plus one per 4 KiB, and the bytes their checks read at most half the text plus 64 KiB.
_REJECT_ALLOWANCE = 16
_REJECT_BYTES = 4096
_REJECT_WORK_FIXED = 1 << 16
# The uncased search gets the text in chunks, and hands over when slower than this.
_UNCASED_CHUNK = 1 << 16
_UNCASED_MIN_BYTES_PER_SECOND = 100_000_000
# Candidates of a longer claim are checked by decoding rather than with its compiled pattern.
_COMPILE_UP_TO_CHARS = 256
# The full casefold works in chunks, so that a deadline is looked at between them.
_FOLD_CHUNK = 65_536
# The linear search's rejected occurrences (ones that cut through a character): past this many,
# the rest of the text is searched in bulk (numpy), blocks of valid occurrences at a time;
# exactly by array comparisons for a claim of a short period, by rolling hashes otherwise.
_BULK_AFTER_REJECTS = 32
_BULK_MAX_PERIOD = 32
_BULK_BLOCK = 1 << 18

Decision = Literal["supported", "unsupported_claim"]
Range = tuple[int, int]


class ClaimEmpty(InvalidInput):
    code = "claim_empty"


class ClaimTooLong(InvalidInput):
    code = "claim_too_long"


class TextNotUtf8(InvalidInput):
    code = "text_not_utf8"


class TimeBudgetExceeded(ServiceError):
    """The search ran past the caller's deadline (it looks at the clock between chunks of work)."""

    status = 503
    code = "verify_time_budget"


class EncodedText:
    """A passage as the verifier reads it: the text and its UTF-8 bytes.

    Encode a passage once when several claims are checked against it (every claim unit of a
    decision is checked against every logged passage). Raises ``TextNotUtf8`` for a text with
    a lone surrogate (possible from a JSON ``\\ud800`` escape): it has no byte offsets.
    """

    __slots__ = ("text", "data", "is_ascii")

    def __init__(self, text: str) -> None:
        try:
            self.data = text.encode()
        except UnicodeEncodeError:
            raise TextNotUtf8("The text contains a lone surrogate and has no UTF-8 form.") from None
        self.text = text
        self.is_ascii = len(self.data) == len(text)


class SpanResult(NamedTuple):
    """The verdict for one claim against one text. A named tuple: immutable and, unlike a frozen
    dataclass, cheap to build, which matters when thousands of short passages are checked."""

    supported: bool
    decision: Decision
    match_ranges: list[Range]
    char_ranges: list[Range]
    truncated: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "supported": self.supported,
            "decision": self.decision,
            "match_ranges": [[start, end] for start, end in self.match_ranges],
            "char_ranges": [[start, end] for start, end in self.char_ranges],
            "truncated": self.truncated,
        }


class SupportSummary(NamedTuple):
    expected_support: float
    fully_supported: bool


def verify_span(
    text: str | EncodedText, claim: str, *, max_ranges: int = MAX_MATCH_RANGES, deadline: float | None = None
) -> SpanResult:
    """Find the claim in the text; see the module docstring for the rules.

    ``deadline`` (a ``time.monotonic()`` value) makes the linear search raise
    ``TimeBudgetExceeded`` once past it; the other paths bound their own work by the text's size.
    """
    if max_ranges < 0:
        raise ValueError("max_ranges must be >= 0")
    plan = _plan(claim)
    limit = max_ranges + 1  # one more than shown, to know whether the list was truncated
    if type(text) is str and text.isascii():  # code points are bytes: nothing to encode
        char_ranges = _ascii_ranges(text, plan.folded, limit) if plan.searchable else []
        byte_ranges = char_ranges.copy()
    else:
        encoded = text if type(text) is EncodedText else EncodedText(text)
        if not plan.searchable:
            char_ranges, byte_ranges = [], []
        elif encoded.is_ascii:
            char_ranges = _ascii_ranges(encoded.data, plan.needle, limit)
            byte_ranges = char_ranges.copy()
        else:
            char_ranges, byte_ranges = _non_ascii_ranges(encoded, plan, limit, deadline)
    # tuple.__new__ skips the named tuple's Python-level constructor, a tenth of a short check.
    if len(char_ranges) > max_ranges:
        del char_ranges[max_ranges:], byte_ranges[max_ranges:]
        return _new_result(SpanResult, (True, "supported", byte_ranges, char_ranges, True))
    if char_ranges:
        return _new_result(SpanResult, (True, "supported", byte_ranges, char_ranges, False))
    return _new_result(SpanResult, (False, "unsupported_claim", byte_ranges, char_ranges, False))


_new_result = tuple.__new__


def support_summary(unit_found: list[bool]) -> SupportSummary:
    """Support of a claim split into n units of which k were found (docs/statistics.md, "Long answers").

    ``expected_support`` = k / n, ``fully_supported`` = (k == n). A claim has at least one
    unit, so an empty list is a caller error.
    """
    if not unit_found:
        raise ValueError("a claim has at least one unit")
    found = sum(1 for unit in unit_found if unit)
    return SupportSummary(found / len(unit_found), found == len(unit_found))


@lru_cache(maxsize=256)
def _plan(claim: str) -> ClaimPlan:
    """The claim trimmed, checked and planned. Cached because a claim unit is checked against
    every passage of a decision; errors are raised again on every call."""
    trimmed = claim.strip()
    if not trimmed:
        raise ClaimEmpty("The claim is empty.")
    if len(trimmed) > MAX_CLAIM_CHARS:
        raise ClaimTooLong(
            f"The claim has {len(trimmed)} characters; at most {MAX_CLAIM_CHARS} are allowed.",
            details=[detail("claim", "too_long", "is too long", max_chars=MAX_CLAIM_CHARS, chars=len(trimmed))],
        )
    return ClaimPlan(trimmed)


def _ascii_ranges(text: str | bytes, needle: str | bytes, limit: int) -> list[Range]:
    """Ranges of the folded claim in an ASCII text, as str or bytes (the offsets are the same)."""
    if not needle.isascii():
        return []  # an ASCII character never folds to anything else
    lowered = stringzilla.translate(text, _ASCII_LOWER)
    find = stringzilla.find if len(needle) <= _SIMD_FIND_MAX_NEEDLE else type(lowered).find
    width = len(needle)
    ranges: list[Range] = []
    hit = find(lowered, needle)
    while hit >= 0 and len(ranges) < limit:
        ranges.append((hit, hit + width))
        hit = find(lowered, needle, hit + width)
    return ranges


def _non_ascii_ranges(
    encoded: EncodedText, plan: ClaimPlan, limit: int, deadline: float | None = None
) -> tuple[list[Range], list[Range]]:
    """(char ranges, byte ranges) of the matches in a text that is not pure ASCII."""
    data = encoded.data
    if plan.anchor:
        byte_ranges = _anchored_byte_ranges(data, plan, limit)
    elif len(data) <= _SCAN_UP_TO_BYTES and len(data) * len(plan.needle) <= _SCAN_MAX_WORK and plan.pattern is not None:
        byte_ranges = _scanned_byte_ranges(data, plan.pattern, limit)
    else:
        byte_ranges = None
    if byte_ranges is None:
        byte_ranges = _uncased_byte_ranges(data, plan, limit)
    if byte_ranges is not None:
        return (_char_ranges(data, byte_ranges) if byte_ranges else []), byte_ranges
    char_ranges = _folded_char_ranges(encoded.text, plan.folded, limit, deadline, period=plan.period)
    return char_ranges, _byte_ranges(encoded.text, char_ranges)


def _scanned_byte_ranges(data: bytes, pattern: re.Pattern[bytes], limit: int) -> list[Range]:
    """Byte ranges of the matches from one scan of the lower-cased bytes with the claim's
    pattern: ``finditer`` is leftmost-first and non-overlapping, as the rules are."""
    lowered = stringzilla.translate(data, _ASCII_LOWER)
    return [found.span() for found in islice(pattern.finditer(lowered), limit)]


def _char_ranges(data: bytes, byte_ranges: list[Range]) -> list[Range]:
    """The same ranges in code points, counted (SIMD) from the start of the text."""
    # Slicing bytes copies, a memoryview does not; the view costs more to make than a short copy.
    source = memoryview(data) if len(data) > 65_536 else data
    count = stringzilla.utf8_count
    if len(byte_ranges) == 1:  # the usual case, spelled out: this runs for every supported check
        ((start, end),) = byte_ranges
        chars = count(source[:start])
        return [(chars, chars + count(source[start:end]))]
    char_ranges: list[Range] = []
    chars = position = 0
    for start, end in byte_ranges:
        chars += count(source[position:start])
        width = count(source[start:end])
        char_ranges.append((chars, chars + width))
        chars += width
        position = end
    return char_ranges


def _byte_ranges(text: str, char_ranges: list[Range]) -> list[Range]:
    """The same ranges in UTF-8 bytes, measured by encoding the text up to each match."""
    byte_ranges: list[Range] = []
    size = position = 0
    for start, end in char_ranges:
        size += len(text[position:start].encode())
        width = len(text[start:end].encode())
        byte_ranges.append((size, size + width))
        size += width
        position = end
    return byte_ranges


def _anchored_byte_ranges(data: bytes, plan: ClaimPlan, limit: int) -> list[Range] | None:
    """Byte ranges of the matches found through the claim's anchor.

    Around each hit, the claim's pattern is searched from as far before it as ``before`` can
    be spelled to as far after it as ``after`` can. The leftmost match there is the leftmost
    one not yet found: one starting further left has its anchor at an earlier hit, whose
    window held it whole. None when too many hits found nothing (a common anchor).
    """
    anchored_search = plan.anchored_search
    if anchored_search is None:
        return _anchored_byte_ranges_by_decoding(data, plan, limit)
    search, longest_before, longest_rest = anchored_search
    miss_work = (longest_before + longest_rest) * len(plan.needle)
    if miss_work > _ANCHOR_WINDOW_WORK:
        return _anchored_byte_ranges_by_decoding(data, plan, limit)
    work_left = _ANCHOR_MISS_WORK_FIXED + _ANCHOR_MISS_WORK_PER_BYTE * len(data)
    find = stringzilla.find if len(plan.anchor) <= _SIMD_FIND_MAX_NEEDLE else bytes.find
    # In UTF-8, ASCII bytes only ever encode ASCII characters: lower-casing them is safe, and
    # both the anchor and the claim's pattern are written for lower-cased bytes.
    lowered = stringzilla.translate(data, _ASCII_LOWER)
    anchor = plan.anchor
    misses = 0
    ranges: list[Range] = []
    end = 0
    hit = find(lowered, anchor)
    while hit >= 0 and len(ranges) < limit:
        lowest = hit - longest_before
        found = search(lowered, lowest if lowest > end else end, hit + longest_rest)
        if found is not None:
            span = found.span()
            ranges.append(span)
            end = span[1]
            hit = find(lowered, anchor, end)
            continue
        misses += 1
        work_left -= miss_work
        if misses > _ANCHOR_MISS_ALLOWANCE + len(data) // _ANCHOR_MISS_BYTES or work_left < 0:
            return None
        hit = find(lowered, anchor, hit + 1)
    return ranges


def _anchored_byte_ranges_by_decoding(data: bytes, plan: ClaimPlan, limit: int) -> list[Range] | None:
    """The anchored search for a claim too intricate to spell out as a pattern: the rest of
    the claim is checked on a small decoded window on either side of each hit."""
    lowered = stringzilla.translate(data, _ASCII_LOWER)
    anchor_width = len(plan.anchor)
    misses_left = _ANCHOR_MISS_ALLOWANCE + len(data) // _ANCHOR_MISS_BYTES
    # A miss decodes and folds windows of this many bytes; those may add up to half the text.
    miss_bytes = 4 * (len(plan.before) + len(plan.after)) + 4
    bytes_left = _ANCHOR_MISS_WORK_FIXED + len(data) // 2
    ranges: list[Range] = []
    end = 0
    hit = lowered.find(plan.anchor)
    while hit >= 0 and len(ranges) < limit:
        start = _start_folding_to(data, hit, plan.before)
        if start is not None and start >= end:  # else no match, or it overlaps the previous one
            stop = _end_folding_to(data, hit + anchor_width, plan.after)
            if stop is not None:
                ranges.append((start, stop))
                end = stop
                hit = lowered.find(plan.anchor, end)
                continue
        misses_left -= 1
        bytes_left -= miss_bytes
        if misses_left < 0 or bytes_left < 0:
            return None
        hit = lowered.find(plan.anchor, hit + 1)
    return ranges


def _start_folding_to(data: bytes, hit: int, before: str) -> int | None:
    """Where the run of whole characters ending at ``hit`` that folds to ``before`` starts."""
    if not before:
        return hit
    # A character folds to at least one code point and is at most 4 bytes long; decoding drops
    # a character cut by the window's edge.
    window = data[max(0, hit - 4 * len(before)) : hit].decode("utf-8", "ignore")
    matched = _suffix_folding_to(window, before)
    return None if matched is None else hit - len(matched.encode())


def _end_folding_to(data: bytes, position: int, after: str) -> int | None:
    """Where the run of whole characters starting at ``position`` that folds to ``after`` ends."""
    if not after:
        return position
    window = data[position : position + 4 * len(after) + 4].decode("utf-8", "ignore")
    matched = _prefix_folding_to(window, after)
    return None if matched is None else position + len(matched.encode())


def _uncased_byte_ranges(data: bytes, plan: ClaimPlan, limit: int) -> list[Range] | None:
    """Byte ranges of the matches, from StringZilla's candidates checked against the rules.

    None when too many candidates were rejected, or when the search runs slower than
    ``_UNCASED_MIN_BYTES_PER_SECOND``: a few texts (runs of characters whose folding holds
    combining marks, "ΐΐΐ...") slow StringZilla's own scan even for a short needle, so the text
    is given to it ``_UNCASED_CHUNK`` bytes at a time and the clock is read between chunks.
    A rejected candidate at ``start`` may hide a match that starts there too (StringZilla may
    have aligned the claim inside a character's folding), so that is checked, and the search
    resumes one character later.

    A claim longer than StringZilla compares with SIMD is searched by its first 16 bytes or so
    (``_simd_prefix``): every match starts with a candidate of the prefix, and each candidate is
    checked for the whole claim from where it starts. The rejected ones are charged the bytes
    that check reads and may read half the text in all, so the worst case stays linear.
    """
    haystack = stringzilla.Str(data)
    whole = len(plan.needle) <= _UNCASED_MAX_NEEDLE
    needle = plan.needle if whole else _simd_prefix(plan.needle)
    rejects_left = _REJECT_ALLOWANCE + len(data) // _REJECT_BYTES
    work_left = _REJECT_WORK_FIXED + len(data) // 2
    ranges: list[Range] = []
    position = chunk_end = 0
    scanning = 0.0  # seconds inside StringZilla (checking candidates is bounded apart)
    clock = time.perf_counter
    while len(ranges) < limit:
        if position >= chunk_end:
            if position >= len(data):
                return ranges
            if position >= _UNCASED_CHUNK and position < scanning * _UNCASED_MIN_BYTES_PER_SECOND:
                return None
            chunk_end = max(
                _character_start(data, position + _UNCASED_CHUNK), position + _char_width(data[position])
            )  # never empty
        # A candidate is at most 16 code points of 4 bytes: one starting before the chunk's end
        # lies whole in this slice; one starting after it waits for the next chunk.
        rejected = None
        candidates = iter(stringzilla.utf8_uncased_matches(haystack[position : chunk_end + 64], needle))
        while True:
            began = clock()
            candidate = next(candidates, None)
            scanning += clock() - began
            if candidate is None:
                break
            start = candidate.offset_within(haystack)
            if start >= chunk_end:
                break
            stop = start + len(candidate)
            if whole and _folds_to_claim(data, start, stop, plan):
                ranges.append((start, stop))
                position = stop
                if len(ranges) == limit:
                    return ranges
            else:
                rejected = start
                break
        if rejected is None:
            position = max(position, chunk_end)
            continue
        stop = _match_at(data, rejected, plan)
        if stop is not None:
            ranges.append((rejected, stop))
            position = stop
            continue
        rejects_left -= 1
        work_left -= 4 * len(plan.folded)  # the bytes _match_at looks at
        if rejects_left < 0 or work_left < 0:
            return None
        position = rejected + _char_width(data[rejected])
    return ranges


def _character_start(data: bytes, position: int) -> int:
    """The start of the UTF-8 character at ``position`` (the text's length past its end)."""
    if position >= len(data):
        return len(data)
    while 0x80 <= data[position] < 0xC0:
        position -= 1
    return position


def _simd_prefix(needle: bytes) -> bytes:
    """The longest start of the needle, up to ``_UNCASED_MAX_NEEDLE`` bytes, that ends between
    two UTF-8 characters."""
    end = _UNCASED_MAX_NEEDLE
    while end > 0 and 0x80 <= needle[end] < 0xC0:
        end -= 1
    return needle[: end or _char_width(needle[0])]


def _folds_to_claim(data: bytes, start: int, stop: int, plan: ClaimPlan) -> bool:
    pattern = plan.pattern
    if pattern is not None:
        return pattern.fullmatch(data[start:stop].lower()) is not None
    try:
        return data[start:stop].decode().casefold() == plan.folded
    except UnicodeDecodeError:
        return False


def _match_at(data: bytes, start: int, plan: ClaimPlan) -> int | None:
    """The end of the match starting at byte ``start``, if one does."""
    if 0x80 <= data[start] < 0xC0:
        return None  # inside a character
    # A character folds to at least one code point and is at most 4 bytes long.
    window = data[start : start + 4 * len(plan.folded)]
    # Compiling a long claim's pattern costs more (0.1 s at 2,000 characters) than decoding the
    # window of every candidate the uncased search may check before it hands over.
    pattern = plan.pattern if len(plan.folded) <= _COMPILE_UP_TO_CHARS else None
    if pattern is not None:
        found = pattern.match(window.lower())
        return None if found is None else start + found.end()
    matched = _prefix_folding_to(window.decode("utf-8", "ignore"), plan.folded)
    return None if matched is None else start + len(matched.encode())


def _char_width(lead_byte: int) -> int:
    """Bytes of the UTF-8 character starting with this byte (1 for a stray continuation byte)."""
    if lead_byte >= 0xF0:
        return 4
    if lead_byte >= 0xE0:
        return 3
    return 2 if lead_byte >= 0xC0 else 1


def _suffix_folding_to(window: str, folded: str) -> str | None:
    """The run of whole characters ending the window whose folding is ``folded``, if any.

    Every character folds to at least one code point, so the run has at most len(folded)
    characters; where some of them fold to more, the run is the shortest tail whose folding is
    that long, found from a running sum of folding lengths (not a loop over characters: this
    runs at every anchor hit).
    """
    tail = window[max(0, len(window) - len(folded)) :]
    tail_folded = tail.casefold()
    if not tail_folded.endswith(folded):
        return None
    if len(tail_folded) == len(folded):
        return tail
    sizes = np.cumsum(_folding_lengths(tail)[::-1], dtype=np.int64)
    count = int(np.searchsorted(sizes, len(folded)))
    return tail[len(tail) - count - 1 :] if sizes[count] == len(folded) else None


def _prefix_folding_to(window: str, folded: str) -> str | None:
    """The run of whole characters starting the window whose folding is ``folded``, if any."""
    head = window[: len(folded)]
    head_folded = head.casefold()
    if not head_folded.startswith(folded):
        return None
    if len(head_folded) == len(folded):
        return head
    sizes = np.cumsum(_folding_lengths(head), dtype=np.int64)
    count = int(np.searchsorted(sizes, len(folded)))
    return head[: count + 1] if sizes[count] == len(folded) else None


def _folding_lengths(text: str) -> np.ndarray:
    return fold_lengths()[np.frombuffer(text.encode("utf-32-le"), dtype="<u4")]


def _folded_char_ranges(
    text: str, folded_claim: str, limit: int, deadline: float | None = None, *, period: int | None = None
) -> list[Range]:
    """Char ranges of the matches, found by searching the whole folded text (any claim).

    Linear in the text whatever the claim: the text is folded once (in chunks, looking at the
    deadline between them) and searched with ``str.find``, which CPython runs as a two-way
    search for long needles, so it never backtracks. An occurrence is a match when it starts
    and ends where an original character's folding does; the folded start of every character
    is a running sum of their folding lengths (``folding.fold_lengths``), made only when the
    folding changed the length and something was found.

    An occurrence that cuts through a character is skipped without searching again from the
    next position: two occurrences closer than the claim's length are a multiple of its
    smallest period apart (periodicity lemma), so the next one is either ``period`` further,
    which needs only the next ``period`` code points compared, or beyond ``length - period``.
    Where such occurrences pile up (a claim of a short period against a text that repeats it,
    "s" * 99 in "ßßß..."), the rest of the text is searched in bulk (``_bulk_matches``).
    """
    width = len(folded_claim)
    pieces = []
    for at in range(0, len(text), _FOLD_CHUNK):
        pieces.append(text[at : at + _FOLD_CHUNK].casefold())
        _check_deadline(deadline)
    folded = "".join(pieces)
    ranges: list[Range] = []
    hit = folded.find(folded_claim)
    if len(folded) == len(text):  # every character folded to one code point: offsets are the same
        while hit >= 0 and len(ranges) < limit:
            ranges.append((hit, hit + width))
            hit = folded.find(folded_claim, hit + width)
        return ranges
    if hit < 0:
        return ranges
    chunks = _FoldedChunks(text, pieces)
    layout: _FoldLayout | None = None  # the whole text's, once cut occurrences pile up
    period = period or smallest_period(folded_claim)
    rejects = 0
    while hit >= 0 and len(ranges) < limit:
        if layout is None:
            valid = chunks.is_boundary(hit) and chunks.is_boundary(hit + width)
        else:
            valid = layout.boundaries[hit] and layout.boundaries[hit + width]
        if valid:
            ranges.append((hit, hit + width))
            hit = folded.find(folded_claim, hit + width)
            continue
        rejects += 1
        if rejects > _BULK_AFTER_REJECTS:
            layout = _FoldLayout(text, len(folded))
            ranges.extend(_bulk_matches(folded, folded_claim, period, layout, hit + 1, limit - len(ranges), deadline))
            break
        if rejects % 1024 == 0:
            _check_deadline(deadline)
        if period < width and folded.startswith(folded_claim[width - period :], hit + width):
            hit += period
        else:
            hit = folded.find(folded_claim, hit + max(period, width - period + 1))
    return chunks.original_ranges(ranges)


class _FoldedChunks:
    """Maps folded offsets back, one fold chunk at a time: a chunk whose folding kept its length
    maps one to one, any other gets its ``_FoldLayout`` on first use. A text with a few hits
    pays for the chunks they fall in, not for the whole text."""

    def __init__(self, text: str, pieces: list[str]) -> None:
        self.text = text
        self.pieces = pieces
        self.piece_starts = list(accumulate(map(len, pieces[:-1]), initial=0))
        self.folded_length = self.piece_starts[-1] + len(pieces[-1])
        self.layouts: dict[int, _FoldLayout | None] = {}

    def _locate(self, offset: int) -> "tuple[int, int, _FoldLayout | None]":
        """(chunk, offset within its folding, its layout or None when it maps one to one)."""
        chunk = bisect_right(self.piece_starts, offset) - 1
        layout = self.layouts.get(chunk, False)
        if layout is False:
            origin = chunk * _FOLD_CHUNK
            original = self.text[origin : origin + _FOLD_CHUNK]
            piece = self.pieces[chunk]
            layout = None if len(piece) == len(original) else _FoldLayout(original, len(piece))
            self.layouts[chunk] = layout
        return chunk, offset - self.piece_starts[chunk], layout

    def is_boundary(self, offset: int) -> bool:
        if offset >= self.folded_length:
            return True
        _, local, layout = self._locate(offset)
        return layout is None or bool(layout.boundaries[local])

    def original_ranges(self, folded_ranges: list[Range]) -> list[Range]:
        """The same ranges in characters (each end is a boundary, so the lookup is exact)."""
        return [(self._original(start), self._original(end)) for start, end in folded_ranges]

    def _original(self, offset: int) -> int:
        if offset >= self.folded_length:
            return len(self.text)
        chunk, local, layout = self._locate(offset)
        return chunk * _FOLD_CHUNK + (local if layout is None else int(np.searchsorted(layout.starts, local)))


def _check_deadline(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeBudgetExceeded("The verification ran out of its time budget.")


class _FoldLayout:
    """Where each character of a text starts in its folding, for a folding that changed length.

    ``starts[i]`` is the folded offset of character i (``starts[len(text)]`` the folded length);
    ``boundaries[f]`` is 1 when some character's folding starts at folded offset f (or f is the
    end), as bytes for quick indexing in the search loop.
    """

    def __init__(self, text: str, folded_length: int) -> None:
        # As few and as small arrays as will do: on a long text, the time goes into first
        # touching freshly allocated memory as much as into the arithmetic.
        code_points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
        index_type = np.int32 if folded_length < 2**31 - 1 else np.int64
        self.starts = np.empty(len(text) + 1, dtype=index_type)
        self.starts[0] = 0
        np.cumsum(fold_lengths()[code_points], dtype=index_type, out=self.starts[1:])
        marks = np.zeros(folded_length + 1, dtype=np.uint8)
        marks[self.starts] = 1
        self.marks = marks.view(np.bool_)
        self.boundaries = memoryview(marks)  # indexed from Python: a view indexes fast, no copy


def _bulk_matches(
    folded: str, claim: str, period: int, layout: _FoldLayout, start: int, limit: int, deadline: float | None
) -> list[Range]:
    """The leftmost non-overlapping matches at or after folded offset ``start``, in folded offsets,
    from every valid occurrence of the claim, computed a block at a time: exactly for a claim of
    a short period (``_bulk_valid_starts``), else from rolling hashes, each candidate then
    compared in full (``_hashed_candidate_starts``)."""
    width = len(claim)
    exact = period <= _BULK_MAX_PERIOD
    powers = None if exact else _hash_powers(_BULK_BLOCK + width)
    code_points = np.frombuffer(folded.encode("utf-32-le"), dtype="<u4")
    claim_points = np.frombuffer(claim.encode("utf-32-le"), dtype="<u4")
    ranges: list[Range] = []
    position = start
    last_start = len(folded) - width
    block_start = start
    while block_start <= last_start and len(ranges) < limit:
        _check_deadline(deadline)
        block_end = min(block_start + _BULK_BLOCK, last_start + 1)
        if exact:
            valid = _bulk_valid_starts(code_points, claim_points, period, layout.marks, block_start, block_end)
        else:
            valid = _hashed_candidate_starts(code_points, claim_points, layout.marks, block_start, block_end, powers)
        index = 0
        while len(ranges) < limit:
            index = int(np.searchsorted(valid, position, side="left"))
            if index == len(valid):
                break
            found = int(valid[index])
            if exact or folded.startswith(claim, found):
                ranges.append((found, found + width))
                position = found + width
            else:  # a hash collision: rare, and only costs this comparison
                position = found + 1
        block_start = max(block_end, position)
    return ranges


def _bulk_valid_starts(
    code_points: np.ndarray, claim_points: np.ndarray, period: int, marks: np.ndarray, first: int, stop: int
) -> np.ndarray:
    """Sorted folded offsets f in [first, stop) where the claim occurs and starts and ends on a
    character's boundary. The claim is its first ``period`` code points repeated, so it occurs
    at f when those match at f and the text repeats with that period over the rest of the claim:
    ``period`` array comparisons and one running count, whatever the claim's length."""
    width = len(claim_points)
    count = stop - first
    ok = marks[first:stop] & marks[first + width : stop + width]
    for offset in range(period):
        ok &= code_points[first + offset : stop + offset] == claim_points[offset]
    if width > period:
        # breaks[k] says the text does not repeat at k: code_points[k] != code_points[k - period]
        region = code_points[first : stop + width - 1]
        breaks = np.zeros(count + width, dtype=np.int32)
        np.cumsum(region[period:] != region[:-period], dtype=np.int32, out=breaks[period + 1 :])
        # no break over [f + period, f + width)
        ok &= breaks[width : width + count] == breaks[period : period + count]
    return np.flatnonzero(ok) + first


# Rolling hashes of the bulk search, modulo a prime just below 2**21: a code point times a power
# stays below 2**42, so a block of 2**18 of them sums inside int64 with no reduction per term.
# The base is drawn per process, so nobody can aim collisions at it; a collision (about one per
# two million offsets) only costs one comparison of the claim.
_HASH_MODULUS = 2**21 - 9
_HASH_BASE = random.SystemRandom().randrange(2**10, _HASH_MODULUS - 1)


def _hashed_candidate_starts(
    code_points: np.ndarray, claim_points: np.ndarray, marks: np.ndarray, first: int, stop: int, powers: np.ndarray
) -> np.ndarray:
    """Sorted folded offsets f in [first, stop) that start and end on a character's boundary and
    whose window hashes as the claim does: every occurrence among them, maybe a collision.

    With x the code points from ``first`` and ``powers`` B**k, the window at f = first + i holds
    the claim when sum_j x[i + j] B**(i + j) equals B**i times the claim's own sum: a running sum
    and a product per offset, the same few array passes whatever the claim's period.
    """
    width = len(claim_points)
    count = stop - first
    modulus = _HASH_MODULUS
    target = int((claim_points.astype(np.int64) * powers[:width]).sum() % modulus)
    region = code_points[first : stop + width - 1].astype(np.int64)
    sums = np.zeros(len(region) + 1, dtype=np.int64)
    np.cumsum(region * powers[: len(region)], out=sums[1:])
    ok = (sums[width : width + count] - sums[:count] - target * powers[:count]) % modulus == 0
    ok &= marks[first:stop]
    ok &= marks[first + width : stop + width]
    return np.flatnonzero(ok) + first


def _hash_powers(count: int) -> np.ndarray:
    """B**k modulo the hash's prime for k < count, as int64: 1024 small powers times each step
    of B**1024."""
    modulus = _HASH_MODULUS
    small = np.empty(1024, dtype=np.int64)
    value = 1
    for index in range(1024):
        small[index] = value
        value = value * _HASH_BASE % modulus
    steps = np.empty(count // 1024 + 1, dtype=np.int64)
    step = value  # B**1024
    value = 1
    for index in range(len(steps)):
        steps[index] = value
        value = value * step % modulus
    return (steps[:, None] * small[None, :] % modulus).ravel()[:count]
