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

- ASCII text: casefold is ASCII lower-casing and every offset is a byte offset: lower-case
  the bytes and find the claim (StringZilla's SIMD ``translate`` and ``find``).
- Other text, when the folded claim has an anchor (a run of ASCII characters that only ASCII
  characters of a text fold to; ``folding.ClaimPlan``): find the anchor in the lower-cased
  bytes and check the rest of the claim on either side of each hit with a compiled pattern of
  every byte spelling that folds to it. No decoding, no casefold of the text. If too many hits
  are not matches (a common anchor), hand over to the next path.
- A short text (up to 4 KiB) and a claim without an anchor: one scan of the lower-cased bytes
  with the claim's pattern (``finditer``: leftmost, non-overlapping, whole characters).
- Otherwise: StringZilla's SIMD uncased search (``utf8_uncased_matches``) proposes candidate
  spans. It implements full case folding too but, unlike the rules above, also reports a match
  that only covers part of a character's folding, and uses a newer Unicode version (it folds a
  few characters Python does not know). So every candidate is checked against the claim's
  pattern (Python's folding); a rejected one is retried one character later.
- If candidates keep being rejected (a periodic claim against a periodic text, "sss..." in
  "ßßß..."), casefold the text in chunks and ``str.find`` the folded claim. Only characters
  that fold to more than one code point shift offsets; a chunk without them maps one to one,
  and a chunk with them gets a table of where they are, built only when a hit falls in it.
  A hit that cuts through a character skips ahead by the claim's period, so this stays linear.
- Character offsets of byte ranges come from counting code points (SIMD) up to each match.
"""

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, islice
from typing import Any, Literal, NamedTuple

import stringzilla

from console.core.errors import InvalidInput
from console.verification.folding import ClaimPlan, fold_tables

MAX_CLAIM_CHARS = 2_000
MAX_MATCH_RANGES = 100
VERIFIER_VERSION = "spans-1"

# Misses (anchor hits that are not matches) the anchored search tolerates before it hands over
# to the uncased search: a few per call plus one per 4 KiB keeps its worst case near one pass.
_ANCHOR_MISS_ALLOWANCE = 16
_ANCHOR_MISS_BYTES = 4096
# A text this short and a claim without an anchor: one regular-expression scan of the text is
# cheaper than setting up the uncased search (which costs about 10 microseconds per claim).
_SCAN_UP_TO_BYTES = 4096
# bytes.lower() as a table, for StringZilla's SIMD translate (ASCII letters only, like lower()).
_ASCII_LOWER = bytes(range(256)).lower()
# Rejected uncased candidates tolerated before the search falls back to the full casefold.
_REJECT_ALLOWANCE = 16
_REJECT_BYTES = 4096
# The full casefold works in chunks so that offsets map back one chunk at a time.
_FOLD_CHUNK = 4_096

Decision = Literal["supported", "unsupported_claim"]
Range = tuple[int, int]


class ClaimEmpty(InvalidInput):
    code = "claim_empty"


class ClaimTooLong(InvalidInput):
    code = "claim_too_long"


class TextNotUtf8(InvalidInput):
    code = "text_not_utf8"


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


def verify_span(text: str | EncodedText, claim: str, *, max_ranges: int = MAX_MATCH_RANGES) -> SpanResult:
    """Find the claim in the text; see the module docstring for the rules."""
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
            char_ranges, byte_ranges = _non_ascii_ranges(encoded, plan, limit)
    # tuple.__new__ skips the named tuple's Python-level constructor, a tenth of a short check.
    if len(char_ranges) > max_ranges:
        del char_ranges[max_ranges:], byte_ranges[max_ranges:]
        return _new_result(SpanResult, (True, "supported", byte_ranges, char_ranges, True))
    if char_ranges:
        return _new_result(SpanResult, (True, "supported", byte_ranges, char_ranges, False))
    return _new_result(SpanResult, (False, "unsupported_claim", byte_ranges, char_ranges, False))


_new_result = tuple.__new__
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")


def split_claim_units(claim: str) -> list[str]:
    """Split a long answer into claim units, each verified on its own.

    Rule: a unit ends at every line break (``str.splitlines``) and after ".", "!" or "?" that
    is followed by whitespace; units are stripped and empty ones dropped. Deliberately simple:
    abbreviations are not special-cased ("e.g. this" is two units), a stop without following
    whitespace does not split ("3.5", "example.com"), and neither does a stop followed by a
    closing quote or bracket.
    """
    units = []
    for line in claim.splitlines():
        units.extend(part.strip() for part in _SENTENCE_BREAK.split(line))
    return [unit for unit in units if unit]


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
            details={"max_chars": MAX_CLAIM_CHARS, "chars": len(trimmed)},
        )
    return ClaimPlan(trimmed)


def _ascii_ranges(text: str | bytes, needle: str | bytes, limit: int) -> list[Range]:
    """Ranges of the folded claim in an ASCII text, as str or bytes (the offsets are the same)."""
    if not needle.isascii():
        return []  # an ASCII character never folds to anything else
    lowered = stringzilla.translate(text, _ASCII_LOWER)
    find = stringzilla.find
    width = len(needle)
    ranges: list[Range] = []
    hit = find(lowered, needle)
    while hit >= 0 and len(ranges) < limit:
        ranges.append((hit, hit + width))
        hit = find(lowered, needle, hit + width)
    return ranges


def _non_ascii_ranges(encoded: EncodedText, plan: ClaimPlan, limit: int) -> tuple[list[Range], list[Range]]:
    """(char ranges, byte ranges) of the matches in a text that is not pure ASCII."""
    data = encoded.data
    if plan.anchor:
        byte_ranges = _anchored_byte_ranges(data, plan, limit)
    elif len(data) <= _SCAN_UP_TO_BYTES and plan.pattern is not None:
        byte_ranges = _scanned_byte_ranges(data, plan.pattern, limit)
    else:
        byte_ranges = None
    if byte_ranges is None:
        byte_ranges = _uncased_byte_ranges(data, plan, limit)
    if byte_ranges is not None:
        return (_char_ranges(data, byte_ranges) if byte_ranges else []), byte_ranges
    char_ranges = _folded_char_ranges(encoded.text, plan.folded, limit)
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
        (start, end), = byte_ranges
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
    find = stringzilla.find
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
        if misses > _ANCHOR_MISS_ALLOWANCE + len(data) // _ANCHOR_MISS_BYTES:
            return None
        hit = find(lowered, anchor, hit + 1)
    return ranges


def _anchored_byte_ranges_by_decoding(data: bytes, plan: ClaimPlan, limit: int) -> list[Range] | None:
    """The anchored search for a claim too intricate to spell out as a pattern: the rest of
    the claim is checked on a small decoded window on either side of each hit."""
    lowered = stringzilla.translate(data, _ASCII_LOWER)
    anchor_width = len(plan.anchor)
    misses_left = _ANCHOR_MISS_ALLOWANCE + len(data) // _ANCHOR_MISS_BYTES
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
        if misses_left < 0:
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

    None when too many candidates were rejected. A rejected candidate at ``start`` may hide a
    match that starts there too (StringZilla may have aligned the claim inside a character's
    folding), so that is checked, and the search resumes one character later.
    """
    haystack = stringzilla.Str(data)
    needle = plan.needle
    rejects_left = _REJECT_ALLOWANCE + len(data) // _REJECT_BYTES
    ranges: list[Range] = []
    position = 0
    while len(ranges) < limit:
        for candidate in stringzilla.utf8_uncased_matches(haystack[position:], needle):
            start = candidate.offset_within(haystack)
            stop = start + len(candidate)
            if _folds_to_claim(data, start, stop, plan):
                ranges.append((start, stop))
                if len(ranges) == limit:
                    return ranges
            else:
                break
        else:
            return ranges
        rejects_left -= 1
        if rejects_left < 0:
            return None
        stop = _match_at(data, start, plan)
        if stop is not None:
            ranges.append((start, stop))
            position = stop
        else:
            position = start + _char_width(data[start])
    return ranges


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
    pattern = plan.pattern
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
    characters; where some of them fold to more, drop characters from its front until the
    folding is no longer too long.
    """
    start = max(0, len(window) - len(folded))
    tail_folded = window[start:].casefold()
    if len(tail_folded) > len(folded):
        size = len(tail_folded)
        while size > len(folded):
            size -= len(window[start].casefold())
            start += 1
        tail_folded = window[start:].casefold()
    return window[start:] if tail_folded == folded else None


def _prefix_folding_to(window: str, folded: str) -> str | None:
    """The run of whole characters starting the window whose folding is ``folded``, if any."""
    end = min(len(window), len(folded))
    head_folded = window[:end].casefold()
    if len(head_folded) > len(folded):
        size = len(head_folded)
        while size > len(folded):
            end -= 1
            size -= len(window[end].casefold())
        head_folded = window[:end].casefold()
    return window[:end] if head_folded == folded else None


def _folded_char_ranges(text: str, folded_claim: str, limit: int) -> list[Range]:
    """Char ranges of the matches, found by searching the whole folded text (any claim)."""
    folded = _FoldedText(text)
    width = len(folded_claim)
    period = 0  # computed on the first rejected hit
    ranges: list[Range] = []
    hit = folded.value.find(folded_claim)
    while hit >= 0 and len(ranges) < limit:
        start, end = folded.original(hit), folded.original(hit + width)
        if start is not None and end is not None:
            ranges.append((start, end))
            hit = folded.value.find(folded_claim, hit + width)
            continue
        # The hit cuts through a character. No other hit starts closer than the claim's
        # smallest period; one at exactly the period needs only the next `period` code points
        # checked; otherwise none starts before hit + width - period + 1 (periodicity lemma).
        period = period or _smallest_period(folded_claim)
        if folded.value.startswith(folded_claim[width - period :], hit + width):
            hit += period
        else:
            hit = folded.value.find(folded_claim, hit + width - period + 1)
    return ranges


class _FoldedText:
    """``text.casefold()``, folded in chunks so that its offsets map back one chunk at a time.

    Only characters that fold to more than one code point shift offsets, and they are rare.
    A chunk whose folding kept its length maps one to one; any other gets, on first use, a
    table of those characters: where each one's folding starts and ends, and its own index.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces = [
            text[at : at + _FOLD_CHUNK].casefold() for at in range(0, len(text), _FOLD_CHUNK)
        ]
        self.value = "".join(self.pieces)
        self.piece_starts = list(accumulate(map(len, self.pieces[:-1]), initial=0))
        self.tables: dict[int, tuple[list[int], list[int], list[int]]] = {}

    def original(self, offset: int) -> int | None:
        """The offset in the text, or None when the folded offset cuts through a character."""
        if len(self.value) == len(self.text):
            return offset
        piece = bisect_right(self.piece_starts, offset) - 1
        local = offset - self.piece_starts[piece]
        origin = piece * _FOLD_CHUNK
        if len(self.pieces[piece]) == min(_FOLD_CHUNK, len(self.text) - origin):
            return origin + local
        starts, ends, indexes = self._table(piece)
        entry = bisect_right(starts, local) - 1
        if entry < 0:
            return origin + local
        if local == starts[entry]:
            return origin + indexes[entry]
        if local < ends[entry]:
            return None
        return origin + indexes[entry] + 1 + local - ends[entry]

    def _table(self, piece: int) -> tuple[list[int], list[int], list[int]]:
        if piece not in self.tables:
            origin = piece * _FOLD_CHUNK
            starts: list[int] = []
            ends: list[int] = []
            indexes: list[int] = []
            shift = 0
            chunk_end = origin + _FOLD_CHUNK
            for match in fold_tables().expanding.finditer(self.text, origin, chunk_end):
                index = match.start() - origin
                folded_width = len(match.group().casefold())
                starts.append(index + shift)
                ends.append(index + shift + folded_width)
                indexes.append(index)
                shift += folded_width - 1
            self.tables[piece] = (starts, ends, indexes)
        return self.tables[piece]


def _smallest_period(value: str) -> int:
    """Smallest p > 0 with value[i] == value[i + p] for all i (Knuth–Morris–Pratt borders)."""
    borders = [0] * len(value)
    border = 0
    for index in range(1, len(value)):
        while border and value[index] != value[border]:
            border = borders[border - 1]
        if value[index] == value[border]:
            border += 1
        borders[index] = border
    return len(value) - borders[-1]
