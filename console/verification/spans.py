"""Span verification: does a claim appear, word for word up to case, in a passage, and where.

Pure functions, no Django, no model. DESIGN.md section 4 ("Span verification") is the contract;
seed 000 describes the endpoint. Its reference reports offsets into a lower-cased copy of the
text, which are wrong as soon as case mapping changes a character's length ("İ", the Kelvin
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
- ASCII text: casefold is ``lower()`` and every offset is a byte offset: one ``lower()`` and
  ``str.find``.
- Other text, when the folded claim has an anchor (its longest run of ASCII characters that
  only ASCII characters of a text can fold to, if 3 long or the whole claim; see
  ``_plan_claim``): search
  the anchor in ``text.encode().lower()`` and check the rest of the claim on a small decoded
  window around each hit. No casefold of the text. Char offsets come from decoding only the
  gaps between matches, from whichever end of the text is nearer. If too many hits are not
  matches (a common anchor), hand over to the next path.
- Otherwise: casefold the text (in chunks) and ``str.find`` the folded claim. Only characters
  that fold to more than one code point shift offsets; a chunk without them maps one to one,
  and a chunk with them gets a table of where they are, built only when a hit falls in it.
  A hit that cuts through a character skips ahead by the claim's period, so a periodic claim
  against a periodic text ("sss..." in "ßßß...") stays linear.
"""

import re
import sys
from bisect import bisect_right
from collections.abc import Callable
from functools import cache, lru_cache
from itertools import accumulate
from typing import Any, Literal, NamedTuple

from console.errors import InvalidInput

MAX_CLAIM_CHARS = 2_000
MAX_MATCH_RANGES = 100
VERIFIER_VERSION = "spans-1"

# A shorter anchor (unless it is the whole claim) hits too often to beat a full casefold.
_MIN_ANCHOR_BYTES = 3
# Misses (anchor hits that are not matches) the anchored search tolerates before it hands over
# to the full casefold: a few per call plus one per 4 KiB keeps its worst case near one pass.
_ANCHOR_MISS_ALLOWANCE = 16
_ANCHOR_MISS_BYTES = 4096
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


class _ClaimPlan(NamedTuple):
    folded: str
    before: str  # folded claim before the anchor
    anchor: bytes  # ASCII; empty when the claim has no usable anchor
    after: str  # folded claim after the anchor


class _FoldTables(NamedTuple):
    ascii_folds: tuple[str, ...]  # foldings of non-ASCII characters that contain ASCII
    expanding: re.Pattern[str]  # characters that fold to more than one code point


def verify_span(text: str, claim: str, *, max_ranges: int = MAX_MATCH_RANGES) -> SpanResult:
    """Find the claim in the text; see the module docstring for the rules."""
    if max_ranges < 0:
        raise ValueError("max_ranges must be >= 0")
    plan = _plan_claim(_trimmed_claim(claim))
    limit = max_ranges + 1  # one more than shown, to know whether the list was truncated
    if text.isascii():
        char_ranges = _ascii_ranges(text, plan.folded, limit)
        byte_ranges = char_ranges.copy()
    else:
        char_ranges, byte_ranges = _non_ascii_ranges(text, plan, limit)
    supported = bool(char_ranges)
    truncated = len(char_ranges) > max_ranges
    if truncated:
        del char_ranges[max_ranges:], byte_ranges[max_ranges:]
    decision: Decision = "supported" if supported else "unsupported_claim"
    return SpanResult(supported, decision, byte_ranges, char_ranges, truncated)


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
    """Support of a claim split into n units of which k were found (DESIGN section 5).

    ``expected_support`` = k / n, ``fully_supported`` = (k == n). A claim has at least one
    unit, so an empty list is a caller error.
    """
    if not unit_found:
        raise ValueError("a claim has at least one unit")
    found = sum(1 for unit in unit_found if unit)
    return SupportSummary(found / len(unit_found), found == len(unit_found))


def _trimmed_claim(claim: str) -> str:
    trimmed = claim.strip()
    if not trimmed:
        raise ClaimEmpty("The claim is empty.")
    if len(trimmed) > MAX_CLAIM_CHARS:
        raise ClaimTooLong(
            f"The claim has {len(trimmed)} characters; at most {MAX_CLAIM_CHARS} are allowed.",
            details={"max_chars": MAX_CLAIM_CHARS, "chars": len(trimmed)},
        )
    return trimmed


@lru_cache(maxsize=256)
def _plan_claim(claim: str) -> _ClaimPlan:
    """Fold the claim and pick its anchor.

    A folded ASCII character can come from a non-ASCII one (Kelvin sign -> "k", "ſ" -> "s",
    "ß" -> "ss", "ﬁ" -> "fi", "İ" -> "i" + U+0307 ...). A position is safe when no such folding
    occurs in the folded claim over it: then, in every match, an ASCII character of the text
    produced it, so the anchor (the longest safe run) appears in the text's lower-cased UTF-8
    bytes as is. Cached because a claim unit is checked against every passage of a decision.
    """
    folded = claim.casefold()
    unsafe = [not char.isascii() for char in folded]
    for ascii_fold in _fold_tables().ascii_folds:
        at = folded.find(ascii_fold)
        while at >= 0:
            unsafe[at : at + len(ascii_fold)] = [True] * len(ascii_fold)
            at = folded.find(ascii_fold, at + 1)
    best_start = best_length = run_start = 0
    for index, is_unsafe in enumerate([*unsafe, True]):
        if is_unsafe:
            if index - run_start > best_length:
                best_start, best_length = run_start, index - run_start
            run_start = index + 1
    if best_length < min(_MIN_ANCHOR_BYTES, len(folded)):
        best_start = best_length = 0
    anchor_end = best_start + best_length
    return _ClaimPlan(
        folded=folded,
        before=folded[:best_start],
        anchor=folded[best_start:anchor_end].encode("ascii"),
        after=folded[anchor_end:],
    )


@cache
def _fold_tables() -> _FoldTables:
    """Scan every code point once (about 0.1 s, on first use) for the two tables."""
    ascii_folds = set()
    expanding = []
    for code_point in range(0x80, sys.maxunicode + 1):
        char = chr(code_point)
        folded = char.casefold()
        if folded == char:
            continue
        if len(folded) > 1:
            expanding.append(char)
        if any(part.isascii() for part in folded):
            ascii_folds.add(folded)
    return _FoldTables(
        ascii_folds=tuple(sorted(ascii_folds)),
        expanding=re.compile("[" + "".join(map(re.escape, expanding)) + "]"),
    )


def _ascii_ranges(text: str, folded_claim: str, limit: int) -> list[Range]:
    if not folded_claim.isascii():
        return []  # an ASCII character never folds to anything else
    lowered = text.lower()
    width = len(folded_claim)
    ranges: list[Range] = []
    hit = lowered.find(folded_claim)
    while hit >= 0 and len(ranges) < limit:
        ranges.append((hit, hit + width))
        hit = lowered.find(folded_claim, hit + width)
    return ranges


def _non_ascii_ranges(text: str, plan: _ClaimPlan, limit: int) -> tuple[list[Range], list[Range]]:
    """(char ranges, byte ranges) of the matches in a text that is not pure ASCII."""
    try:
        data = text.encode()
    except UnicodeEncodeError:
        raise TextNotUtf8("The text contains a lone surrogate and has no UTF-8 form.") from None
    found = _anchored_byte_ranges(data, plan, limit) if plan.anchor else None
    if found is not None:
        byte_ranges, char_widths = found
        char_ranges = _convert_ranges(
            byte_ranges, char_widths, len(data), len(text), lambda a, b: len(data[a:b].decode())
        )
        return char_ranges, byte_ranges
    char_ranges = _folded_char_ranges(text, plan.folded, limit)
    byte_widths = [len(text[start:end].encode()) for start, end in char_ranges]
    byte_ranges = _convert_ranges(
        char_ranges, byte_widths, len(text), len(data), lambda a, b: len(text[a:b].encode())
    )
    return char_ranges, byte_ranges


def _anchored_byte_ranges(
    data: bytes, plan: _ClaimPlan, limit: int
) -> tuple[list[Range], list[int]] | None:
    """Byte ranges and character widths of the matches found through the claim's anchor.

    None when too many anchor hits were not matches. Hits come in text order and so do the
    matches they extend to, because the part before the anchor always folds to the same
    ``plan.before``; each match is found from exactly one hit.
    """
    lowered = data.lower()  # in UTF-8, ASCII bytes only ever encode ASCII characters
    anchor_width = len(plan.anchor)
    misses_left = _ANCHOR_MISS_ALLOWANCE + len(data) // _ANCHOR_MISS_BYTES
    ranges: list[Range] = []
    char_widths: list[int] = []
    end = 0
    hit = lowered.find(plan.anchor)
    while hit >= 0 and len(ranges) < limit:
        extension = _extend_anchor_hit(data, hit, anchor_width, plan)
        if extension is not None:
            before, after = extension
            start = hit - len(before.encode())
            if start >= end:  # else it overlaps the previous match
                end = hit + anchor_width + len(after.encode())
                ranges.append((start, end))
                char_widths.append(len(before) + anchor_width + len(after))
                hit = lowered.find(plan.anchor, end)
                continue
        misses_left -= 1
        if misses_left < 0:
            return None
        hit = lowered.find(plan.anchor, hit + 1)
    return ranges, char_widths


def _extend_anchor_hit(
    data: bytes, hit: int, anchor_width: int, plan: _ClaimPlan
) -> tuple[str, str] | None:
    """The original characters around an anchor hit that fold to the rest of the claim.

    A character folds to at least one code point and is at most 4 bytes, so a window of
    4 bytes per folded code point (plus one character cut by the window edge, which the
    "ignore" decoding drops) always holds enough whole characters.
    """
    before = after = ""
    if plan.before:
        window_start = max(0, hit - 4 * len(plan.before) - 4)
        window = data[window_start:hit].decode("utf-8", "ignore")
        before = _suffix_folding_to(window, plan.before)
        if before is None:
            return None
    if plan.after:
        window_start = hit + anchor_width
        window = data[window_start : window_start + 4 * len(plan.after) + 4]
        after = _prefix_folding_to(window.decode("utf-8", "ignore"), plan.after)
        if after is None:
            return None
    return before, after


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
            for match in _fold_tables().expanding.finditer(self.text, origin, chunk_end):
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


def _convert_ranges(
    ranges: list[Range],
    widths: list[int],
    source_length: int,
    target_length: int,
    gap_length: Callable[[int, int], int],
) -> list[Range]:
    """The same sorted, disjoint ranges in other units (bytes <-> chars).

    ``widths`` are the ranges' own sizes in the target units and ``gap_length(a, b)`` the size
    of source[a:b] in them. Only the gaps are measured, from the end of the text nearer to the
    matches, so a claim found near the end costs a short tail rather than the whole text.
    """
    if not ranges:
        return []
    converted: list[Range] = []
    if ranges[-1][1] <= source_length - ranges[0][0]:
        source = target = 0
        for (start, end), width in zip(ranges, widths, strict=True):
            target += gap_length(source, start)
            converted.append((target, target + width))
            target += width
            source = end
        return converted
    source, target = source_length, target_length
    for (start, end), width in zip(reversed(ranges), reversed(widths), strict=True):
        target -= gap_length(end, source)
        converted.append((target - width, target))
        target -= width
        source = start
    converted.reverse()
    return converted
