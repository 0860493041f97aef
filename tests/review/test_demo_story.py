"""The demo workspace tells a true story: its claims are supported by their passages in the mix a gate
produces, its planted corpus gaps lead /gaps/ (HR policy sends vectors, IT support uses the built-in
embedder), IT support has an open recheck after a model upgrade and a drift alarm, HR policy a dispute
and an appeal, the README's policy tour signs its waiting draft, and its logins are the ones the
README lists.

Every test here reads the one 300-decision demo the module loads (tests/worlds.py): loading it takes
seconds, so tests of the demo belong in this module rather than loading their own."""

from __future__ import annotations

import re
from collections import Counter
from html import unescape
from pathlib import Path

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from console.accounts.models import RoleGrant
from console.disputes.models import Dispute
from console.governance.models import PolicyVersion
from console.governance.selectors import newer_in_force
from console.ledger.models import Decision
from console.monitoring.models import Alarm, Recheck
from console.monitoring.selectors import recheck_report
from console.review.demo import _GAPS
from console.similarity.models import GapRun, RouteEmbedding
from console.similarity.selectors import gap_clusters
from console.verification.models import DecisionSupport
from console.verification.services import decisions_verify
from grading.models import FinalLabel
from tests.factories import TEST_ACTOR, make_user
from tests.governance.conftest import draft_body
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


def test_the_demo_plants_two_gaps_per_route_at_the_top(demo):
    sources = dict(RouteEmbedding.objects.values_list("route__slug", "source"))
    assert sources == {"hr-policy": "sent", "it-support": "builtin"}
    for slug, topics in _GAPS.items():
        run = GapRun.objects.filter(route__slug=slug).latest()
        top = list(run.clusters.order_by("rank")[:2])
        found = set()
        for cluster in top:
            questions = [e["question"] for e in cluster.examples]
            matches = {t for t in topics if all(t in q for q in questions)}
            assert len(matches) == 1, (slug, questions)
            found |= matches
            assert cluster.no_support_share == 1.0
        assert found == set(topics)


def test_gap_clusters_carry_the_share_graded_correct_when_answered(demo, client):
    """HR policy's demo decisions come with an imported graded set; the planted gaps have none."""
    run = GapRun.objects.filter(route__slug="hr-policy").latest()
    clusters = gap_clusters(run)
    top, graded = clusters[0], [c for c in clusters if c.graded]
    assert top.graded == 0 and top.correct_share is None
    assert graded
    cluster = graded[0]
    members = cluster.__class__.objects.get(pk=cluster.pk).decision_ids
    labels = FinalLabel.objects.filter(decision_id__in=members)
    assert cluster.graded == labels.count()
    assert cluster.correct_share == labels.filter(correct=True).count() / labels.count()
    client.force_login(make_user("gap-reviewer", "reviewer"))
    body = client.get("/api/v1/routes/hr-policy/gaps").json()
    by_id = {c["id"]: c for c in body["clusters"]}
    assert by_id[cluster.pk]["graded"] == cluster.graded


def test_the_demo_has_an_open_recheck_after_a_model_upgrade_and_a_drift_alarm(demo):
    recheck = Recheck.objects.get(route__slug="it-support")
    assert recheck.status == "open" and recheck.versions["model"] == "gen-2026-12"
    assert recheck.plan["bands"][0]["target"] > 0
    assert (
        PolicyVersion.objects.get(route__slug="it-support", status__in=["active", "needs_recheck"]).status
        == "needs_recheck"
    )
    report = recheck_report(recheck)
    assert report["abstention"]["difference"]["low"] > 0  # visibly higher abstention on the new model
    assert Alarm.objects.filter(route__slug="it-support", kind="abstention", status="open").count() == 1


def test_the_demo_has_a_dispute_and_an_appeal(demo):
    disputes = Dispute.objects.filter(route__slug="hr-policy")
    assert sorted(d.kind for d in disputes) == ["answerable_from_passages", "appeal"]
    opened = disputes.get(kind="answerable_from_passages")
    assert opened.quote_ranges["chars"] and opened.policy is not None  # HR's policy is signed: its 24 h clock
    assert "agent" in (demo / "demo-logins.txt").read_text()


def test_the_readme_tour_signs_the_demo_draft_on_the_first_attempt(demo):
    """The policy tour's step 2 names a demo draft; following it, the lead's first signature works."""
    tour = README.read_text()[README.read_text().index("## Policy sign-off") :]
    route_name, version, login = re.search(
        r"The demo already has one: (.+?)'s v(\d+) waits for `(\w+)`", tour.replace("\n   ", " ")
    ).groups()
    url = re.search(r"Open\s+`(/routes/[\w-]+/policy/)`", tour).group(1)
    waiting = PolicyVersion.objects.get(route__name=route_name, version=int(version))
    assert waiting.status == "draft" and waiting.owner.username == login
    assert url == f"/routes/{waiting.route.slug}/policy/"
    # No draft the demo leaves is older than its route's version in force (that would be a roll-back).
    assert all(newer_in_force(d) is None for d in PolicyVersion.objects.filter(status="draft"))
    passwords = dict(line.split()[:2] for line in (demo / "demo-logins.txt").read_text().splitlines())
    page = Client()
    assert page.login(username=login, password=passwords[login])
    assert f'href="/policies/{waiting.pk}/"' in page.get(url).content.decode()
    assert "Read the evidence and sign" in page.get(f"/policies/{waiting.pk}/").content.decode()
    sign_page = page.get(f"/policies/{waiting.pk}/sign/").content.decode()
    assert 'id="older-than-in-force"' not in sign_page
    sha = unescape(re.search(r'name="evidence_sha256" value="([0-9a-f]{64})"', sign_page).group(1))
    done = page.post(
        f"/policies/{waiting.pk}/sign/", {"evidence_sha256": sha, "read_evidence": "yes", "password": passwords[login]}
    )
    assert done.status_code == 302 and done["Location"] == url
    assert PolicyVersion.objects.get(pk=waiting.pk).status == "active"
    # The monitoring tour's state is untouched: IT support's v1 awaits its recheck.
    it = PolicyVersion.objects.get(route__slug="it-support", status__in=["active", "needs_recheck"])
    assert (it.version, it.status) == (1, "needs_recheck")
    logins = (demo / "demo-logins.txt").read_text()
    assert logins.count("lead ") == 1 and "policy_owner on it-support, policy_owner on hr-policy" in logins


def _lead_api() -> APIClient:
    api = APIClient()
    api.force_authenticate(get_user_model().objects.get(username="lead"))
    return api


def test_policy_briefs_shows_a_mean_support_near_0_95_beside_a_full_support_rate_near_a_half(demo):
    """The third demo route (console/review/long_demo.py): answers of 8 to 15 claims each supported
    with probability 0.94, its graded set imported claim by claim, so at the gate's cutoff E[S] reads
    about 0.95 and Pr(S = 1) about a half, on the API and on the page."""
    lead = RoleGrant.objects.get(user__username="lead", route__slug="policy-briefs")
    assert lead.role == "policy_owner"
    body = _lead_api().get("/api/v1/routes/policy-briefs/operating-points?cutoffs=0.85").json()
    [gate] = [row for row in body["rows"] if row["cutoff"] == 0.85]
    assert gate["graded_served"] > 100
    assert 0.92 < gate["expected_support"]["value"] < 0.97
    assert 0.42 < gate["p_fully_supported"]["value"] < 0.6
    assert gate["p_fully_supported"]["high"] < gate["expected_support"]["low"]
    assert body["harm_model"] == "all_or_nothing" and body["declared_functional"] == "expected_support"
    assert body["functional_mismatch"] is True
    page = Client()
    page.force_login(lead.user)
    html = page.get("/operating-points/?route=policy-briefs").content.decode()  # the default grid holds 0.85
    row = re.search(r'<th scope="row">0\.85</th>(.*?)</tr>', html[html.index('class="list long-table"') :], re.S)
    shown = re.findall(r"([\d.]+)% \(", row.group(1))
    assert shown[:2] == [f"{100 * gate[name]['value']:.1f}" for name in ("expected_support", "p_fully_supported")]
    assert 'id="functional-mismatch"' in html


def test_a_draft_on_policy_briefs_carries_the_functional_mismatch_warning(demo):
    api = _lead_api()
    response = api.post("/api/v1/routes/policy-briefs/policies", draft_body(cutoff=0.85, owner="lead"), format="json")
    assert response.status_code == 201, response.content
    [warning] = [w for w in response.json()["warnings"] if w["code"] == "functional_mismatch"]
    assert warning["level"] == "blocking"
    assert 0.92 < warning["expected_support"] < 0.97 and 0.42 < warning["p_fully_supported"] < 0.6
