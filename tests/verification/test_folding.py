import re

from hypothesis import given, settings
from hypothesis import strategies as st

from console.verification.folding import ClaimPlan, fold_tables, preimages_of, spelling

# Characters whose foldings expand, collide with ASCII or with each other.
FOLD_HEAVY = "ßẞİıK\u212aﬁﬀﬃﬆŉΣσςſǰʼ\u0307\u030céÉ😀ᾈᾀι" + "sSkKiIfFtTnNjJa "


def test_preimages_are_every_character_with_that_folding():
    assert set(preimages_of("s")) == {"s", "S", "ſ"}
    assert set(preimages_of("k")) == {"k", "K", "\u212a"}
    assert set(preimages_of("ss")) == {"ß", "ẞ"}
    assert set(preimages_of("σ")) == {"σ", "Σ", "ς"}
    assert set(preimages_of("x")) == {"x", "X"}
    assert preimages_of("€") == ("€",)
    assert preimages_of("ab") == ()


def test_the_tables_know_the_expanding_characters():
    tables = fold_tables()
    assert tables.expanding.fullmatch("ß") and tables.expanding.fullmatch("İ")
    assert not tables.expanding.fullmatch("s")
    assert tables.longest_folding == 3  # "ﬃ" -> "ffi", "ΐ" -> three code points
    assert "k" in tables.ascii_folds and "ss" in tables.ascii_folds and "a" not in tables.ascii_folds


def test_the_pattern_spells_every_way_of_writing_strasse():
    pattern = ClaimPlan("strasse").pattern
    for written in ("strasse", "STRASSE", "Straße", "STRAẞE", "ﬆraße", "ſtraſſe"):
        assert pattern.fullmatch(written.encode().lower()), written
    for other in ("strase", "straßße", "strasse!", "stra\u00dfe\u0301"):
        assert not pattern.fullmatch(other.encode().lower()), other


def test_a_claim_with_too_many_spellings_has_no_pattern():
    assert spelling("s" * 30) is None
    assert ClaimPlan("s" * 30).pattern is None
    assert spelling("s" * 4) is not None


def test_the_anchor_avoids_letters_a_non_ascii_character_folds_to():
    plan = ClaimPlan("Die Straße nach İstanbul ist ab Montag gesperrt".casefold())
    assert plan.anchor == b" ab montag ge"
    assert plan.before + plan.anchor.decode() + plan.after == plan.folded
    assert ClaimPlan("sk").anchor == b""
    assert ClaimPlan("ab").anchor == b"ab"  # shorter than 3 but the whole claim


@settings(max_examples=1000)
@given(st.text(st.sampled_from(FOLD_HEAVY), min_size=1, max_size=8), st.text(st.sampled_from(FOLD_HEAVY), max_size=8))
def test_the_pattern_matches_exactly_the_strings_that_fold_to_the_claim(claim, text):
    folded = claim.casefold()
    spelled = spelling(folded)
    if spelled is None:
        return
    pattern = re.compile(spelled.source)
    assert bool(pattern.fullmatch(text.encode().lower())) == (text.casefold() == folded)
    assert pattern.fullmatch(claim.encode().lower())
    if pattern.fullmatch(text.encode().lower()):
        assert spelled.min_bytes <= len(text.encode()) <= spelled.max_bytes


@settings(max_examples=500)
@given(st.text(st.sampled_from(FOLD_HEAVY + "abcdeo "), min_size=1, max_size=12))
def test_the_reach_around_the_anchor_is_the_longest_spelling_on_each_side(claim):
    plan = ClaimPlan(claim.strip() or "x")
    if plan.anchor and plan.anchored_search is not None:
        _, longest_before, longest_rest = plan.anchored_search
        assert longest_before == spelling(plan.before).max_bytes
        assert longest_rest == len(plan.anchor) + spelling(plan.after).max_bytes
