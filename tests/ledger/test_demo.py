from django.core.management import call_command

from console.accounts.models import RoleGrant
from console.ledger.models import Decision, Route
from grading.models import FinalLabel


def test_load_demo_builds_a_workspace_people_can_sign_in_to(db, settings, tmp_path, capsys):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", "--decisions", "40")
    assert set(Route.objects.values_list("slug", flat=True)) == {"it-support", "hr-policy"}
    assert Decision.objects.count() == 80 + 2 * 20  # and the planted corpus gaps of each route
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
