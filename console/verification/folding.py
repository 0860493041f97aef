"""Full Unicode case folding, seen from the search side: which characters fold to what, and
what a claim needs before it is searched.

Pure module, no Django. ``spans.py`` states the matching rules; this module holds the tables
and the per-claim plan they are applied with.

Two facts it relies on, both checked by tests against every code point:

- ``str.casefold`` works character by character with no context, so a string's folding is the
  concatenation of its characters' foldings;
- folding is idempotent: a folded string folds to itself.

So "the original characters text[a:b] fold to the folded claim F" is a regular language over
UTF-8 bytes: at each position of F, either one character whose folding is that code point, or
one character whose folding is the next two or three code points (ß -> "ss", İ -> "i" + U+0307,
ﬃ -> "ffi"). ``ClaimPlan.pattern`` is that language as a compiled bytes regular expression,
over the text's ASCII-lower-cased bytes (``bytes.lower()``: ASCII letters only, which never
changes whether a span folds to F, and leaves most positions a plain byte instead of a class),
so checking a candidate span costs one C call instead of a decode and a casefold.
"""

import re
import sys
from collections.abc import Callable
from functools import cache, cached_property, lru_cache
from typing import NamedTuple

import numpy as np

# A shorter anchor (unless it is the whole claim) hits too often to beat the uncased search.
MIN_ANCHOR_BYTES = 3
# A segment of the claim that some expanding character spans is spelled out as every way of
# covering it with characters; past these sizes the claim is checked by decoding instead.
_MAX_TILINGS_PER_SEGMENT = 64
_MAX_PATTERN_BYTES = 200_000


class FoldTables(NamedTuple):
    ascii_folds: tuple[str, ...]  # foldings of non-ASCII characters that contain ASCII
    expanding: re.Pattern[str]  # characters that fold to more than one code point
    preimages: dict[str, tuple[str, ...]]  # a folding -> every character with that folding
    longest_folding: int  # in code points


@cache
def fold_tables() -> FoldTables:
    """Scan every code point once (about 0.3 s, on first use) for the tables.

    ``preimages`` holds only the foldings that some character other than the folding itself
    maps to; any other single code point is its own and only preimage (``preimages_of``).
    """
    groups: dict[str, set[str]] = {}
    for code_point in range(sys.maxunicode + 1):
        if 0xD800 <= code_point <= 0xDFFF:
            continue  # lone surrogates have no UTF-8 form and never match
        char = chr(code_point)
        folded = char.casefold()
        if folded != char:
            groups.setdefault(folded, set()).add(char)
    preimages = {}
    for folded, chars in groups.items():
        if len(folded) == 1:
            chars.add(folded)  # idempotent: the folding is its own preimage too
        preimages[folded] = tuple(sorted(chars))
    expanding = sorted(char for folded, chars in groups.items() if len(folded) > 1 for char in chars)
    return FoldTables(
        ascii_folds=tuple(
            sorted(
                f for f, chars in groups.items() if any(c.isascii() for c in f) and any(not c.isascii() for c in chars)
            )
        ),
        expanding=re.compile("[" + "".join(map(re.escape, expanding)) + "]"),
        preimages=preimages,
        longest_folding=max(map(len, groups)),
    )


@cache
def fold_lengths() -> np.ndarray:
    """Code points each code point folds to, indexed by code point (uint8, 1 almost everywhere).

    Lets the linear search measure a text's folding without folding each character in Python:
    a table lookup on the text's code points, then a running sum.
    """
    lengths = np.ones(sys.maxunicode + 1, dtype=np.uint8)
    for folded, chars in fold_tables().preimages.items():
        if len(folded) > 1:
            lengths[[ord(char) for char in chars]] = len(folded)
    return lengths


def smallest_period(value: str) -> int:
    """Smallest p > 0 with value[i] == value[i + p] for all i (Knuth-Morris-Pratt borders)."""
    borders = [0] * len(value)
    border = 0
    for index in range(1, len(value)):
        while border and value[index] != value[border]:
            border = borders[border - 1]
        if value[index] == value[border]:
            border += 1
        borders[index] = border
    return len(value) - borders[-1]


def preimages_of(folding: str) -> tuple[str, ...]:
    """Every character whose casefold is exactly ``folding``."""
    found = fold_tables().preimages.get(folding)
    if found is not None:
        return found
    return (folding,) if len(folding) == 1 and not 0xD800 <= ord(folding) <= 0xDFFF else ()


class Spelling(NamedTuple):
    """Every UTF-8 spelling of one folded string, as a pattern over lower-cased bytes, and how
    long those spellings are."""

    source: bytes
    min_bytes: int
    max_bytes: int
    # the longest spelling of folded[:p] for every segment boundary p (0 and the end included)
    longest_prefix: dict[int, int]


class ClaimPlan:
    """A trimmed claim made ready for searching; built once per claim and cached.

    ``anchor`` is the longest run of the folded claim that only ASCII characters of a text can
    produce, so that in every match it appears as is in the text's ASCII-lower-cased UTF-8
    bytes (see ``_anchor_bounds``); ``before`` and ``after`` are the folded claim around it.
    The pattern is compiled on first use: most claims are checked against short passages where
    the anchor never hits.
    """

    def __init__(self, claim: str) -> None:
        self.folded = claim.casefold()
        # A claim with a lone surrogate folds to something no UTF-8 text can contain.
        self.searchable = _SURROGATE.search(self.folded) is None
        self.needle = self.folded.encode() if self.searchable else b""
        start, end = _anchor_bounds(self.folded) if self.searchable else (0, 0)
        self.anchor = self.folded[start:end].encode("ascii")
        self.before = self.folded[:start]
        self.after = self.folded[end:]

    @cached_property
    def period(self) -> int:
        """The folded claim's smallest period: two occurrences in a folded text are at least
        this far apart, and closer than its length only in steps of it."""
        return smallest_period(self.folded) if self.folded else 1

    @cached_property
    def spelled(self) -> Spelling | None:
        return spelling(self.folded)

    @cached_property
    def pattern(self) -> re.Pattern[bytes] | None:
        """Matches exactly the ASCII-lower-cased UTF-8 spans whose folding is the folded claim
        (None if the claim is too intricate to spell out)."""
        return None if self.spelled is None else re.compile(self.spelled.source)

    @cached_property
    def anchored_search(self) -> tuple[Callable[..., re.Match[bytes] | None], int, int] | None:
        """(the pattern's search, the longest spelling of ``before``, the longest of the anchor
        and ``after``) in bytes: how far a match may start before its anchor's hit and end
        after it. None when the claim cannot be spelled out as a pattern.

        No expanding character's folding crosses into the anchor (it would contain ASCII and
        make the position unsafe), so both ends of the anchor are segment boundaries.
        """
        if self.pattern is None:
            return None
        longest = self.spelled.longest_prefix
        longest_after = self.spelled.max_bytes - longest[len(self.folded) - len(self.after)]
        return self.pattern.search, longest[len(self.before)], len(self.anchor) + longest_after


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _anchor_bounds(folded: str) -> tuple[int, int]:
    """[start, end) of the claim's anchor in its folding; (0, 0) when it has none.

    A folded ASCII character can come from a non-ASCII one (Kelvin sign -> "k", "ſ" -> "s",
    "ß" -> "ss", "ﬁ" -> "fi", "İ" -> "i" + U+0307 ...). A position is safe when no such folding
    occurs in the folded claim over it: then, in every match, an ASCII character of the text
    produced it. The anchor is the longest safe run, if it is at least ``MIN_ANCHOR_BYTES``
    long or the whole claim.
    """
    # The unsafe stretches as (start, end) spans, found by the regex engine and str.find rather than
    # by a Python loop over every character: this runs once per claim unit, on every decision.
    unsafe = [match.span() for match in _NON_ASCII_RUN.finditer(folded)]
    for ascii_fold in fold_tables().ascii_folds:
        at = folded.find(ascii_fold)
        while at >= 0:
            unsafe.append((at, at + len(ascii_fold)))
            at = folded.find(ascii_fold, at + 1)
    unsafe.sort()
    best_start = best_length = run_start = 0
    for start, end in [*unsafe, (len(folded), len(folded))]:
        if start - run_start > best_length:  # the safe run [run_start, start); the first longest wins
            best_start, best_length = run_start, start - run_start
        run_start = max(run_start, end)
    if best_length < min(MIN_ANCHOR_BYTES, len(folded)):
        return 0, 0
    return best_start, best_start + best_length


def spelling(folded: str) -> Spelling | None:
    """The UTF-8 strings that fold to ``folded`` (itself a folded string).

    The claim is cut into segments that no expanding character's folding crosses; a plain
    position becomes a choice between its preimages (``s|\xc5\xbf`` for "s"), a segment some
    expansion covers lists every way of covering it. None when that listing would be too large
    (a long run of "s" has Fibonacci many). The empty string gives an empty pattern.
    """
    tables = fold_tables()
    widths: list[list[int]] = [[] for _ in folded]  # expansion widths starting at each position
    for position in range(len(folded)):
        for width in range(2, min(tables.longest_folding, len(folded) - position) + 1):
            if folded[position : position + width] in tables.preimages:
                widths[position].append(width)
    parts: list[bytes] = []
    min_bytes = max_bytes = 0
    longest_prefix = {0: 0}
    start = 0
    while start < len(folded):
        end = start + 1
        position = start
        while position < end:  # grow the segment until no expansion leaves it
            end = max([end, *(position + width for width in widths[position])])
            position += 1
        tilings = _tilings(folded, start, end, widths)
        if not tilings:
            return None
        sources = [source for source, _, _ in tilings]
        parts.append(sources[0] if len(sources) == 1 else b"(?:" + b"|".join(sources) + b")")
        min_bytes += min(low for _, low, _ in tilings)
        max_bytes += max(high for _, _, high in tilings)
        longest_prefix[end] = max_bytes
        start = end
    source = b"".join(parts)
    return Spelling(source, min_bytes, max_bytes, longest_prefix) if len(source) <= _MAX_PATTERN_BYTES else None


def _tilings(folded: str, start: int, end: int, widths: list[list[int]]) -> list[tuple[bytes, int, int]] | None:
    """Every way of writing folded[start:end] as a run of characters: (pattern, min, max bytes)."""
    found: list[tuple[bytes, int, int]] = []
    pending: list[tuple[int, bytes, int, int]] = [(start, b"", 0, 0)]
    while pending:
        position, prefix, low, high = pending.pop()
        if position == end:
            found.append((prefix, low, high))
            if len(found) > _MAX_TILINGS_PER_SEGMENT:
                return None
            continue
        for width in [1, *widths[position]]:
            if position + width > end:
                continue
            choice = _choice(folded[position : position + width])
            if choice is not None:
                source, shortest, longest = choice
                pending.append((position + width, prefix + source, low + shortest, high + longest))
    return found


@lru_cache(maxsize=4096)
def _choice(folding: str) -> tuple[bytes, int, int] | None:
    """A pattern for any one character whose casefold is ``folding``, in lower-cased bytes, and
    the shortest and longest of them in bytes; None when no character folds to it. A class for
    the ASCII ones, lower-cased, and whole UTF-8 sequences for the rest, so a match never starts
    or ends inside a character. Cached: the same letters recur in every claim."""
    chars = preimages_of(folding)
    if not chars:
        return None
    sizes = [len(char.encode()) for char in chars]
    single = [re.escape(lowered.encode()) for lowered in sorted({char.lower() for char in chars if char.isascii()})]
    multi = [re.escape(char.encode()) for char in chars if not char.isascii()]
    options = multi
    if len(single) == 1:
        options = [single[0], *multi]
    elif single:
        options = [b"[" + b"".join(single) + b"]", *multi]
    source = options[0] if len(options) == 1 else b"(?:" + b"|".join(options) + b")"
    return source, min(sizes), max(sizes)
