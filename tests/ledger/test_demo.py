from django.core.management import call_command

from console.accounts.models import RoleGrant, Route
from console.ledger.models import Decision
from console.shadow.selectors import route_shadow_config
from grading.models import FinalLabel


def test_load_demo_builds_a_workspace_people_can_sign_in_to(db, settings, tmp_path, capsys):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", "--decisions", "40")
    assert set(Route.objects.values_list("slug", flat=True)) == {"it-support", "hr-policy", "policy-briefs"}
    # 40 per route, the planted corpus gaps of each route, 20 long answers on Policy briefs (half the
    # count, at least 20), and the model upgrade the monitoring step adds to IT support's last days.
    assert Decision.objects.exclude(request_id__startswith="upgrade-").count() == 80 + 2 * 16 + 20
    assert Decision.objects.filter(request_id__startswith="upgrade-", route__slug="it-support").exists()
    assert route_shadow_config(Route.objects.get(slug="it-support")) == {"kind": "reference"}
    hr_labels = FinalLabel.objects.filter(decision__route__slug="hr-policy", method="imported")
    assert hr_labels.count() == 40
    assert 0 < hr_labels.filter(correct=True).count() < 40
    long_labels = FinalLabel.objects.filter(decision__route__slug="policy-briefs", method="imported")
    assert long_labels.count() == 20 and not long_labels.filter(claims_verifiable__lt=8).exists()
    assert RoleGrant.objects.filter(user__username="grader1", role="grader").exists()
    logins = (tmp_path / "demo-logins.txt").read_text().splitlines()
    username, password = logins[0].split()[:2]
    from django.contrib.auth import authenticate

    assert authenticate(username=username, password=password) is not None
    assert "imported labels" in capsys.readouterr().out


def test_the_demos_claims_are_the_reference_pipelines_answers_copied_or_reworded():
    """Served answers, refused claims and IT support's shadow answers start from one writer, so their
    form tells a grader little about which items were refused; the generator rewords some sentences
    (which the exact verifier then does not find), only in what the gate refuses."""
    from console.review.demo import _TOPICS, demo_records
    from console.shadow.pipelines import PipelinePassage, PipelineRequest, ReferencePipeline
    from console.verification.spans import split_claim_units

    for route in ("it-support", "hr-policy"):
        reworded = {sentence for topic in _TOPICS[route] for sentence in topic.reworded}
        records = list(demo_records(route, 400))
        assert {r["outcome"] for r in records} == {"served", "refused"}
        copies = {"served": 0, "refused": 0}
        for r in records:
            request = PipelineRequest(
                r["request_id"], r["question"], tuple(PipelinePassage(p["id"], p["text"]) for p in r["passages"])
            )
            written = ReferencePipeline().run(request)
            assert set(split_claim_units(r["claim"])) <= set(split_claim_units(written)) | reworded
            assert r["served_answer"] in (None, r["claim"])
            copies[r["outcome"]] += r["claim"] == written
        served = sum(r["outcome"] == "served" for r in records)
        assert copies["served"] / served > 0.85
        assert copies["refused"] / (len(records) - served) < 0.6


def test_every_served_demo_answer_is_written_as_the_shadow_pipeline_writes_a_refusals_answer():
    """Graders read a refusal's answer from the reference pipeline, which only copies sentences from
    the passages. A served answer in the generator's own words would be a style only served answers
    carry (the probe read 0.60 on IT support and 0.62 on HR policy for it), so the gate refuses every
    rewording: each sentence of a served answer is found word for word in its passages."""
    from console.review.demo import demo_records
    from console.verification.spans import split_claim_units

    for route in ("it-support", "hr-policy"):
        records = list(demo_records(route, 600))
        served = [r for r in records if r["outcome"] == "served"]
        assert len(served) > 300
        for r in served:
            shown = " ".join(p["text"] for p in r["passages"]).casefold()
            assert all(unit.casefold() in shown for unit in split_claim_units(r["served_answer"])), r["request_id"]


def test_the_probe_on_the_demos_answers_as_graders_read_them_includes_chance():
    """Served answers beside the reference pipeline's answers to the refusals, 600 decisions a route:
    the probe's interval holds 0.5 (it read 0.55 [0.51, 0.60] on IT support while served answers
    were reworded and the pipeline's never were)."""
    from console.review.demo import demo_records
    from console.shadow.pipelines import PipelinePassage, PipelineRequest, ReferencePipeline
    from console.stats.blindness import GraderView, blindness_probe

    for route in ("it-support", "hr-policy"):
        views, refused = [], []
        for r in demo_records(route, 600):
            request = PipelineRequest(
                r["request_id"], r["question"], tuple(PipelinePassage(p["id"], p["text"]) for p in r["passages"])
            )
            answer = r["served_answer"] or ReferencePipeline().run(request)
            views.append(GraderView(r["question"], answer, tuple(p["text"] for p in r["passages"])))
            refused.append(r["outcome"] == "refused")
        auroc = blindness_probe(views, refused).as_dict()["auroc"]
        assert auroc["low"] <= 0.5 <= auroc["high"], (route, auroc)


def test_the_demos_answers_are_right_when_the_topics_passage_was_retrieved():
    from console.review.demo import demo_answer_is_correct, demo_records

    records = list(demo_records("hr-policy", 400))
    correct = [r for r in records if demo_answer_is_correct(r)]
    assert 0.7 < len(correct) / len(records) < 0.9
    # The gate tends to serve right answers: served items are almost all correct. About half of the
    # refusals are right answers too (mostly rewordings the gate scored low): the false abstentions
    # the console is there to find.
    served = [r for r in records if r["outcome"] == "served"]
    refused = [r for r in records if r["outcome"] == "refused"]
    assert sum(map(demo_answer_is_correct, served)) / len(served) > 0.9
    assert 0.3 < sum(map(demo_answer_is_correct, refused)) / len(refused) < 0.6
