from django.core.management import call_command

from console.accounts.models import RoleGrant
from console.ledger.models import Decision, Route
from grading.models import FinalLabel


def test_load_demo_builds_a_workspace_people_can_sign_in_to(db, settings, tmp_path, capsys):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", "--decisions", "40")
    assert set(Route.objects.values_list("slug", flat=True)) == {"it-support", "hr-policy"}
    # 40 per route, the planted corpus gaps of each route, and the model upgrade the monitoring step adds
    # to IT support's last days.
    assert Decision.objects.exclude(request_id__startswith="upgrade-").count() == 80 + 2 * 16
    assert Decision.objects.filter(request_id__startswith="upgrade-", route__slug="it-support").exists()
    assert Route.objects.get(slug="it-support").shadow_config == {"kind": "reference"}
    hr_labels = FinalLabel.objects.filter(decision__route__slug="hr-policy", method="imported")
    assert hr_labels.count() == 40
    assert 0 < hr_labels.filter(correct=True).count() < 40
    assert RoleGrant.objects.filter(user__username="grader1", role="grader").exists()
    logins = (tmp_path / "demo-logins.txt").read_text().splitlines()
    username, password = logins[0].split()[:2]
    from django.contrib.auth import authenticate

    assert authenticate(username=username, password=password) is not None
    assert "imported labels" in capsys.readouterr().out


def test_the_reference_pipeline_writes_the_demos_answers_word_for_word():
    """Served answers, refused claims and shadow answers of the demo come from one writer, so their
    form cannot tell a grader which items were refused."""
    from console.review.demo import demo_records
    from console.shadow.pipelines import PipelinePassage, PipelineRequest, ReferencePipeline

    for route in ("it-support", "hr-policy"):
        records = list(demo_records(route, 400))
        assert {r["outcome"] for r in records} == {"served", "refused"}
        for r in records:
            request = PipelineRequest(
                r["request_id"], r["question"], tuple(PipelinePassage(p["id"], p["text"]) for p in r["passages"])
            )
            assert ReferencePipeline().run(request) == r["claim"]
            assert r["served_answer"] in (None, r["claim"])
            assert not r["claim"].startswith("I believe")


def test_the_demos_answers_are_right_when_the_topics_passage_was_retrieved():
    from console.review.demo import demo_answer_is_correct, demo_records

    records = list(demo_records("hr-policy", 400))
    correct = [r for r in records if demo_answer_is_correct(r)]
    assert 0.7 < len(correct) / len(records) < 0.9
    # The gate tends to serve right answers: served items are mostly correct, refused mostly wrong.
    served = [r for r in records if r["outcome"] == "served"]
    refused = [r for r in records if r["outcome"] == "refused"]
    assert sum(map(demo_answer_is_correct, served)) / len(served) > 0.9
    assert sum(map(demo_answer_is_correct, refused)) / len(refused) < 0.5
