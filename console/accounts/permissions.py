"""The one place that answers "may this user do this on this route?".

Roles come from RoleGrant rows; a grant without a route covers every route. Superusers and the
`admin` role may do everything. A user whose only role is `grader` sees nothing but the blind
grading queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.db.models import Q, QuerySet

from console.accounts.models import Role, RoleGrant, Route
from console.core.errors import Forbidden, NotFound

# Roles that may read decisions (scores, outcomes, passages, verifier results). A `reader` (support
# agents, domain experts) reads a route's refusals to dispute them, and nothing more.
DECISION_READERS = (Role.REVIEWER, Role.POLICY_OWNER, Role.AUDITOR, Role.INTEGRATOR, Role.ADMIN, Role.READER)
# Roles that may read what is measured about decisions: operating points, calibration, policy evidence,
# grades and the audit history shown beside a decision. Every decision reader except `reader`.
STATS_READERS = (Role.REVIEWER, Role.POLICY_OWNER, Role.AUDITOR, Role.INTEGRATOR, Role.ADMIN)


def _grants(user) -> list[RoleGrant]:
    if not user.is_authenticated:
        return []
    cached = getattr(user, "_console_grants", None)
    if cached is None:
        cached = list(RoleGrant.objects.filter(user=user).select_related("route"))
        user._console_grants = cached
    return cached


def is_admin(user) -> bool:
    if not user.is_authenticated:
        return False
    return user.is_superuser or any(g.role == Role.ADMIN for g in _grants(user))


def roles_of(user) -> set[str]:
    if not user.is_authenticated:
        return set()
    roles = {g.role for g in _grants(user)}
    if user.is_superuser:
        roles.add(Role.ADMIN)
    return roles


def has_role(user, roles: Iterable[str], route=None) -> bool:
    """True when the user holds one of `roles` on `route` (or, route None, on any route)."""
    if is_admin(user):
        return True
    wanted = set(roles)
    for grant in _grants(user):
        if grant.role not in wanted:
            continue
        if route is None or grant.route_id is None or grant.route_id == route.pk:
            return True
    return False


def route_for(
    user,
    slug: str,
    *,
    allowed: Callable[..., bool],
    refused: str | Callable[[Route], str] | None = None,
    missing: str | None = None,
) -> Route:
    """The route `slug` if `allowed(user, route)`; otherwise the answer the caller's page gives.

    `allowed` is a check of this module, called as `allowed(user, route)`, and as `allowed(user)`
    for "on any route" when `refused` is a message. `refused` says who hears why (403) rather than
    a 404, which tells nobody whether a route they may not see exists:

    - None: 404 for an unknown route and for one the user may not do this on;
    - a message: 403 with it, before any lookup, for a user who may do this on no route at all
      (a grader asking for statistics), then 404 as above;
    - a function of the route: 404 for an unknown route and for one the user may not read at all
      (no decision-reader role on it), and 403 with its message for a route the user reads but may
      not do this on (a reader asking for the policy and its evidence).

    `missing` is the 404's message (default "No route 'slug'.")."""
    if isinstance(refused, str) and not allowed(user):
        raise Forbidden(refused)
    route = Route.objects.filter(slug=slug).first()
    if route is not None and allowed(user, route):
        return route
    if route is not None and callable(refused) and has_role(user, DECISION_READERS, route):
        raise Forbidden(refused(route))
    raise NotFound(missing or f"No route {slug!r}.")


def route_filter(user, roles: Iterable[str], field: str = "route") -> Q | None:
    """A Q restricting `field` to routes where the user holds a role; None means no restriction.

    Returns Q(pk__in=[]) when the user holds none of the roles anywhere.
    """
    if is_admin(user):
        return None
    wanted = set(roles)
    route_ids = []
    for grant in _grants(user):
        if grant.role in wanted:
            if grant.route_id is None:
                return None
            route_ids.append(grant.route_id)
    return Q(**{f"{field}__in": route_ids})


def route_slugs(user, roles: Iterable[str]) -> set[str] | None:
    """Slugs of the routes where the user holds one of `roles`; None means every route (a global
    grant or admin). For tables that name their route by slug, such as the audit trail."""
    if is_admin(user):
        return None
    wanted = set(roles)
    slugs = set()
    for grant in _grants(user):
        if grant.role in wanted:
            if grant.route_id is None:
                return None
            slugs.add(grant.route.slug)
    return slugs


def visible(queryset: QuerySet, user, roles: Iterable[str], field: str = "route") -> QuerySet:
    condition = route_filter(user, roles, field)
    return queryset if condition is None else queryset.filter(condition)


def can_read_decisions(user, route=None) -> bool:
    return has_role(user, DECISION_READERS, route)


def can_read_stats(user, route=None) -> bool:
    return has_role(user, STATS_READERS, route)


# Roles that may work the blind grading queue. A reviewer who grades is not blind (reviewers read
# decisions); the grades are still recorded, and a reviewer may not adjudicate an item they graded.
GRADERS = (Role.GRADER, Role.REVIEWER)
# Roles that may adjudicate disagreements, edit grading guidelines and read agreement.
LABEL_REVIEWERS = (Role.REVIEWER,)
# Roles that may import an existing graded set as final labels.
LABEL_IMPORTERS = (Role.INTEGRATOR, Role.REVIEWER)


# Roles that may ingest decisions into a route.
INGESTERS = (Role.INTEGRATOR,)
# Roles that may send a failed shadow run back to its pipeline.
SHADOW_RETRIERS = (Role.REVIEWER,)
# Roles that may read, verify and export the audit trail (of their routes; global grants: all).
AUDIT_READERS = (Role.AUDITOR,)


def can_ingest(user, route) -> bool:
    return has_role(user, INGESTERS, route)


def can_retry_shadow(user, route) -> bool:
    return has_role(user, SHADOW_RETRIERS, route)


def can_read_audit(user, route=None) -> bool:
    return has_role(user, AUDIT_READERS, route)


def can_grade(user, route=None) -> bool:
    return has_role(user, GRADERS, route)


def can_review_labels(user, route=None) -> bool:
    return has_role(user, LABEL_REVIEWERS, route)


def can_manage_grading(user, route=None) -> bool:
    """Set a route's sampling plan and its gold items. No role is given them: a plan decides which
    decisions the statistics are estimated from, and gold items are the answers graders are measured
    by (a reviewer who chose them would know which items test the graders), so admins only."""
    del route  # admins hold every route
    return is_admin(user)


# Policy sign-off. Reviewers, policy owners and admins of the route may draft a policy version;
# only the owner named in a draft may sign it, and only while they hold `policy_owner` on its
# route through a grant of their own: admin rights never stand in for the owner's signature.
POLICY_DRAFTERS = (Role.REVIEWER, Role.POLICY_OWNER)


def can_draft_policy(user, route) -> bool:
    return has_role(user, POLICY_DRAFTERS, route)


def holds_policy_owner(user, route) -> bool:
    """A grant of `policy_owner` on this route (or on every route); admin status does not count."""
    return any(g.role == Role.POLICY_OWNER and (g.route_id is None or g.route_id == route.pk) for g in _grants(user))


def can_sign_policy(user, policy) -> bool:
    return user.is_authenticated and policy.owner_id == user.pk and holds_policy_owner(user, policy.route)


def can_recompute_evidence(user, policy) -> bool:
    """A draft's evidence is recomputed by its owner or by anyone who may draft the route's policy."""
    return can_sign_policy(user, policy) or can_draft_policy(user, policy.route)


def can_withdraw_policy(user, policy) -> bool:
    """A draft is withdrawn by whoever drafted it or by its owner."""
    return user.is_authenticated and user.pk in (policy.created_by_id, policy.owner_id)


def can_read_policy(user, route) -> bool:
    """Every reader of the route's statistics, integrators included: the gate reads its cutoff here.
    Not `reader`: a policy version carries its statistical evidence."""
    return has_role(user, STATS_READERS, route)


def can_read_outbox(user) -> bool:
    return is_admin(user)


def can_manage_workspace(user) -> bool:
    """Routes, their settings and members, and API tokens are managed by admins only."""
    return is_admin(user)


# Roles that may read a route's corpus gaps (clusters of refused questions) and recompute them.
GAP_READERS = (Role.REVIEWER, Role.POLICY_OWNER)


def can_read_gaps(user, route=None) -> bool:
    return has_role(user, GAP_READERS, route)


def can_read_similar(user, route) -> bool:
    """Similar refusals show other decisions of the route: the route's decision readers only."""
    return has_role(user, DECISION_READERS, route)


# Candidate gate trials: reviewers and policy owners of the route start and read them (admins too).
# Graders never see anything of them: a trial shows labels next to gate scores and verdicts.
TRIAL_RUNNERS = (Role.REVIEWER, Role.POLICY_OWNER)


def can_run_trials(user, route=None) -> bool:
    return has_role(user, TRIAL_RUNNERS, route)


def can_name_header_variable(user) -> bool:
    """Naming an environment variable a candidate gate's header is read from is an admin's act: the
    value leaves the server for a URL the trial's author chose, and only admins decide which of the
    operator's ``CANDIDATE_HEADER_<NAME>`` variables may go where."""
    return is_admin(user)


# Disputes of single refusals. Whoever may read a route's decisions may dispute one of its refusals
# and read its disputes; reviewers and policy owners of the route work the inbox (take, resolve); the
# opener alone may withdraw. Integrators fetch the appeal link their answering system shows.
DISPUTE_OPENERS = DECISION_READERS
DISPUTE_HANDLERS = (Role.REVIEWER, Role.POLICY_OWNER)
APPEAL_LINK_READERS = (Role.INTEGRATOR, Role.REVIEWER, Role.POLICY_OWNER)


def can_open_dispute(user, route) -> bool:
    return has_role(user, DISPUTE_OPENERS, route)


def can_read_disputes(user, route=None) -> bool:
    return has_role(user, DISPUTE_OPENERS, route)


def can_handle_disputes(user, route=None) -> bool:
    return has_role(user, DISPUTE_HANDLERS, route)


def can_withdraw_dispute(user, dispute) -> bool:
    return user.is_authenticated and dispute.opened_by_id == user.pk


def can_read_appeal_link(user, route) -> bool:
    return has_role(user, APPEAL_LINK_READERS, route)


def can_read_appellant(user, route) -> bool:
    """A person refused wrote, without an account, to the people who decide: their message and
    address are for the route's reviewers and policy owners; other readers see that an appeal
    exists and how it stands."""
    return has_role(user, DISPUTE_HANDLERS, route)


# Monitoring (release rechecks and drift alarms): every reader of the route's policy reads them;
# the route's policy owners and reviewers (and admins) close rechecks and acknowledge alarms.
MONITORING_RESPONDERS = (Role.REVIEWER, Role.POLICY_OWNER)


def can_read_monitoring(user, route) -> bool:
    return can_read_policy(user, route)


def can_close_recheck(user, route) -> bool:
    return has_role(user, MONITORING_RESPONDERS, route)


def can_plan_recheck(user, route) -> bool:
    """Resize an open recheck's sample (its target interval half-width)."""
    return has_role(user, MONITORING_RESPONDERS, route)


def can_set_route_monitoring(user, route) -> bool:
    """Change a route's monitoring settings (how old the evidence's labels may grow)."""
    return has_role(user, MONITORING_RESPONDERS, route)


def can_set_answer_settings(user, route) -> bool:
    """Change how a route's answers are judged (answer form, harm model, gate functional): the
    route's policy owners and admins, since the settings decide what a signed cutoff means."""
    return has_role(user, (Role.POLICY_OWNER,), route)


def can_acknowledge_alarm(user, route) -> bool:
    return has_role(user, MONITORING_RESPONDERS, route)


def can_refresh_evidence(user, route) -> bool:
    return has_role(user, MONITORING_RESPONDERS, route)
