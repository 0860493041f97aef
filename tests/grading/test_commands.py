from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.models import GradingItem, GradingPlan
from tests.factories import recent, record
from tests.grading.helpers import pooled


def test_grading_plan_sets_rates_from_the_bands(route):
    pooled([record(gate={"name": "nli", "score": 0.3, "cutoff": 0.85}, occurred_at=recent()) for _ in range(4)])
    out = StringIO()
    call_command(
        "grading_plan", "it-support", "--band", "0:0.5:2", "--band", "0.5:1:10", "--gold-rate", "0.05", stdout=out
    )
    plan = GradingPlan.objects.get(route=route)
    assert [s["rate"] for s in plan.strata] == [0.5, 1.0] and plan.gold_rate == 0.05
    assert "rate 0.5000" in out.getvalue()
    with pytest.raises(CommandError, match="LOW:HIGH:TARGET"):
        call_command("grading_plan", "it-support", "--band", "0.5")


def test_grading_gold_makes_a_gold_item_from_a_decision(route):
    sent = record()
    pooled([sent])
    call_command(
        "grading_gold",
        "it-support",
        sent["request_id"],
        "--verdict",
        "incorrect",
        "--answer",
        "Nope.",
        stdout=StringIO(),
    )
    gold = GradingItem.objects.get(is_gold=True)
    assert (gold.answer, gold.gold_verdict) == ("Nope.", "incorrect")
    with pytest.raises(CommandError, match="No decision"):
        call_command("grading_gold", "it-support", "missing", "--verdict", "correct")
