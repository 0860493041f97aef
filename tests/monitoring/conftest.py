"""Fixtures of the monitoring tests: it-support with a signed policy on a graded window.

The graded window (4,000 decisions and their labels) is built once per test module, as a world
(tests/worlds.py): a test that takes `signing_window` starts from it, with its route and integrator,
and its own writes roll back after it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from audit.services import Actor
from console.governance import services as governance
from console.governance.models import PolicyVersion
from console.governance.validation import parse_draft
from tests import factories
from tests.analysis.populations import decision_records, label_each, post_decisions
from tests.governance.conftest import client_for, draft_body  # noqa: F401 -- client_for is used by the tests
from tests.jobs_inline import run_jobs
from tests.worlds import RouteWorld, build_world, route_world_start

CUTOFF = 0.6
VERSIONS = {"model": "gen-2026-10", "retriever": "hybrid-3", "corpus": "snap-2026-11-01", "gate": "nli-4"}


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def day_start(days_ago: int) -> datetime:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days_ago)


def earlier_today() -> datetime:
    """A moment of today (UTC) already past, whatever the hour: halfway from midnight to now. Noon is
    in the future for half of each day, and a decision there is not in the ledger "as of now"."""
    now = datetime.now(UTC)
    return day_start(0) + (now - day_start(0)) / 2


def post_day(
    integrator,
    *,
    days_ago: int,
    scores,
    versions=None,
    segments=None,
    correct=None,
    jobs: bool = False,
    at: datetime | None = None,
) -> list[int]:
    """Decisions with these scores at noon UTC `days_ago` days ago (or at `at`, a moment of that day);
    labelled when `correct` is given; with `jobs`, the after-ingest jobs (span checks, pool entry,
    rechecks) run when the batch is in."""
    moment = at or day_start(days_ago) + timedelta(hours=12)
    assert moment.date() == day_start(days_ago).date(), "`at` must fall on the day `days_ago` names"
    at = iso(moment)
    records = decision_records(
        scores,
        occurred_at=at,
        versions=dict(versions or VERSIONS),
        segments=dict(segments or {"query_type": "how-to", "language": "en"}),
    )
    if jobs:
        with run_jobs():
            ids = post_decisions(integrator, records)
    else:
        ids = post_decisions(integrator, records)
    if correct is not None:
        label_each(ids, correct)
    return ids


def sign_policy(route, owner_user, reviewer_user, *, cutoff: float = CUTOFF, **overrides) -> PolicyVersion:
    actor = Actor.system("tests")
    draft = governance.policy_draft(
        actor=actor,
        user=reviewer_user,
        route=route,
        draft=parse_draft(draft_body(cutoff=cutoff, band_lower=None, **overrides), route=route),
    )
    return governance.policy_sign(actor=actor, user=owner_user, policy=draft, evidence_sha256=draft.evidence_sha256)


@dataclass(frozen=True, kw_only=True)
class SigningWindow(RouteWorld):
    """What a test needs of the window's world: ids and keys (the rows are the world's)."""

    rng_state: dict[str, Any]  # the generator's state after the last day
    policy_id: int | None = None  # the policy the world signed on the window (`window_policy`), if any


def _signing_window_build(policy: dict[str, Any] | None) -> SigningWindow:
    route, integrator, made = route_world_start()
    rng = np.random.default_rng(7)
    for days_ago in range(30, 10, -1):
        scores = np.round(rng.beta(4, 2, 200), 3)
        post_day(integrator, days_ago=days_ago, scores=scores, correct=rng.random(200) < 0.2 + 0.7 * scores)
    if policy is None:
        return SigningWindow(**vars(made), rng_state=rng.bit_generator.state)
    # The owner and the reviewer the shared fixtures would make (tests/conftest.py), made here to sign.
    owner = factories.make_user("owner", "policy_owner", route)
    reviewer = factories.make_user("reviewer", "reviewer")
    signed = sign_policy(route, owner, reviewer, **policy)
    return SigningWindow(
        **{**vars(made), "owner_id": owner.pk, "reviewer_id": reviewer.pk},
        rng_state=rng.bit_generator.state,
        policy_id=signed.pk,
    )


@pytest.fixture(scope="module")
def window_policy() -> dict[str, Any] | None:
    """`sign_policy`'s keyword arguments for a policy the module's window world signs once, or None. A
    module whose window tests all start from one signed policy overrides this and takes it as
    `window_signed`, rather than each test signing it again."""
    return None


@pytest.fixture(scope="module")
def window_world(window_policy, django_db_setup, django_db_blocker, tmp_path_factory):
    """it-support, its integrator and the signing window (and the `window_policy`), built once for the module."""
    yield from build_world(django_db_blocker, tmp_path_factory, lambda: _signing_window_build(window_policy))


@pytest.fixture
def signing_window(window_world, db, request):
    """20 days (30 to 11 days ago) of 200 decisions, Beta(4, 2) scores, each labelled; ~20% below 0.6.
    The generator that drew them, as the last day left it."""
    window = window_world.enter(request)
    rng = np.random.default_rng()
    rng.bit_generator.state = window.rng_state
    return rng


@pytest.fixture
def signed(route, owner, reviewer, signing_window) -> PolicyVersion:
    return sign_policy(route, owner.user, reviewer.user)


@pytest.fixture
def window_signed(window_world, signing_window) -> PolicyVersion:
    """The policy the module's window world signed (the module's `window_policy`), with its owner and
    reviewer as the test's `owner` and `reviewer`."""
    assert window_world.data.policy_id is not None, "the module's window_policy is None: nothing was signed"
    return PolicyVersion.objects.get(pk=window_world.data.policy_id)
