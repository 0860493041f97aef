"""The appeal link of the person refused: HMAC tokens (forgeries are the same 404 as an unknown
route), before and after ingest, at most 3 appeals per link, a per-client rate limit, CSRF, length
caps, and a public page that shows nothing internal."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.test import Client

from console.disputes import services
from console.disputes.models import Dispute
from tests import factories
from tests.at_once import at_once
from tests.disputes.conftest import PASSAGES, REFUSED_SCORE, client_for


@pytest.fixture(autouse=True)
def _fresh_cache(db):
    cache.clear()


def link(client, request_id: str, slug: str = "it-support") -> str:
    response = client.get(f"/api/v1/routes/{slug}/decisions/{request_id}/appeal-link")
    assert response.status_code == 200, response.content
    return response.json()["url"]


def test_integrators_fetch_the_link_and_it_works_before_ingest(route, integrator, reader, reviewer):
    url = link(integrator, "not-yet-ingested/with/slashes")
    assert re.fullmatch(r"/appeal/it-support/not-yet-ingested/with/slashes/[A-Za-z0-9_-]{22}", url)
    assert link(reviewer, "not-yet-ingested/with/slashes") == url  # stable: the same request id, the same link
    assert reader.get("/api/v1/routes/it-support/decisions/x/appeal-link").status_code == 404
    page = Client().get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "72 hours" in html and "You asked" not in html  # the route default; no question before ingest
    response = Client().post(url, {"message": "I needed the VPN steps.", "email": "me@example.org"})
    assert response.status_code == 302 and response["Location"].endswith("?sent=1")
    appeal = Dispute.objects.get(kind="appeal")
    assert appeal.decision is None and appeal.request_id == "not-yet-ingested/with/slashes"
    assert appeal.opened_by is None and appeal.appellant_email == "me@example.org"
    # The decision arrives: reads match it at once, and the after-ingest job attaches it.
    (decision_id,) = factories.ingest([factories.record(request_id="not-yet-ingested/with/slashes")])
    assert reviewer.get(f"/api/v1/disputes/{appeal.pk}").json()["decision"] == decision_id
    assert services.appeals_attach([decision_id]) == 1
    assert Dispute.objects.get(pk=appeal.pk).decision_id == decision_id
    assert "You asked" in Client().get(url).content.decode()


def test_a_forged_token_is_the_same_404_as_an_unknown_route(route, integrator, decisions):
    url = link(integrator, "req-refused")
    forged = url[:-1] + ("A" if url[-1] != "A" else "B")
    unknown_route = url.replace("/appeal/it-support/", "/appeal/no-such-route/")
    other_request = url.replace("/req-refused/", "/req-served/")
    responses = [Client().get(u) for u in (forged, unknown_route, other_request)]
    assert [r.status_code for r in responses] == [404, 404, 404]
    bodies = [re.sub(r'"X-CSRFToken": "[^"]*"', "", r.content.decode()) for r in responses]  # per client
    assert bodies[0] == bodies[1] == bodies[2]
    assert Client().post(forged, {"message": "hello"}).status_code == 404
    assert not Dispute.objects.exists()


def test_a_token_is_not_valid_for_another_route(route, other_route, integrator, decisions):
    url = link(integrator, "req-refused")
    assert Client().get(url.replace("/it-support/", "/hr-policy/")).status_code == 404


def test_rotation_invalidates_old_links(route, integrator, decisions):
    url = link(integrator, "req-refused")
    out = __import__("io").StringIO()
    call_command("appeal_secret_rotate", "it-support", stdout=out)
    assert len(out.getvalue().strip().splitlines()[-1]) >= 40
    assert Client().get(url).status_code == 404
    assert Client().get(link(integrator, "req-refused")).status_code == 200


def test_one_appeal_at_a_time_and_at_most_three_per_link(route, integrator, decisions, reviewer):
    url = link(integrator, "req-refused")
    client = Client()
    for n in range(3):
        assert client.post(url, {"message": f"attempt {n}"}).status_code == 302
        waiting = client.post(url, {"message": "again, while it waits"})
        assert waiting.status_code == 409 and "waiting for a reply" in waiting.content.decode()
        appeal = Dispute.objects.get(kind="appeal", status="open")
        resolved = reviewer.post(
            f"/api/v1/disputes/{appeal.pk}/resolve", {"resolution": "upheld", "note": f"no {n}"}, format="json"
        )
        assert resolved.status_code == 200
    fourth = client.post(url, {"message": "attempt 4"})
    assert fourth.status_code == 409
    assert Dispute.objects.filter(kind="appeal").count() == 3
    assert "as many appeals as it allows" not in client.get(url).content.decode()


def test_a_client_is_rate_limited_across_links(route, integrator, settings):
    settings.APPEALS_PER_CLIENT = 2
    urls = [link(integrator, f"req-{n}") for n in range(3)]
    assert Client().post(urls[0], {"message": "one"}).status_code == 302
    assert Client().post(urls[1], {"message": "two"}).status_code == 302
    limited = Client().post(urls[2], {"message": "three"})
    assert limited.status_code == 429 and Dispute.objects.count() == 2
    other_client = Client(REMOTE_ADDR="203.0.113.9")
    assert other_client.post(urls[2], {"message": "three"}).status_code == 302


def test_csrf_and_length_caps(route, integrator, decisions):
    url = link(integrator, "req-refused")
    strict = Client(enforce_csrf_checks=True)
    assert strict.post(url, {"message": "no token"}).status_code == 403
    page = strict.get(url)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    assert strict.post(url, {"message": "with a token", "csrfmiddlewaretoken": token}).status_code == 302
    assert Client().post(url, {"message": "x" * 2001}).status_code == 400
    assert Client().post(url, {"message": "   "}).status_code == 400
    assert Client().post(url, {"message": "fine", "email": "not-an-address"}).status_code == 400
    assert Dispute.objects.count() == 1


def test_the_public_page_leaks_nothing_internal(route, integrator, decisions, signed_policy):
    url = link(integrator, "req-refused")
    client = Client()
    client.post(url, {"message": "Please tell me where parcels go."})
    html = client.get(url + "?sent=1").content.decode()
    assert "Where do parcels go?" in html  # the question the person asked
    assert "The IT desk will reply." in html and "24 hours" in html  # the policy's message and promise
    forbidden = [
        f"{REFUSED_SCORE}",
        f"{REFUSED_SCORE:.3f}",
        f"{REFUSED_SCORE:.2f}",
        "0.85",
        "gen-SECRET-MODEL-7",
        "hyb-3",
        "snap-Q",
        "nli-4",
        "nli",
        "kb/mfa",
        "de/adresse",
        "IT desk lead",
        "desk@example.org",
        "owner",
        "version",
        "score",
        "cutoff",
        "passage",
        "Open Settings and choose Reset",
    ]
    forbidden += [p["text"] for p in PASSAGES] + [p["text"][:20] for p in PASSAGES]
    lowered = html.lower()
    for text in forbidden:
        assert text.lower() not in lowered, f"the appeal page shows {text!r}"
    assert "Cache-Control" in client.get(url) and "no-store" in client.get(url)["Cache-Control"]


def test_appeals_show_in_the_inbox_and_the_appellant_hears_the_outcome(route, integrator, decisions, reviewer):
    url = link(integrator, "req-refused")
    Client().post(url, {"message": "I needed this.", "email": "asker@example.org"})
    listed = reviewer.get("/api/v1/disputes?route=it-support").json()["disputes"]
    assert [d["kind"] for d in listed] == ["appeal"] and listed[0]["opened_by"] is None
    resolved = reviewer.post(
        f"/api/v1/disputes/{listed[0]['id']}/resolve",
        {"resolution": "overturned", "note": "You are right; the desk will answer."},
        format="json",
    )
    assert resolved.status_code == 200
    from console.notify.models import Notification

    note = Notification.objects.get(recipient="asker@example.org")
    assert "overturned" in note.body and "the desk will answer" in note.body
    assert "0.61" not in note.body


def test_a_reader_of_another_route_gets_no_link(route, other_route, decisions):
    hr_integrator = client_for(factories.make_user("hr-integrator", "integrator", other_route))
    assert hr_integrator.get("/api/v1/routes/it-support/decisions/req-refused/appeal-link").status_code == 404


def test_unstorable_request_ids_and_filters_are_4xx_not_500(route, integrator, reviewer):
    assert integrator.get("/api/v1/routes/it-support/decisions/a%00b/appeal-link").status_code == 400
    assert integrator.get(f"/api/v1/routes/it-support/decisions/{'x' * 201}/appeal-link").status_code == 400
    assert Client().get("/appeal/it-support/a%00b/AAAAAAAAAAAAAAAAAAAAAA").status_code in (400, 404)  # NUL: 400
    assert Client().get("/appeal/it-support/%ED%A0%80/AAAAAAAAAAAAAAAAAAAAAA").status_code == 404
    assert reviewer.get("/api/v1/disputes?route=a%00b").json() == {"disputes": [], "results": [], "next": None}


def test_the_refusal_message_is_rendered_and_sanitised_as_on_the_policy_page(
    route, integrator, decisions, owner_client
):
    from grading.templatetags.grading_tags import render_markdown
    from tests.disputes.conftest import sign_policy

    message = "**HR** will reply. <script>alert(1)</script> [Leave policy](https://intranet.example.org/leave)"
    policy = sign_policy(route, owner_client.user, message=message)
    html = Client().get(link(integrator, "req-refused")).content.decode()
    assert "**HR**" not in html and "<strong>HR</strong> will reply." in html
    assert "alert(1)</script>" not in html
    assert str(render_markdown(message)) in html  # the policy page's filter, nh3 and all
    pages = Client()
    pages.force_login(owner_client.user)
    assert str(render_markdown(message)) in pages.get(f"/policies/{policy.pk}/").content.decode()


def test_a_returning_appellant_sees_the_status_then_the_outcome_not_the_form(route, integrator, decisions, reviewer):
    url = link(integrator, "req-refused")
    client = Client()
    assert 'name="message"' in client.get(url).content.decode()  # a first visit: the form
    client.post(url, {"message": "I needed the parcel address.", "email": "asker@example.org"})
    appeal = Dispute.objects.get(kind="appeal")
    waiting = client.get(url).content.decode()
    assert 'name="message"' not in waiting and "as many appeals" not in waiting
    assert f"Waiting for a reply, due by <strong>{appeal.due_by:%Y-%m-%d %H:%M} UTC</strong>" in waiting
    reviewer.post(
        f"/api/v1/disputes/{appeal.pk}/resolve",
        {"resolution": "overturned", "note": "Passage 2 answers it: Hauptstraße 5."},
        format="json",
    )
    answered = Client().get(url).content.decode()  # another browser: the link is what identifies the appeal
    assert "<strong>The refusal was overturned: the answer should have been given</strong>" in answered
    assert "Passage 2 answers it: Hauptstraße 5." in answered
    assert 'name="message"' not in answered and "reviewer" not in answered  # no form, no names


def test_reviewers_copy_a_refusals_appeal_link_from_its_page_and_revoke_it(
    route, integrator, decisions, reviewer, reader, settings
):
    from audit.models import AuditEvent

    settings.CONSOLE_URL = "https://console.example.org"
    url = link(integrator, "req-refused")
    pages = Client()
    pages.force_login(reviewer.user)
    html = pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert f'value="https://console.example.org{url}"' in html and 'data-copy="#appeal-link-url"' in html
    assert "copy-link.js" in html  # the Copy button's script is a file: the CSP forbids inline handlers
    assert 'id="appeal-link"' not in pages.get(f"/decisions/{decisions[1]}/").content.decode()  # served
    reader_pages = Client()
    reader_pages.force_login(reader.user)
    assert 'id="appeal-link"' not in reader_pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert reader_pages.post(f"/decisions/{decisions[0]}/appeal-link/revoke/", {"reason": "x"}).status_code == 403
    integrator_pages = Client()
    integrator_pages.force_login(integrator.user)
    integrator_html = integrator_pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert "appeal-link-url" in integrator_html and "Revoke" not in integrator_html

    response = pages.post(f"/decisions/{decisions[0]}/appeal-link/revoke/", {"reason": "Posted on a forum."})
    assert response.status_code == 302 and response["Location"].endswith("#appeal-link")
    event = AuditEvent.objects.get(action="appeal_link_revoked")
    assert event.actor == "user:reviewer" and event.route == "it-support"
    assert event.payload == {"request_id": "req-refused", "reason": "Posted on a forum."}
    assert Client().get(url).status_code == 404
    assert Client().post(url, {"message": "still?"}).status_code == 404
    revoked = integrator.get("/api/v1/routes/it-support/decisions/req-refused/appeal-link")
    assert revoked.status_code == 409 and revoked.json()["error"]["code"] == "appeal_link_revoked"
    html = pages.get(f"/decisions/{decisions[0]}/").content.decode()
    assert 'id="appeal-link-revoked"' in html and "Posted on a forum." in html and url not in html
    assert pages.post(f"/decisions/{decisions[0]}/appeal-link/revoke/", {"reason": "again"}).status_code == 409
    assert Client().get(link(integrator, "req-other")).status_code == 200  # other refusals' links still work


@pytest.mark.parametrize(
    "email",
    [
        "me@example.org\r\nBcc: all@example.org",
        "me@example.org\nX-Header: y",
        "me@example.org, second@example.org",
        "me@example.org;second@example.org",
        "@",
        "me@",
        "@example.org",
        "me@@example.org",
        "me@example.org\x07",
    ],
)
def test_an_appeal_email_is_one_address_with_no_control_characters(route, integrator, decisions, email):
    url = link(integrator, "req-refused")
    response = Client().post(url, {"message": "I needed the VPN steps.", "email": email})
    assert response.status_code == 400
    assert not Dispute.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_appeals_sent_at_once_from_one_client_cannot_race_past_its_limit(route, integrator, settings, monkeypatch):
    """Fourteen appeals at once, each through its own link, against a limit of ten per client: the
    count is read and written under the client's lock, so ten are taken and four refused."""
    import time

    from django.core.cache.backends.db import DatabaseCache

    settings.APPEALS_PER_CLIENT = 10
    urls = [link(integrator, f"req-race-{n}") for n in range(14)]
    real_get = DatabaseCache.get

    def slow_get(self, key, *args, **kwargs):  # widen the window between reading the count and writing it
        value = real_get(self, key, *args, **kwargs)
        if key.startswith("appeal-client:"):
            time.sleep(0.2)
        return value

    monkeypatch.setattr(DatabaseCache, "get", slow_get)
    codes = at_once(
        urls, lambda url: Client(REMOTE_ADDR="198.51.100.20").post(url, {"message": "let me in"}).status_code
    )
    assert sorted(codes) == [302] * 10 + [429] * 4
    assert Dispute.objects.filter(kind="appeal").count() == 10
    cache.clear()
