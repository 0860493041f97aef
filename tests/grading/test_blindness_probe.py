"""The blindness probe of a route, from the outside: the API for reviewers, the agreement page, the demo."""

from __future__ import annotations

import random

import pytest
from django.core.cache import cache
from django.core.management import call_command

from console.accounts.models import Route
from grading.blindness import route_blindness
from grading.services.pool import grading_pool_enter
from tests.factories import TEST_ACTOR, make_user, record, served_record
from tests.grading.helpers import api_client, pooled
from tests.jobs_inline import run_jobs

WORDS = (
    "open settings security choose reset portal badge number client install share recycle bin days "
    "password expire page laptop request device manager approve"
).split()


@pytest.fixture(autouse=True)
def fresh_cache(db):
    cache.clear()
    yield
    cache.clear()


def _answer(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))).capitalize() + "."


def pool_with_style(served: int, refused: int, *, refused_prefix: str, seed: int = 1) -> None:
    """Served answers and refused claims (the route has no shadow pipeline) from one word generator;
    the refused ones start with `refused_prefix`."""
    rng = random.Random(seed)
    records = [served_record(served_answer=_answer(rng)) for _ in range(served)]
    records += [record(claim=refused_prefix + _answer(rng)) for _ in range(refused)]
    pooled(records)


def test_a_reviewer_reads_a_warning_when_refused_answers_carry_a_telltale_opening(route, reviewer):
    pool_with_style(60, 40, refused_prefix="I believe you can ")
    response = reviewer.get("/api/v1/routes/it-support/blindness")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["n"] == 100 and body["served"] == 60 and body["refused"] == 40
    assert set(body["auroc"]) == {"value", "low", "high"}
    assert body["auroc"]["low"] > 0.9
    assert body["warning"] is True
    assert body["features"][0] == {
        "feature": 'the answer opens with "i believe"',
        "leans": "refused",
        "weight": body["features"][0]["weight"],
    }
    assert "Graders can likely tell" in body["message"]


def test_answers_written_the_same_way_raise_no_warning(route, reviewer):
    pool_with_style(60, 40, refused_prefix="")
    body = reviewer.get("/api/v1/routes/it-support/blindness").json()
    assert body["enough"] and not body["warning"]
    assert body["auroc"]["low"] < 0.5 < body["auroc"]["high"]


def test_too_few_items_answer_not_enough_rather_than_an_error(route, reviewer):
    pool_with_style(30, 5, refused_prefix="I believe ")
    response = reviewer.get("/api/v1/routes/it-support/blindness")
    assert response.status_code == 200
    body = response.json()
    assert body["enough"] is False and body["auroc"] is None and body["warning"] is False
    assert body["message"].startswith("Not enough items to probe: 30 served and 5 refused")


def test_graders_and_strangers_never_read_the_probe(route, grader, outsider, owner, anonymous):
    pool_with_style(25, 25, refused_prefix="I believe ")
    assert grader.get("/api/v1/routes/it-support/blindness").status_code == 403
    assert outsider.get("/api/v1/routes/it-support/blindness").status_code == 403
    assert owner.get("/api/v1/routes/it-support/blindness").status_code == 403
    assert anonymous.get("/api/v1/routes/it-support/blindness").status_code in (401, 403)


def test_a_reviewer_of_another_route_gets_404(route, other_route):
    client = api_client(make_user("hr-reviewer", "reviewer", other_route))
    assert client.get("/api/v1/routes/it-support/blindness").status_code == 404
    assert client.get("/api/v1/routes/hr-policy/blindness").status_code == 200


def test_the_endpoint_is_in_the_openapi_schema(reviewer):
    schema = reviewer.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/v1/routes/{slug}/blindness" in schema
    assert "BlindnessProbe" in schema


def test_the_agreement_page_shows_the_probe_and_its_warning_in_words(route, page_of):
    pool_with_style(60, 40, refused_prefix="I believe you can ")
    page = page_of(make_user("page-reviewer", "reviewer")).get("/grading/agreement/?route=it-support")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Can graders tell refused from served?" in html
    assert "Probe AUROC" in html
    assert "Graders can likely tell refused from served answers by their form" in html
    assert "the answer opens with &quot;i believe&quot;" in html


def test_the_agreement_page_says_when_there_are_not_enough_items(route, page_of):
    page = page_of(make_user("page-reviewer", "reviewer")).get("/grading/agreement/?route=it-support")
    assert "Not enough items to probe: 0 served and 0 refused" in page.content.decode()


def test_a_second_reading_comes_from_the_cache_until_the_pool_grows(route, django_assert_max_num_queries):
    pool_with_style(30, 30, refused_prefix="")
    first = route_blindness(route)
    with django_assert_max_num_queries(2):  # the pool's counts, the cached reading
        assert route_blindness(route) == first
    pool_with_style(0, 1, refused_prefix="", seed=2)
    assert route_blindness(route)["refused"] == 31


@pytest.mark.slow  # the whole demo with every job it queues run: the slowest test of the fast lane
def test_the_demos_probe_stays_below_the_warning_and_reads_no_copying_style(db, settings, tmp_path):
    """Both demo routes grade a refusal on the reference pipeline's answer, copied from the passages
    as every served answer is, so how much of an answer is copied no longer tells its origin: the
    probe stays below the warning line and neither passage-copying share is among its strongest
    features. What it still reads is what answers are about (the planted gaps' answers, the topics
    the gate refuses more), not how they are written. Graded on the logged claims instead, refusals
    would give themselves away by how little of them the passages hold."""
    settings.DATA_DIR = tmp_path
    with run_jobs():
        call_command("load_demo", "--decisions", "300")
    # Refusals whose shadow run has finished enter the pool through the sweeper.
    grading_pool_enter(actor=TEST_ACTOR, limit=10_000)
    readings = {slug: route_blindness(Route.objects.get(slug=slug)) for slug in ("it-support", "hr-policy")}
    for slug, reading in readings.items():
        print(slug, reading["served"], reading["refused"], reading["auroc"], reading["features"][:3])
        assert reading["enough"], (slug, reading["message"])
        assert not reading["warning"], (slug, reading["message"])
        assert reading["auroc"]["low"] < 0.6, slug
        strongest = {feature["feature"] for feature in reading["features"][:3]}
        assert not {f for f in strongest if "from the passages" in f or "found in the passages" in f}, (slug, strongest)


def test_the_operating_points_page_flags_a_route_whose_graders_can_tell_the_origin(route, page_of):
    lead = page_of(make_user("lead", "policy_owner", route))
    pool_with_style(60, 40, refused_prefix="")
    assert "Blinding in doubt" not in lead.get("/operating-points/?route=it-support").content.decode()
    pool_with_style(60, 40, refused_prefix="I believe you can ", seed=3)
    page = lead.get("/operating-points/?route=it-support").content.decode()
    assert "Blinding in doubt" in page
    assert "the false-abstention rate and the correct answers withheld may read too low" in page
    assert "/grading/agreement/?route=it-support#blindness" in page


def test_an_interval_that_excludes_chance_below_the_warning_line_reads_as_a_weak_sign(route, reviewer, page_of):
    rng = random.Random(1)
    served = [served_record(served_answer=_answer(rng)) for _ in range(60)]
    # Fewer than a third of the refused claims carry the telltale opening: a sign, but a weak one.
    refused = [record(claim=("I believe you can " if i < 18 else "") + _answer(rng)) for i in range(60)]
    pooled(served + refused)
    body = reviewer.get("/api/v1/routes/it-support/blindness").json()
    assert 0.5 < body["auroc"]["low"] <= 0.6, body["auroc"]
    assert body["sign"] == "weak" and body["warning"] is False
    assert body["message"].startswith("A weak sign that the answer's form gives its origin away")
    page = page_of(make_user("page-reviewer", "reviewer")).get("/grading/agreement/?route=it-support")
    assert "A weak sign" in page.content.decode()


def test_no_sign_is_said_only_when_the_interval_includes_chance(route, reviewer):
    pool_with_style(60, 40, refused_prefix="")
    body = reviewer.get("/api/v1/routes/it-support/blindness").json()
    assert body["auroc"]["low"] <= 0.5 <= body["auroc"]["high"]
    assert body["sign"] == "none" and body["reason"] is None
    assert body["message"].startswith("No sign that")
