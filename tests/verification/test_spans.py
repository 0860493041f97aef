import json
import random
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.verification import spans
from console.verification.folding import ClaimPlan
from console.verification.spans import (
    ClaimEmpty,
    ClaimTooLong,
    EncodedText,
    SpanResult,
    TextNotUtf8,
    split_claim_units,
    support_summary,
    verify_span,
)

# Characters whose folding changes length or maps non-ASCII onto ASCII, the pieces of their
# foldings, and ASCII letters they collide with.
FOLD_HEAVY = "ßẞİıK\u212aﬁﬀﬃﬆŉΣσςſǰʼ\u0307\u030cé😀"
ASCII_NEIGHBOURS = "sSkKiIfFtTnNjJa "
RICH_ALPHABET = FOLD_HEAVY + ASCII_NEIGHBOURS
# Mostly letters no non-ASCII character folds to, so claims have anchors and misses.
ANCHOR_ALPHABET = "abcdeo abcdeo " + "ßẞİK\u212aﬁŉΣſé😀" + "sSkK"


def brute_force_spans(text: str, claim: str) -> list[tuple[int, int]]:
    """Try every start, extend by whole characters, keep greedy left-to-right matches."""
    target = claim.strip().casefold()
    found = []
    start = 0
    while start < len(text):
        folded = ""
        end = start
        while end < len(text) and len(folded) < len(target):
            folded += text[end].casefold()
            end += 1
        if folded == target:
            found.append((start, end))
            start = end
        else:
            start += 1
    return found


def assert_ranges_are_original_spans(text: str, claim: str, result: SpanResult) -> None:
    data = text.encode()
    assert len(result.match_ranges) == len(result.char_ranges)
    for (byte_start, byte_end), (char_start, char_end) in zip(result.match_ranges, result.char_ranges, strict=True):
        span = data[byte_start:byte_end].decode()
        assert span == text[char_start:char_end]
        assert byte_start == len(text[:char_start].encode())
        assert span.casefold() == claim.strip().casefold()


def spans_of(text: str, claim: str) -> list[str]:
    result = verify_span(text, claim)
    assert_ranges_are_original_spans(text, claim, result)
    return [text[start:end] for start, end in result.char_ranges]


def test_strasse_finds_strasse_with_sharp_s():
    text = "Die Straße ist gesperrt."
    result = verify_span(text, "STRASSE")
    assert result.supported
    assert result.decision == "supported"
    assert result.char_ranges == [(4, 10)]
    assert result.match_ranges == [(4, 11)]
    assert text.encode()[4:11].decode() == "Straße"


@pytest.mark.parametrize(
    ("text", "claim", "expected"),
    [
        ("İstanbul Kelvin", "i̇stanbul kelvin", ["İstanbul Kelvin"]),
        ("İstanbul Kelvin", "kelvin", ["Kelvin"]),
        ("İstanbul Kelvin", "İSTANBUL", ["İstanbul"]),
        ("\u212aelvin", "kelvin", ["\u212aelvin"]),
        ("Kelvin", "\u212aelvin", ["Kelvin"]),
        ("ẞtraße", "SSTRASSE", ["ẞtraße"]),
        ("ẞtraße", "TRASSE", ["traße"]),
        ("Ὀδυσσεύς", "ὀδυσσεύσ", ["Ὀδυσσεύς"]),
        ("ﬁnal ﬁle", "FILE", ["ﬁle"]),
        ("a ŉ b", "ʼN", ["ŉ"]),
        ("😀😀😀abcß😀", "😀ABCSS😀", ["😀abcß😀"]),
        ("ﬃ ﬃx abc ﬃx", "FFIX ABC FFIX", ["ﬃx abc ﬃx"]),
    ],
)
def test_length_changing_foldings_report_offsets_into_the_original(text, claim, expected):
    assert spans_of(text, claim) == expected


@pytest.mark.parametrize(
    ("text", "claim"),
    [("İstanbul Kelvin", "kelvin"), ("\u212aelvin x", "x"), ("ẞtraße!", "!"), ("İİ ok", "ok")],
)
def test_offsets_are_not_taken_from_a_lower_cased_copy(text, claim):
    # The seed's reference searched text.lower() and reported those offsets; after a character
    # whose lower case has another length they point at the wrong bytes of the original.
    lowered = text.lower().encode()
    reference_start = lowered.find(claim.lower().encode())
    result = verify_span(text, claim)
    ((start, end),) = result.match_ranges
    assert start != reference_start
    assert text.encode()[start:end].decode().casefold() == claim.casefold()


@pytest.mark.parametrize(
    ("text", "claim"),
    [
        ("ß", "s"),
        ("ẞ", "S"),
        ("İ", "i"),
        ("ﬃ", "fi"),
        ("ﬃ", "ff"),
        ("ŉ", "n"),
        ("ẞtraße", "straße"),  # "straße" folds to "strasse", which starts inside "ẞ" -> "ss"
    ],
)
def test_a_match_that_cuts_through_a_character_is_not_reported(text, claim):
    result = verify_span(text, claim)
    assert not result.supported
    assert result.decision == "unsupported_claim"
    assert result.match_ranges == result.char_ranges == []


def test_a_whole_character_match_overlapping_a_cut_one_is_still_found():
    assert spans_of("ßs", "s") == ["s"]
    assert verify_span("sß", "ss").char_ranges == [(1, 2)]


def test_matches_go_left_to_right_without_overlapping():
    assert verify_span("aaaa", "aa").char_ranges == [(0, 2), (2, 4)]
    assert verify_span("aaaaa", "AA").char_ranges == [(0, 2), (2, 4)]
    result = verify_span("ääää", "ÄÄ")
    assert result.char_ranges == [(0, 2), (2, 4)]
    assert result.match_ranges == [(0, 4), (4, 8)]
    assert spans_of("ßßß", "SS") == ["ß", "ß", "ß"]


def test_the_claim_is_trimmed_before_matching():
    assert verify_span("a cat sat", "  cat\n").char_ranges == [(2, 5)]


def test_there_is_no_unicode_normalisation():
    assert not verify_span("cafe\u0301", "café").supported
    assert verify_span("café", "CAFÉ").supported


def test_at_most_100_ranges_and_truncated_says_more_existed():
    result = verify_span("ab " * 150, "AB")
    assert len(result.match_ranges) == 100
    assert result.truncated
    assert result.match_ranges[-1] == (297, 299)


def test_exactly_100_matches_are_not_truncated():
    result = verify_span("é ab " * 100, "AB")
    assert len(result.char_ranges) == 100
    assert not result.truncated


def test_truncation_counts_matches_on_every_path():
    for text in ("x" * 150, "é" + "x" * 150, "ß" * 150):
        claim = "SS" if text.startswith("ß") else "X"
        result = verify_span(text, claim, max_ranges=7)
        assert len(result.char_ranges) == 7
        assert result.truncated
        assert_ranges_are_original_spans(text, claim, result)


def test_zero_max_ranges_still_says_whether_the_claim_is_supported():
    result = verify_span("abc", "b", max_ranges=0)
    assert result.supported
    assert result.match_ranges == []
    assert result.truncated


@pytest.mark.parametrize("claim", ["", "   ", "\n\t "])
def test_an_empty_claim_raises_claim_empty(claim):
    with pytest.raises(ClaimEmpty) as error:
        verify_span("text", claim)
    assert error.value.code == "claim_empty"


def test_a_claim_over_2000_characters_raises_claim_too_long():
    with pytest.raises(ClaimTooLong) as error:
        verify_span("text", "x" * 2001)
    assert error.value.code == "claim_too_long"


def test_a_claim_of_2000_characters_with_padding_is_accepted():
    assert verify_span("x" * 2000, "  " + "X" * 2000 + "  ").supported


def test_a_text_with_a_lone_surrogate_raises_text_not_utf8():
    with pytest.raises(TextNotUtf8) as error:
        verify_span("ok \ud800 ok", "ok")
    assert error.value.code == "text_not_utf8"


def test_as_dict_is_json_ready():
    payload = verify_span("Straße straße", "strasse").as_dict()
    assert json.loads(json.dumps(payload)) == {
        "supported": True,
        "decision": "supported",
        "match_ranges": [[0, 7], [8, 15]],
        "char_ranges": [[0, 6], [7, 13]],
        "truncated": False,
    }


def test_an_absent_claim_is_unsupported():
    assert verify_span("İstanbul", "Ankara").as_dict() == {
        "supported": False,
        "decision": "unsupported_claim",
        "match_ranges": [],
        "char_ranges": [],
        "truncated": False,
    }


def test_a_periodic_claim_in_a_periodic_text_stays_linear():
    started = time.perf_counter()
    assert not verify_span("ß" * 100_000, "s" * 1999).supported
    assert len(verify_span("ß" * 100_000, "s" * 1998).char_ranges) == 100
    assert time.perf_counter() - started < 2


def spy_on(monkeypatch, name: str) -> list:
    calls = []
    function = getattr(spans, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    monkeypatch.setattr(spans, name, spy)
    return calls


def test_an_anchor_that_keeps_missing_hands_over_to_the_uncased_search(monkeypatch):
    uncased = spy_on(monkeypatch, "_uncased_byte_ranges")
    text = "é" + "xyz " * 200 + "xyzß"
    assert ClaimPlan("XYZSS").anchor == b"xyz"
    assert verify_span(text, "XYZSS").char_ranges == [(801, 805)]
    assert len(uncased) == 1


def test_rejected_candidates_hand_over_to_the_full_casefold(monkeypatch):
    folded = spy_on(monkeypatch, "_folded_char_ranges")
    # Every uncased candidate of "sss" in "ßßß..." cuts through a "ß".
    assert not verify_span("ß" * 5_000, "SSS").supported
    assert len(folded) == 1


def test_a_claim_with_an_anchor_takes_the_anchor_and_one_without_the_uncased_search(monkeypatch):
    monkeypatch.setattr(spans, "_UNCASED_MIN_BYTES_PER_SECOND", 0)  # however busy the machine
    anchored = spy_on(monkeypatch, "_anchored_byte_ranges")
    uncased = spy_on(monkeypatch, "_uncased_byte_ranges")
    linear = spy_on(monkeypatch, "_folded_char_ranges")
    text = "é " + "lorem ipsum " * 5_000 + "Die Straße nach İstanbul. Ο Σίσυφος."
    assert spans_of(text, "DIE STRASSE NACH İSTANBUL") == ["Die Straße nach İstanbul"]
    assert (len(anchored), len(uncased), len(linear)) == (1, 0, 0)
    # 14 bytes folded: StringZilla's SIMD search holds the whole needle
    assert spans_of(text, "ΣΊΣΥΦΟΣ") == ["Σίσυφος"]
    assert (len(anchored), len(uncased), len(linear)) == (1, 1, 0)
    # 17 bytes: searched by its first 16 bytes, each candidate checked for the whole claim
    assert spans_of(text, "Ο ΣΊΣΥΦΟΣ") == ["Ο Σίσυφος"]
    assert (len(anchored), len(uncased), len(linear)) == (1, 2, 0)


def test_a_long_claim_whose_prefix_keeps_matching_hands_over_to_the_linear_search(monkeypatch):
    monkeypatch.setattr(spans, "_UNCASED_MIN_BYTES_PER_SECOND", 0)  # however busy the machine
    linear = spy_on(monkeypatch, "_folded_char_ranges")
    text = ("Σ" * 1999 + "x") * 40
    assert not verify_span(text, "σ" * 2000).supported  # the prefix is found everywhere, the claim nowhere
    assert len(linear) == 1
    assert verify_span(text, "σ" * 1999).char_ranges == [(2000 * run, 2000 * run + 1999) for run in range(40)]
    assert len(linear) == 1  # every candidate a match: nothing to hand over


def test_a_short_text_and_a_claim_without_an_anchor_take_one_scan(monkeypatch):
    uncased = spy_on(monkeypatch, "_uncased_byte_ranges")
    scanned = spy_on(monkeypatch, "_scanned_byte_ranges")
    assert spans_of("Ο Σίσυφος, ο ΣΊΣΥΦΟΣ.", "ο σίσυφος") == ["Ο Σίσυφος", "ο ΣΊΣΥΦΟΣ"]
    assert (len(scanned), len(uncased)) == (1, 0)


def test_characters_newer_than_pythons_unicode_fold_as_python_says():
    # StringZilla folds U+A7CB (Unicode 16) to U+0264; this Python's Unicode may not know it,
    # and the rules follow str.casefold, whatever StringZilla proposes.
    for text, claim in (("\ua7cb " * 3, "\u0264"), ("\u0264 " * 3, "\ua7cb")):
        result = verify_span(("é " + "x" * 30_000 + text), claim)
        expected = brute_force_spans("é " + "x" * 30_000 + text, claim)
        assert result.char_ranges == expected
        assert result.supported == ("\ua7cb".casefold() == "\u0264")


def test_an_encoded_text_gives_the_same_result_as_its_string():
    for text, claim in (("Die Straße", "STRASSE"), ("plain ascii", "ASCII"), ("ΣΊΣΥΦΟΣ", "σίσυφος")):
        assert verify_span(EncodedText(text), claim) == verify_span(text, claim)


def test_encoding_a_text_with_a_lone_surrogate_raises_text_not_utf8():
    with pytest.raises(TextNotUtf8):
        EncodedText("ok \udfff")


def test_a_claim_with_a_lone_surrogate_is_never_found():
    for text in ("abc", "abç", "ß" * 40_000, EncodedText("abç")):
        assert not verify_span(text, "\ud800").supported
    with pytest.raises(TextNotUtf8):
        verify_span("ab\udc00", "\ud800")


def test_casefold_is_the_concatenation_of_each_characters_folding():
    # The search depends on it; a future Unicode or Python change must not slip by.
    sample = "ΣΑΣ σας ΌΣΟΣ ß ẞ İ ı \u212a ﬃ ŉ ǰ ΐ ᾈ 😀 Ǆǅǆ"
    assert "".join(char.casefold() for char in sample) == sample.casefold()


def test_casefold_is_idempotent_for_every_code_point():
    # folding_pattern spells a folded claim with the preimages of its own code points.
    for code_point in range(sys.maxunicode + 1):
        if not 0xD800 <= code_point <= 0xDFFF:
            folded = chr(code_point).casefold()
            assert folded.casefold() == folded, hex(code_point)


@settings(max_examples=300)
@given(st.text())
def test_casefold_works_character_by_character(text):
    assert "".join(char.casefold() for char in text) == text.casefold()


no_surrogates = st.characters(exclude_categories=("Cs",))


@st.composite
def text_and_claim(draw, alphabet):
    text = draw(st.text(alphabet, max_size=40))
    if text and draw(st.booleans()):
        start = draw(st.integers(0, len(text) - 1))
        end = draw(st.integers(start + 1, len(text)))
        claim = text[start:end]
        claim = draw(st.sampled_from([claim, claim.upper(), claim.lower(), claim.swapcase()]))
    else:
        claim = draw(st.text(alphabet, min_size=1, max_size=6))
    if not claim.strip():
        claim = draw(st.sampled_from(["s", "ss", "k", "i\u0307", "fi"]))
    return text, claim


@settings(max_examples=500)
@given(text_and_claim(st.sampled_from(RICH_ALPHABET)))
def test_every_match_is_found_and_every_range_is_an_original_span(pair):
    text, claim = pair
    result = verify_span(text, claim, max_ranges=10_000)
    assert_ranges_are_original_spans(text, claim, result)
    assert result.char_ranges == brute_force_spans(text, claim)
    assert result.supported == bool(result.char_ranges)


@settings(max_examples=300)
@given(text_and_claim(no_surrogates))
def test_any_text_agrees_with_the_brute_force_search(pair):
    text, claim = pair
    result = verify_span(text, claim, max_ranges=10_000)
    assert_ranges_are_original_spans(text, claim, result)
    assert result.char_ranges == brute_force_spans(text, claim)


def without_patterns(claim: str) -> ClaimPlan:
    """A plan whose patterns are unavailable, as for a claim too long to spell out."""
    plan = ClaimPlan(claim)
    plan.pattern = plan.anchored_search = None
    return plan


@settings(max_examples=500)
@given(
    st.one_of(
        text_and_claim(st.sampled_from(RICH_ALPHABET)),
        text_and_claim(st.sampled_from(ANCHOR_ALPHABET)),
        text_and_claim(no_surrogates),
    )
)
def test_every_search_path_agrees_with_brute_force(pair):
    text, claim = pair
    expected = brute_force_spans(text, claim)
    expected_bytes = [(len(text[:start].encode()), len(text[:end].encode())) for start, end in expected]
    assert spans._folded_char_ranges(text, claim.strip().casefold(), 10_000) == expected
    plan = ClaimPlan(claim.strip())
    if plan.pattern is not None:
        assert spans._scanned_byte_ranges(text.encode(), plan.pattern, 10_000) == expected_bytes
    for plan in (ClaimPlan(claim.strip()), without_patterns(claim.strip())):
        if plan.anchor:
            found = spans._anchored_byte_ranges(text.encode(), plan, 10_000)
            assert found is None or found == expected_bytes
        found = spans._uncased_byte_ranges(text.encode(), plan, 10_000)
        assert found is None or found == expected_bytes


@settings(max_examples=300)
@given(text_and_claim(st.sampled_from(RICH_ALPHABET)))
def test_the_uncased_search_agrees_with_brute_force_however_often_it_is_rejected(pair):
    text, claim = pair
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_REJECT_ALLOWANCE", 10_000)
        found = spans._uncased_byte_ranges(text.encode(), ClaimPlan(claim.strip()), 10_000)
    assert found == [
        (len(text[:start].encode()), len(text[:end].encode())) for start, end in brute_force_spans(text, claim)
    ]


@settings(max_examples=300)
@given(text_and_claim(st.sampled_from(RICH_ALPHABET)))
def test_offsets_map_back_across_fold_chunk_boundaries(pair):
    text, claim = pair
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_FOLD_CHUNK", 3)
        found = spans._folded_char_ranges(text, claim.strip().casefold(), 10_000)
    assert found == brute_force_spans(text, claim)


def test_a_match_beyond_the_first_fold_chunk_has_exact_offsets(monkeypatch):
    monkeypatch.setattr(spans, "_REJECT_ALLOWANCE", -1)  # straight to the full casefold
    text = "aß" * 10_000 + " Σίσυφος ßß"
    claim = "ΣΊΣΥΦΟΣ SSSS"
    assert not ClaimPlan(claim).anchor
    assert spans_of(text, claim) == ["Σίσυφος ßß"]
    assert verify_span(text, claim).char_ranges == [(20_001, 20_011)]


def test_a_long_answer_splits_into_sentences_and_lines():
    answer = "Open Settings. Choose Security!  Is MFA on?\nReset it\n\n  then log in.  "
    assert split_claim_units(answer) == [
        "Open Settings.",
        "Choose Security!",
        "Is MFA on?",
        "Reset it",
        "then log in.",
    ]


def test_splitting_keeps_abbreviations_simple_and_numbers_whole():
    assert split_claim_units("Use e.g. the CLI. Version 3.5 works.") == [
        "Use e.g.",
        "the CLI.",
        "Version 3.5 works.",
    ]


def test_a_blank_answer_has_no_units():
    assert split_claim_units(" \n\t\n") == []


def test_support_summary_counts_found_units():
    assert support_summary([True, False, True]) == (2 / 3, False)
    summary = support_summary([True, True])
    assert summary.expected_support == 1.0
    assert summary.fully_supported


def test_support_summary_needs_at_least_one_unit():
    with pytest.raises(ValueError):
        support_summary([])


@pytest.mark.parametrize("seed", range(6))
def test_long_texts_with_many_spellings_agree_with_the_full_casefold(seed):
    # Tens of kilobytes, the claim spelled many ways and near-misses around it: every path over
    # long texts gives what casefolding the whole text gives.
    rng = random.Random(seed)
    spellings = ["Straße", "STRASSE", "strasse", "ſtraſſe", "STRAẞE", "Strase", "Straßen", "ﬆraße"]
    words = ["die", "nach", "İstanbul", "ISTANBUL", "Kelvin", "\u212aelvin", "Σίσυφος", "ΣΊΣΥΦΟΣ", "café", "x"]
    text = " ".join(rng.choice(spellings + words * 3) for _ in range(8_000))
    for claim in ("strasse", "STRASSE NACH", "i̇stanbul", "kelvin", "σίσυφος", "Straße die", "ss"):
        expected = spans._folded_char_ranges(text, claim.casefold(), 101)
        result = verify_span(text, claim)
        assert result.char_ranges == expected[:100]
        assert result.truncated == (len(expected) > 100)
        assert_ranges_are_original_spans(text, claim, result)


def reference_spans(text: str, claim: str) -> list[tuple[int, int]]:
    """A second, plain reference for long texts: fold every character, try every boundary with
    startswith (C speed, so tens of kilobytes are quick), keep greedy left-to-right matches."""
    target = claim.strip().casefold()
    folded_starts = [0]
    for char in text:
        folded_starts.append(folded_starts[-1] + len(char.casefold()))
    folded = text.casefold()
    char_at = {position: index for index, position in enumerate(folded_starts)}
    found = []
    index = 0
    while index < len(text):
        start = folded_starts[index]
        end = start + len(target)
        if end in char_at and folded.startswith(target, start):
            found.append((index, char_at[end]))
            index = char_at[end]
        else:
            index += 1
    return found


# (repeated unit of text, claim): periodic texts of characters whose folding changes length or
# case, against claims that nearly match everywhere or whose every occurrence cuts a character.
ADVERSARIAL_FAMILIES = [
    ("Σ" * 1999 + "x", "σ" * 2000),
    ("Σ" * 1999 + "x", "σ" * 1999),
    ("Σς" * 999 + "x", "σ" * 2000),
    ("ß" * 999 + "x", "ss" * 1000),
    ("ß" * 999 + "x", "ss" * 999 + "x"),
    ("ẞ" * 999 + "x", "SS" * 1000),
    ("ß", "s" * 1999),
    ("ß", "s" * 1998),
    ("ßx", "sx"),
    ("ßx", "ssx"),
    ("ß", "s"),
    ("sß", "ss"),
    ("ﬃ" * 600 + "x", "ffi" * 666),
    ("ﬃ" * 600 + "x", "ffi" * 600 + "x"),
    ("ﬀ", "f" * 1999),
    ("ﬁ", "if" * 999),
    ("ﬁ", "fi" * 999),
    ("İ" * 999 + "x", "i̇" * 1000),
    ("İ", "\u0307i" * 999),
    ("İi", "i̇i"),
    ("ΐ" * 600 + "x", "ΐ" * 666),
    ("ΐΐx", "ΐΐΐ"),
    ("ΐ", "\u0308\u0301ι"),
    ("e\u0301" * 999 + "x", "E\u0301" * 1000),
    ("e\u0301" * 3 + "x", "E\u0301" * 4),
    ("e\u0301" * 3 + "x", "E\u0301" * 3 + "X"),
    ("a" * 1999 + "b", "a" * 2000),
    ("é" * 1999 + "b", "é" * 1999 + "c"),
    ("é" * 999 + "abc", "é" * 1000 + "abc"),
    ("é" * 999 + "abc", "é" * 999 + "abc"),
    ("abc" + "ß" * 995 + "x", "abc" + "s" * 1992),
    ("abc" + "ß" * 995 + "x", "abc" + "s" * 1990 + "x"),
    ("éxyz" + "xyz" * 20, "éxyz" + "xyz" * 21),
    ("ß" * 16 + "sx", "s" * 32 + "x" + "s" * 33 + "x"),
    ("ß" * 40 + "sx", "s" * 81 + "x"),
]


@pytest.mark.parametrize(("unit", "claim"), ADVERSARIAL_FAMILIES)
def test_adversarial_families_give_exactly_the_reference_ranges(unit, claim):
    text = unit * max(3, 30_000 // len(unit))
    expected = reference_spans(text, claim)
    result = verify_span(text, claim)
    assert result.char_ranges == expected[:100]
    assert result.truncated == (len(expected) > 100)
    assert_ranges_are_original_spans(text, claim, result)
    assert verify_span(EncodedText(text), claim) == result


@pytest.mark.parametrize(("unit", "claim"), ADVERSARIAL_FAMILIES)
def test_the_linear_search_alone_gives_the_reference_ranges_on_adversarial_families(unit, claim):
    text = unit * max(3, 30_000 // len(unit))
    assert spans._folded_char_ranges(text, claim.strip().casefold(), 100_000) == reference_spans(text, claim)


def test_the_reference_agrees_with_the_brute_force_on_short_texts():
    for unit, claim in ADVERSARIAL_FAMILIES:
        text = unit * 3
        short_claim = claim[:7]
        if short_claim.strip():
            assert reference_spans(text, short_claim) == brute_force_spans(text, short_claim)


@settings(max_examples=400)
@given(text_and_claim(st.sampled_from(RICH_ALPHABET)), st.integers(1, 7))
def test_the_bulk_search_agrees_with_brute_force_in_blocks_of_any_size(pair, block):
    text, claim = pair
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_BULK_AFTER_REJECTS", 0)  # bulk from the first cut occurrence
        patch.setattr(spans, "_BULK_BLOCK", block)
        found = spans._folded_char_ranges(text, claim.strip().casefold(), 10_000)
    assert found == brute_force_spans(text, claim)


@settings(max_examples=300)
@given(text_and_claim(st.sampled_from("ßẞsSſ xﬀﬁfiIİ\u0307")))
def test_periodic_texts_and_claims_agree_with_brute_force_on_every_path(pair):
    text, claim = pair
    text = text * 5
    expected = brute_force_spans(text, claim)
    assert verify_span(text, claim, max_ranges=10_000).char_ranges == expected
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_BULK_AFTER_REJECTS", 0)
        assert spans._folded_char_ranges(text, claim.strip().casefold(), 10_000) == expected
        patch.setattr(spans, "_ANCHOR_WINDOW_WORK", 0)  # the anchored search checks by decoding
        plan = ClaimPlan(claim.strip())
        if plan.anchor:
            found = spans._anchored_byte_ranges(text.encode(), plan, 10_000)
            assert found is None or found == [
                (len(text[:start].encode()), len(text[:end].encode())) for start, end in expected
            ]


def test_a_deadline_in_the_past_stops_the_linear_search():
    text = ("Σ" * 1999 + "x") * 10
    with pytest.raises(spans.TimeBudgetExceeded) as error:
        verify_span(text, "σ" * 2000, deadline=0.0)
    assert error.value.code == "verify_time_budget" and error.value.status == 503
    assert not verify_span(text, "σ" * 2000, deadline=None).supported


@settings(max_examples=500)
@given(
    st.one_of(text_and_claim(st.sampled_from(RICH_ALPHABET)), text_and_claim(no_surrogates)),
    st.integers(1, 6),
)
def test_the_uncased_search_by_a_prefix_of_the_claim_agrees_with_brute_force(pair, prefix_bytes):
    text, claim = pair
    expected = [(len(text[:start].encode()), len(text[:end].encode())) for start, end in brute_force_spans(text, claim)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_UNCASED_MAX_NEEDLE", prefix_bytes)
        patch.setattr(spans, "_REJECT_ALLOWANCE", 10_000)
        patch.setattr(spans, "_REJECT_WORK_FIXED", 10**9)
        for plan in (ClaimPlan(claim.strip()), without_patterns(claim.strip())):
            assert spans._uncased_byte_ranges(text.encode(), plan, 10_000) == expected


@settings(max_examples=300)
@given(st.one_of(text_and_claim(st.sampled_from(RICH_ALPHABET)), text_and_claim(no_surrogates)), st.integers(1, 9))
def test_the_uncased_search_in_small_chunks_agrees_with_brute_force(pair, chunk):
    text, claim = pair
    text = text * 3
    expected = [(len(text[:start].encode()), len(text[:end].encode())) for start, end in brute_force_spans(text, claim)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_UNCASED_CHUNK", chunk)
        patch.setattr(spans, "_UNCASED_MIN_BYTES_PER_SECOND", 0)
        patch.setattr(spans, "_REJECT_ALLOWANCE", 10_000)
        for plan in (ClaimPlan(claim.strip()), without_patterns(claim.strip())):
            assert spans._uncased_byte_ranges(text.encode(), plan, 10_000) == expected


def test_an_uncased_search_slower_than_its_floor_hands_over_to_the_linear_search(monkeypatch):
    monkeypatch.setattr(spans, "_UNCASED_CHUNK", 1024)
    monkeypatch.setattr(spans, "_UNCASED_MIN_BYTES_PER_SECOND", 10**15)  # nothing is that fast
    linear = spy_on(monkeypatch, "_folded_char_ranges")
    text = "ΐΐx" * 2_000 + "Ο Σίσυφος"
    assert spans_of(text, "ο σίσυφοσ") == ["Ο Σίσυφος"]
    assert len(linear) == 1


@settings(max_examples=400)
@given(text_and_claim(st.sampled_from(RICH_ALPHABET)), st.integers(1, 7), st.sampled_from([2**21 - 9, 5, 2]))
def test_the_hashed_bulk_search_agrees_with_brute_force_even_when_hashes_collide(pair, block, modulus):
    text, claim = pair
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spans, "_BULK_AFTER_REJECTS", 0)
        patch.setattr(spans, "_BULK_MAX_PERIOD", 0)  # rolling hashes whatever the period
        patch.setattr(spans, "_BULK_BLOCK", block)
        patch.setattr(spans, "_HASH_MODULUS", modulus)  # 2 and 5: collisions everywhere
        found = spans._folded_char_ranges(text * 2, claim.strip().casefold(), 10_000)
    assert found == brute_force_spans(text * 2, claim)


@pytest.mark.parametrize(
    ("unit", "claim"),
    [
        ("ß" * 16 + "sx", "s" * 32 + "x" + "s" * 33 + "x"),
        ("ß" * 20 + "x", "s" * 39 + "x" + "s"),
        ("ß" * 40 + "x", "s" * 79 + "x" + "s" * 20),
    ],
)
def test_cut_occurrences_of_a_long_period_claim_are_searched_in_bulk(monkeypatch, unit, claim):
    bulk = spy_on(monkeypatch, "_hashed_candidate_starts")
    text = unit * 2_000 + "ß" * 60 + "s" + unit
    assert spans_of(text, claim) == [text[start:end] for start, end in reference_spans(text, claim)][:100]
    assert bulk


def test_an_anchor_longer_than_the_simd_find_takes_is_found_by_cpython_find():
    sentence = "the red pen lay on a wooden table by the door "  # no letter a non-ASCII one folds to
    text = "é " + sentence * 3 + "Ünd " + sentence
    claim = (sentence * 2).upper() + "ünd"
    assert len(ClaimPlan(claim).anchor) > spans._SIMD_FIND_MAX_NEEDLE
    assert spans_of(text, claim) == [text[2 + len(sentence) : 2 + 3 * len(sentence) + 3]]
    assert verify_span(text, claim).char_ranges == brute_force_spans(text, claim)
