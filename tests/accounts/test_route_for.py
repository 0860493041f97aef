"""`permissions.route_for`: the one "route by slug that this user may ..." every page and API uses."""

import pytest

from console.accounts import permissions
from console.core.errors import Forbidden, NotFound
from tests.factories import make_route, make_user

pytestmark = pytest.mark.django_db


def test_a_user_allowed_on_the_route_gets_it(route):
    reviewer = make_user("reviewer", "reviewer", route)
    assert permissions.route_for(reviewer, "it-support", allowed=permissions.can_read_stats) == route


def test_an_unknown_route_and_a_route_the_user_may_not_use_are_the_same_404(route, other_route):
    owner = make_user("owner", "policy_owner", other_route)
    for slug in ("it-support", "no-such-route"):
        with pytest.raises(NotFound) as refused:
            permissions.route_for(owner, slug, allowed=permissions.can_read_stats)
        assert refused.value.message == f"No route {slug!r}."


def test_a_user_who_may_do_it_nowhere_hears_why_before_any_lookup(route):
    grader = make_user("grader", "grader", route)
    for slug in ("it-support", "no-such-route"):
        with pytest.raises(Forbidden, match="not for graders"):
            permissions.route_for(grader, slug, allowed=permissions.can_read_stats, refused="not for graders")


def test_a_reason_that_names_the_route_is_given_only_to_those_who_read_the_route(route, other_route):
    reader = make_user("reader", "reader", route)

    def because(r):
        return f"The policy of {r.name} is not yours to read."

    with pytest.raises(Forbidden, match="The policy of IT support"):
        permissions.route_for(reader, "it-support", allowed=permissions.can_read_policy, refused=because)
    with pytest.raises(NotFound):  # a route they cannot see at all stays a 404, name unsaid
        permissions.route_for(reader, "hr-policy", allowed=permissions.can_read_policy, refused=because)


def test_the_404_says_what_the_caller_asks(route):
    outsider = make_user("outsider")
    with pytest.raises(NotFound, match="No such route."):
        permissions.route_for(outsider, "it-support", allowed=permissions.can_read_gaps, missing="No such route.")


def test_a_global_grant_and_an_admin_reach_every_route(route):
    make_route("hr-policy")
    auditor = make_user("auditor", "auditor")
    admin = make_user("admin", "admin")
    for user in (auditor, admin):
        assert permissions.route_for(user, "hr-policy", allowed=permissions.can_read_stats).slug == "hr-policy"
