"""Wrong passwords sent to the sign form at once: the sign-in's limit holds for them too."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.test import Client

from console.governance.models import PolicyVersion
from tests import factories
from tests.at_once import at_once
from tests.governance.conftest import draft_body


@pytest.mark.django_db(transaction=True)
def test_wrong_sign_form_passwords_sent_at_once_cannot_race_past_the_limit(route, reviewer, owner, monkeypatch):
    """Twelve guesses of the owner's password at once on the sign page, against a limit of five:
    each is checked and counted under the username's lock, so at most five passwords are compared
    and the rest are refused without one; the right password is then refused too."""
    cache.clear()
    factories.ingest([factories.record(request_id=f"req-{n}") for n in range(3)])
    created = reviewer.post("/api/v1/routes/it-support/policies", draft_body(), format="json")
    assert created.status_code == 201, created.content
    draft = created.json()
    url = f"/policies/{draft['id']}/sign/"
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes"}
    real_check = AbstractBaseUser.check_password
    compared: list[str] = []

    def slow_check(self, raw):  # widen the window between reading the count and writing it
        compared.append(raw)
        time.sleep(0.2)
        return real_check(self, raw)

    # Signed in before the guesses: a sign-in clears the username's count, as a right password does.
    owners_page = Client(REMOTE_ADDR="10.0.4.99")
    owners_page.force_login(owner.user)
    monkeypatch.setattr(AbstractBaseUser, "check_password", slow_check)

    def signed_in(n: int) -> tuple[int, Client]:
        page = Client(REMOTE_ADDR=f"10.0.4.{n}")
        page.force_login(owner.user)
        return n, page

    bodies = at_once(
        range(12),
        lambda guess: guess[1].post(url, form | {"password": f"guess-{guess[0]}"}).content.decode(),
        prepare=signed_in,
    )
    assert len(bodies) == 12
    assert len(compared) == 5
    assert sum("The password is not right" in body for body in bodies) == 5
    assert sum("Too many failed attempts" in body for body in bodies) == 7
    assert owners_page.post(url, form | {"password": "pw-12345678"}).status_code == 429
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"
    cache.clear()
