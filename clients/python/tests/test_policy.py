import pytest
from abstention_console import Console, NoSignedPolicy, PolicyRefused, PolicyUnavailable

POLICY = {
    "route": "it-support",
    "version": 3,
    "status": "active",
    "cutoff": 0.62,
    "band_lower": 0.4,
    "refusal_message": "A person will answer within a day.",
    "escalation": {"contact": "desk", "channel": "mailto:desk@example.org", "response_hours": 24},
    "owner": "lead",
    "signed_at": "2026-11-20T10:00:00+00:00",
}
DEFAULT = {"cutoff": 1.0, "band_lower": None, "refusal_message": "Please ask the service desk."}


def _console(fake, tmp_path, down=lambda: False, **kwargs):
    return Console("http://console", "secret", spool_dir=tmp_path, transport=fake.transport(down=down), **kwargs)


def test_the_policy_is_revalidated_with_its_etag(fake, tmp_path):
    fake.policies["it-support"] = POLICY
    with _console(fake, tmp_path) as console:
        assert console.policy("it-support") == POLICY
        assert console.policy("it-support") == POLICY
    first, second = fake.policy_requests
    assert "if-none-match" not in first
    assert second["if-none-match"].startswith('"')


def test_a_newly_signed_policy_replaces_the_cached_one(fake, tmp_path):
    fake.policies["it-support"] = POLICY
    with _console(fake, tmp_path) as console:
        console.policy("it-support")
        fake.policies["it-support"] = {**POLICY, "version": 4, "cutoff": 0.7}
        assert console.policy("it-support")["cutoff"] == 0.7


def test_within_policy_ttl_no_request_is_made(fake, tmp_path):
    fake.policies["it-support"] = POLICY
    with _console(fake, tmp_path, policy_ttl=60) as console:
        console.policy("it-support")
        console.policy("it-support")
    assert len(fake.policy_requests) == 1


def test_the_last_known_policy_is_used_when_the_console_is_down_even_after_a_restart(fake, tmp_path):
    fake.policies["it-support"] = POLICY
    down = False
    with _console(fake, tmp_path, down=lambda: down) as console:
        console.policy("it-support")
        down = True
        assert console.policy("it-support") == POLICY
    with _console(fake, tmp_path, down=lambda: True, default_policy=DEFAULT) as restarted:
        assert restarted.policy("it-support") == POLICY


def test_the_default_policy_is_used_when_nothing_is_known(fake, tmp_path):
    with _console(fake, tmp_path, down=lambda: True, default_policy=DEFAULT) as console:
        assert console.policy("it-support") == DEFAULT
    with _console(fake, tmp_path / "other", down=lambda: True, default_policy=lambda route: {"route": route}) as c:
        assert c.policy("hr") == {"route": "hr"}


def test_without_a_default_an_unreachable_console_raises_a_clear_error(fake, tmp_path):
    with _console(fake, tmp_path, down=lambda: True) as console:
        with pytest.raises(PolicyUnavailable, match="no default_policy"):
            console.policy("it-support")


def test_a_route_without_a_signed_policy_gets_the_default_or_an_error(fake, tmp_path):
    with _console(fake, tmp_path) as console:
        with pytest.raises(NoSignedPolicy):
            console.policy("it-support")
    with _console(fake, tmp_path, default_policy=DEFAULT) as console:
        assert console.policy("it-support") == DEFAULT


def test_a_refused_token_is_not_hidden_by_the_fail_safe(fake, tmp_path):
    fake.policies["it-support"] = POLICY
    console = Console("http://console", "wrong", spool_dir=tmp_path, transport=fake.transport(), default_policy=DEFAULT)
    with console, pytest.raises(PolicyRefused, match="401"):
        console.policy("it-support")


def test_the_design_documents_import_name_is_the_same_client():
    import console_client

    assert console_client.Console is Console
