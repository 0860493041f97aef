"""With an identity provider, an owner who signs in there signs a policy after authenticating there
again (step-up): the evidence (auth_time, acr, amr) goes with the signature and into its audit event,
and a signature later than OIDC_STEP_UP_SECONDS after that authentication is refused."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from console.accounts.models import Identity
from console.governance.models import PolicyVersion, SigningStepUp

ISSUER = "https://id.example.test"


@pytest.fixture
def provider_owner(owner, settings):
    settings.OIDC_ISSUER = ISSUER
    settings.OIDC_CLIENT_ID = "console"
    Identity.objects.create(user=owner.user, issuer=ISSUER, subject="sub-owner", last_sign_in_at=timezone.now())
    browser = Client()
    browser.force_login(owner.user, backend="console.accounts.backends.IdentityProviderBackend")
    return browser


def _confirmed(browser: Client, *, seconds_ago: int) -> None:
    session = browser.session
    session["oidc_fresh_auth"] = {
        "issuer": ISSUER,
        "subject": "sub-owner",
        "auth_time": int(time.time()) - seconds_ago,
        "acr": "urn:mace:incommon:iap:silver",
        "amr": ["pwd", "otp"],
    }
    session.save()


def test_the_sign_page_sends_a_provider_owner_to_confirm_at_the_provider(draft, provider_owner):
    page = provider_owner.get(f"/policies/{draft['id']}/sign/").content.decode()
    assert 'name="password"' not in page
    assert f"/accounts/oidc/login/?step_up=1&amp;next=/policies/{draft['id']}/sign/" in page


def test_a_fresh_step_up_signs_and_its_evidence_is_recorded_with_the_signature(draft, provider_owner):
    _confirmed(provider_owner, seconds_ago=30)
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes"}
    done = provider_owner.post(f"/policies/{draft['id']}/sign/", form)
    assert done.status_code == 302
    policy = PolicyVersion.objects.get(pk=draft["id"])
    assert policy.status == "active"
    proof = SigningStepUp.objects.get(policy=policy)
    assert proof.subject == "sub-owner" and proof.amr == ["pwd", "otp"] and proof.acr.endswith("silver")
    assert proof.auth_time <= policy.signed_at
    event = AuditEvent.objects.get(action="policy_signed", object_id=str(policy.pk))
    assert event.payload["step_up"]["auth_time"] == proof.auth_time.isoformat()
    assert event.payload["step_up"]["amr"] == ["pwd", "otp"]
    # One authentication, one signature.
    assert "oidc_fresh_auth" not in provider_owner.session


def test_a_signature_after_the_authentication_window_is_refused(draft, provider_owner, settings):
    settings.OIDC_STEP_UP_SECONDS = 300
    _confirmed(provider_owner, seconds_ago=301)
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes"}
    assert provider_owner.post(f"/policies/{draft['id']}/sign/", form).status_code == 400
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"
    assert not SigningStepUp.objects.exists()


def test_without_a_step_up_nothing_is_signed(draft, provider_owner):
    form = {"evidence_sha256": draft["evidence_sha256"], "read_evidence": "yes", "password": "pw-12345678"}
    assert provider_owner.post(f"/policies/{draft['id']}/sign/", form).status_code == 400
    assert PolicyVersion.objects.get(pk=draft["id"]).status == "draft"


def test_the_service_refuses_a_stale_step_up_whoever_calls_it(draft, owner, settings):
    from audit.services import Actor
    from console.core.errors import Forbidden
    from console.governance import services

    policy = PolicyVersion.objects.get(pk=draft["id"])
    stale = {"issuer": ISSUER, "subject": "s", "auth_time": int(time.time()) - 3600}
    with pytest.raises(Forbidden):
        services.policy_sign(
            actor=Actor.user(owner.user),
            user=owner.user,
            policy=policy,
            evidence_sha256=draft["evidence_sha256"],
            proof=services.SigningProof.PROVIDER,
            step_up=stale,
        )
