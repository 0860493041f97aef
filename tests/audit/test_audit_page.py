"""The audit page as auditors use it: filters, readable payloads, linked objects, honest wording;
and the navigation's adjudication backlog."""

import re

import pytest
from django.test import Client

from audit.models import AuditEvent
from audit.services import Actor
from grading.models import GradingItem
from grading.services import labels as labels_services
from grading.services import queue as queue_services
from tests.factories import ingest, make_user, record
from tests.grading.helpers import pooled


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def auditor_pages(route):
    return signed_in(make_user("page-auditor", "auditor"))


def rows(page: str) -> list[str]:
    return re.findall(r"<tr><td class=\"num mono\">(\d+)</td>", page)


def grade_everything(verdicts: dict) -> None:
    """Each grader grades every item they can claim, as themselves."""
    for user, verdict in verdicts.items():
        while (
            assignment := queue_services.assignment_claim(actor=Actor.user(user), grader=user, route_ids=None)
        ) is not None:
            labels_services.grade_submit(
                actor=Actor.user(user), grader=user, public_id=assignment.item.public_id, verdict=verdict
            )


def test_the_audit_page_filters_by_action_actor_object_and_time(route, auditor_pages):
    [first] = ingest([record()])
    ingest([record(occurred_at="2026-10-01T00:00:00Z")])
    everything = rows(auditor_pages.get("/audit/").content.decode())
    ingested = list(AuditEvent.objects.filter(action="decisions_ingested").values_list("seq", flat=True))
    by_action = rows(auditor_pages.get("/audit/?action=decisions_ingested").content.decode())
    assert sorted(map(int, by_action)) == sorted(ingested) and len(by_action) < len(everything)
    # The pool entries of each batch are the system's own (grading_pool_enter), not the sender's.
    by_tests = rows(auditor_pages.get("/audit/?actor=system:tests").content.decode())
    mine = AuditEvent.objects.filter(actor="system:tests").order_by("-seq").values_list("seq", flat=True)
    assert by_tests == [str(seq) for seq in mine] and len(by_tests) < len(everything)
    assert rows(auditor_pages.get("/audit/?actor=user:nobody").content.decode()) == []
    by_object = rows(auditor_pages.get(f"/audit/?object=decision:{first}").content.decode())
    entered = AuditEvent.objects.filter(action="pool_entered").order_by("seq").values_list("seq", flat=True)[0]
    assert by_object == [str(entered), str(ingested[0])]
    assert rows(auditor_pages.get("/audit/?date_to=2000-01-01").content.decode()) == []
    assert rows(auditor_pages.get("/audit/?date_from=2000-01-01").content.decode()) == everything
    bad = auditor_pages.get("/audit/?object=nonsense&date_from=01/02/2026").content.decode()
    assert "Write the object as type:id" in bad and "Enter a valid date" in bad


def test_the_payload_is_viewable_and_objects_link_to_their_pages(route, auditor_pages):
    [decision_id] = ingest([record()])
    page = auditor_pages.get(f"/audit/?object=decision:{decision_id}").content.decode()
    assert '<details><summary>view</summary><pre class="payload">' in page
    assert "&quot;created&quot;: 1" in page  # the payload itself, escaped
    assert f'<a href="/decisions/{decision_id}/">decision:{decision_id}</a>' in page  # listed in the payload
    routes = auditor_pages.get("/audit/?action=route_created").content.decode()
    route_id = AuditEvent.objects.get(action="route_created").object_id
    assert f'<a href="/operating-points/?route=it-support">route:{route_id}</a>' in routes


def test_a_label_the_grades_decided_is_not_credited_to_the_last_grader(route, auditor_pages):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    [decision_id] = pooled([record(question="Agreed")])
    grade_everything({ana: "correct", ben: "correct"})
    event = AuditEvent.objects.get(action="label_decided")
    assert event.actor in ("user:ana", "user:ben")  # the data keeps who set it off
    detail = signed_in(make_user("wording-reviewer", "reviewer")).get(f"/decisions/{decision_id}/").content.decode()
    assert f"Final label decided by the console, after {event.actor}&#x27;s grade" in detail
    assert f"Final label decided by {event.actor}" not in detail
    audit = auditor_pages.get("/audit/?action=label_decided").content.decode()
    assert f"the console, after {event.actor}&#x27;s grade" in audit


def test_the_navigation_shows_the_adjudication_backlog_to_reviewers(route):
    ana, ben = make_user("ana", "grader"), make_user("ben", "grader")
    pooled([record(question="Disputed one"), record(question="Disputed two")])
    grade_everything({ana: "correct", ben: "incorrect"})
    assert GradingItem.objects.filter(status="adjudication").count() == 2
    reviewer = signed_in(make_user("nav-reviewer", "reviewer"))
    page = reviewer.get("/refusals/").content.decode()
    assert 'hx-get="/nav/adjudication-backlog" hx-trigger="load"' in page
    badge = reviewer.get("/nav/adjudication-backlog").content.decode()
    assert re.fullmatch(r'<span class="badge" title="2 items waiting for adjudication">2</span>', badge)
    # Graders do not review labels: no badge, and no count for them.
    grader_page = signed_in(ana).get("/grading/").content.decode()
    assert "adjudication-backlog" not in grader_page
    assert signed_in(ana).get("/nav/adjudication-backlog").content == b""
