"""The demo workspace tells a true story: its claims are supported by their passages in the mix a gate
produces, its planted corpus gaps lead /gaps/, and its logins are the ones the README lists."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from console.accounts.models import RoleGrant
from console.ledger.models import Decision
from console.review.demo import _GAPS
from console.verification.models import DecisionSupport
from console.verification.services import decisions_verify
from tests.factories import TEST_ACTOR, make_user
from tests.worlds import build_world

README = Path(__file__).resolve().parents[2] / "README.md"

# The bounds the note above `_ANSWERABLE` in console/review/demo.py promises, for every refusal a route
# lists (the gate's own, the planted corpus gaps, and on IT support the model upgrade's, mostly copies
# the new model's lower scores pushed under the cutoff), and for its served answers.
REFUSED_SHARE_BOUNDS = (0.15, 0.55)
SERVED_FULL_AT_LEAST = 0.8
SERVED_NONE_AT_MOST = 0.05


def _kind(support: DecisionSupport) -> str:
    if support.no_supporting_passage:
        return "none"
    return "full" if support.fully_supported else "partial"


@pytest.fixture(scope="module")
def demo_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo workspace, loaded once for the module's tests (tests/worlds.py)."""
    yield from build_world(
        django_db_blocker, tmp_path_factory, lambda: call_command("load_demo", "--decisions", "300", "--no-logins")
    )


@pytest.fixture
def demo(demo_world, db, request, settings):
    """The demo's data directory (its logins file), the demo loaded."""
    demo_world.enter(request)
    settings.DATA_DIR = demo_world.data_dir
    return demo_world.data_dir


def test_the_refusals_list_shows_claims_supported_in_full_in_part_and_not_at_all(demo):
    # load_demo verifies the refusals it has by then; a worker verifies the rest after ingest.
    pending = Decision.objects.exclude(support__status="done").values_list("pk", flat=True)
    decisions_verify(actor=TEST_ACTOR, decision_ids=list(pending))
    supports = DecisionSupport.objects.select_related("decision__route").filter(status="done")
    by_route: dict[tuple[str, str], Counter] = {}
    for support in supports:
        key = (support.decision.route.slug, support.decision.outcome)
        by_route.setdefault(key, Counter())[_kind(support)] += 1
    for slug in ("it-support", "hr-policy"):
        refused, served = by_route[(slug, "refused")], by_route[(slug, "served")]
        assert refused.total() == Decision.objects.filter(route__slug=slug, outcome="refused").count()
        for kind in ("full", "partial", "none"):
            share = refused[kind] / refused.total()
            assert REFUSED_SHARE_BOUNDS[0] <= share <= REFUSED_SHARE_BOUNDS[1], (slug, kind, refused)
        assert served["full"] / served.total() >= SERVED_FULL_AT_LEAST, (slug, served)
        assert served["none"] / served.total() <= SERVED_NONE_AT_MOST, (slug, served)
    # Spans are there to highlight wherever a unit was found.
    found = DecisionSupport.objects.filter(decision__outcome="refused", units_supported__gt=0)
    assert found.count() > 0
    assert not found.exclude(decision__span_checks__supported=True).exists()


def test_the_planted_corpus_gaps_stay_unsupported_and_lead_the_gaps_page(demo, client):
    client.force_login(make_user("gaps-reader", "reviewer"))
    for slug, topics in _GAPS.items():
        planted = DecisionSupport.objects.filter(
            decision__route__slug=slug, decision__request_id__startswith="demo-gap"
        )
        assert planted.exists() and not planted.exclude(no_supporting_passage=True).exists()
        html = client.get(f"/gaps/?route={slug}").content.decode()
        rows = re.findall(r"<tr><td class=\"num\">\d+</td>.*?</tr>", html, re.S)
        assert len(rows) > 2, slug
        leading = set()
        for row in rows[:2]:
            named = {topic for topic in topics if topic in row}
            assert len(named) == 1 and "100%" in row, (slug, row)
            leading |= named
        assert leading == set(topics)


def _readme_logins() -> dict[str, set[tuple[str, str | None]]]:
    """The README's demo login table: login -> {(role, route slug or None for every route)}."""
    text = README.read_text()
    table = text[text.index("**Demo logins.**") :]
    logins = {}
    for line in table.splitlines()[1:]:
        if line.startswith("| `"):
            login_cell, roles_cell = (cell.strip() for cell in line.strip("|").split("|")[:2])
            grants = set()
            for grant in roles_cell.split(", "):
                role, scope = re.fullmatch(r"`(\w+)` on (every route|`[\w-]+`)", grant).groups()
                grants.add((role, None if scope == "every route" else scope.strip("`")))
            logins[re.fullmatch(r"`(\w+)`", login_cell).group(1)] = grants
        elif logins and not line.startswith("|"):
            break
    return logins


def test_every_demo_login_the_readme_lists_exists_with_its_roles_and_printed_password(demo):
    promised = _readme_logins()
    assert promised, "the README has no demo login table"
    granted: dict[str, set] = {}
    for username, role, slug in RoleGrant.objects.values_list("user__username", "role", "route__slug"):
        granted.setdefault(username, set()).add((role, slug))
    assert granted == promised
    written = {}
    for line in (demo / "demo-logins.txt").read_text().splitlines():
        username, password = line.split()[:2]
        written[username] = password
    assert set(written) == set(promised)
    for username, password in written.items():
        assert re.fullmatch(rf"{username}-[0-9a-f]{{6}}", password), password
        assert authenticate(username=username, password=password) is not None, username
    # Whoever the tours tell a reader to sign in as is in the table.
    text = README.read_text()
    told = re.findall(r"(?:[Ss]ign(?:ed)? in as|\bAs) `(\w+)`(?: or `(\w+)`)?", text)
    assert told
    assert {name for pair in told for name in pair if name} <= set(promised)
