"""The provider's answer is checked before anyone is signed in: the state must be one this session
started, and the ID token's signature, issuer, audience, expiry and nonce must hold. The provider here
is local (its keys made by the test), so each bad token can be made on purpose."""

from __future__ import annotations

import time

import pytest
from joserfc.jwk import RSAKey

from console.accounts.identity.provider import SignInRefused
from tests.accounts.oidc_fixtures import LocalProvider


@pytest.fixture
def idp(settings, monkeypatch):
    return LocalProvider(settings, monkeypatch)


def test_a_well_formed_answer_gives_the_id_tokens_claims(idp):
    session, state, nonce, query = idp.start()
    idp.id_token = idp.sign(idp.claims(nonce, preferred_username="alice"))
    answer = idp.answer(session, state)
    assert answer.claims["sub"] == "s-1"
    assert answer.claims["preferred_username"] == "alice"


def test_the_sign_in_asks_for_a_code_with_pkce_state_and_nonce(idp):
    _, state, nonce, query = idp.start()
    assert query["response_type"] == ["code"]
    assert query["code_challenge_method"] == ["S256"]
    assert query["code_challenge"][0] and state and nonce


def test_a_tampered_id_token_is_refused(idp):
    session, state, nonce, _ = idp.start()
    header, payload, signature = idp.sign(idp.claims(nonce)).split(".")
    other = idp.sign(idp.claims(nonce, sub="someone-else")).split(".")[1]
    idp.id_token = f"{header}.{other[:-2] + ('AA' if other[-2:] != 'AA' else 'BB')}.{signature}"
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_an_id_token_signed_by_another_key_is_refused(idp):
    session, state, nonce, _ = idp.start()
    stranger = RSAKey.generate_key(2048, parameters={"kid": "k1", "alg": "RS256"})
    idp.id_token = idp.sign(idp.claims(nonce), key=stranger)
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_an_id_token_for_another_audience_is_refused(idp):
    session, state, nonce, _ = idp.start()
    idp.id_token = idp.sign(idp.claims(nonce, aud="some-other-client"))
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_an_id_token_from_another_issuer_is_refused(idp):
    session, state, nonce, _ = idp.start()
    idp.id_token = idp.sign(idp.claims(nonce, iss="https://evil.example.test"))
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_an_expired_id_token_is_refused(idp):
    session, state, nonce, _ = idp.start()
    past = int(time.time()) - 3600
    idp.id_token = idp.sign(idp.claims(nonce, iat=past - 300, exp=past))
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_an_id_token_with_another_sign_ins_nonce_is_refused(idp):
    session, state, _, _ = idp.start()
    idp.id_token = idp.sign(idp.claims("a-nonce-this-session-never-sent"))
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_a_state_used_once_is_refused_the_second_time(idp):
    session, state, nonce, _ = idp.start()
    idp.id_token = idp.sign(idp.claims(nonce))
    idp.answer(session, state)
    with pytest.raises(SignInRefused):
        idp.answer(session, state)


def test_a_state_from_another_session_is_refused(idp):
    _, state, nonce, _ = idp.start()
    other_session, _, _, _ = idp.start()
    idp.id_token = idp.sign(idp.claims(nonce))
    with pytest.raises(SignInRefused):
        idp.answer(other_session, state)


def test_an_answer_without_an_id_token_is_refused(idp):
    session, state, _, _ = idp.start()
    idp.id_token = ""
    with pytest.raises(SignInRefused):
        idp.answer(session, state)
