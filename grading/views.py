"""Pages of blind grading: the queue (graders), adjudication, agreement and guidelines (reviewers),
sampling plans and gold items (admins).

The queue page and its actions only ever put a `GraderItem` and a `SavedGrade` (the grader's own
verdict) into a template, so nothing a grader receives can carry the gate score, the outcome or
other graders' grades.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from audit.services import Actor
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import InvalidInput, ServiceError
from console.ledger.models import Decision
from grading import selectors
from grading.blindness import route_blindness
from grading.forms import (
    BLANK_BAND_ROWS,
    AdjudicationForm,
    BandFormSet,
    ClaimAdjudicationForm,
    ClaimGradeForm,
    GoldItemForm,
    GradeForm,
    GuidelinesForm,
    PlanForm,
)
from grading.services import labels as labels_services
from grading.services import pool as pool_services
from grading.services import queue as queue_services


def _require_grader(request) -> None:
    if not permissions.can_grade(request.user):
        raise PermissionDenied("Your role does not allow grading.")


def _require_reviewer(request) -> None:
    if not permissions.can_review_labels(request.user):
        raise PermissionDenied("Only reviewers may open this page.")


def _chosen_route(request, slug: str | None) -> Route | None:
    """The route the grader picked (None: all their routes); 404 for one they may not grade."""
    if not slug:
        return None
    if not selectors.SLUG.fullmatch(slug):
        raise Http404("No such route.")
    route = selectors.gradable_routes(request.user).filter(slug=slug).first()
    if route is None:
        raise Http404("No such route.")
    return route


def _public_id(item_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(item_id)
    except ValueError:
        return None


def _queue_context(request, route: Route | None, assignment, *, done: bool = False, saved=None) -> dict:
    route_ids = selectors.gradable_route_ids(request.user, route)
    return {
        "route": route,
        "item": selectors.grader_item(assignment) if assignment else None,
        "done": done,
        "saved": saved,
        "progress": selectors.grader_progress(request.user, route_ids),
        "form": GradeForm(),
    }


def _render_queue(request, route: Route | None, assignment, *, done: bool = False, saved=None):
    """After an action: the item region alone for htmx, else back to the page (which shows the lease)."""
    if not request.htmx:
        # Without htmx (no JavaScript, or a key pressed before htmx took over a new item) the browser
        # posted the form itself: land on the page, which shows the lease, or says the queue is empty.
        query = {"route": route.slug} if route else {}
        if done:
            query["done"] = "1"
        if saved:
            query["saved"] = saved.item_id
        url = reverse("grading-queue")
        return redirect(f"{url}?{urlencode(query)}" if query else url)
    context = _queue_context(request, route, assignment, done=done, saved=saved)
    return render(request, "grading/partials/grading_item.html", context)


@never_cache  # like the queue API: an item in hand is never kept by a browser or proxy
@require_GET
@vary_on_headers("HX-Request")
def grading_queue(request):
    _require_grader(request)
    route = _chosen_route(request, request.GET.get("route"))
    assignment = selectors.current_lease(request.user, selectors.gradable_route_ids(request.user, route))
    # "done" and "saved" come back from a form posted without htmx; "done" is only true while
    # nothing is in hand, and "saved" only ever shows the grader's own grade on that item
    saved_id = request.GET.get("saved")
    context = _queue_context(
        request,
        route,
        assignment,
        done=assignment is None and request.GET.get("done") == "1",
        saved=selectors.saved_grade(request.user, _public_id(saved_id)) if saved_id else None,
    )
    context["routes"] = list(selectors.gradable_routes(request.user))
    template = "grading/partials/grading_item.html" if request.htmx else "grading/queue.html"
    return render(request, template, context)


def _claim_next(request, route: Route | None, *, saved=None):
    assignment = queue_services.assignment_claim(
        actor=Actor.from_request(request),
        grader=request.user,
        route_ids=selectors.gradable_route_ids(request.user, route),
    )
    return _render_queue(request, route, assignment, done=assignment is None, saved=saved)


@never_cache
@require_POST
@vary_on_headers("HX-Request")
def grading_next(request):
    _require_grader(request)
    return _claim_next(request, _chosen_route(request, request.POST.get("route")))


@never_cache
@require_POST
@vary_on_headers("HX-Request")
def grading_grade(request, item_id: str):
    _require_grader(request)
    route = _chosen_route(request, request.POST.get("route"))
    # A long route's page posts one radio group per claim and says so (templates/grading/partials).
    by_claims = request.POST.get("form") == "claims"
    form = ClaimGradeForm(request.POST) if by_claims else GradeForm(request.POST)
    if not form.is_valid():
        if by_claims:
            messages.error(request, "Mark every claim: supported, not supported or not verifiable (keys 1, 2, 3).")
        else:
            messages.error(request, "Choose correct, incorrect or unsure (keys 1, 2, 3).")
        return _render_queue(
            request, route, selectors.current_lease(request.user, selectors.gradable_route_ids(request.user, route))
        )
    public_id = _public_id(item_id)
    try:
        labels_services.grade_submit(
            actor=Actor.from_request(request), grader=request.user, public_id=public_id, **form.cleaned_data
        )
    except InvalidInput as exc:  # a claim left unmarked: the item stays in hand
        messages.error(request, f"That grade was not recorded: {exc.message}")
        return _render_queue(
            request, route, selectors.current_lease(request.user, selectors.gradable_route_ids(request.user, route))
        )
    except ServiceError as exc:
        messages.warning(request, f"That grade was not recorded: {exc.message}")
        return _claim_next(request, route)
    return _claim_next(request, route, saved=selectors.saved_grade(request.user, public_id))


@never_cache
@require_POST
@vary_on_headers("HX-Request")
def grading_undo(request, item_id: str):
    """Take back the last grade: the item comes back into the grader's hands to grade again."""
    _require_grader(request)
    route = _chosen_route(request, request.POST.get("route"))
    try:
        assignment = labels_services.grade_withdraw(
            actor=Actor.from_request(request), grader=request.user, public_id=_public_id(item_id)
        )
    except ServiceError as exc:
        messages.warning(request, f"Not undone: {exc.message}")
        assignment = selectors.current_lease(request.user, selectors.gradable_route_ids(request.user, route))
    else:
        messages.info(request, "Your grade was withdrawn; grade this item again.")
    return _render_queue(request, route, assignment)


@never_cache
@require_POST
@vary_on_headers("HX-Request")
def grading_skip(request, item_id: str):
    _require_grader(request)
    route = _chosen_route(request, request.POST.get("route"))
    try:
        queue_services.assignment_skip(
            actor=Actor.from_request(request), grader=request.user, public_id=_public_id(item_id)
        )
    except ServiceError as exc:
        messages.warning(request, f"Not skipped: {exc.message}")
    else:
        messages.info(request, "Skipped: the item goes to other graders and will not come back to you.")
    return _claim_next(request, route)


# --------------------------------------------------------------------------- reviewers


@require_GET
def adjudication_list(request):
    _require_reviewer(request)
    return render(
        request, "grading/adjudication_list.html", {"items": selectors.adjudication_queue(request.user)[:200]}
    )


@require_http_methods(["GET", "POST"])
def adjudication_item(request, item_id: str):
    _require_reviewer(request)
    public_id = _public_id(item_id)
    if public_id is None:
        raise Http404("No such item.")
    view = selectors.adjudication_item(request.user, public_id)
    form = (ClaimAdjudicationForm if view.claims is not None else AdjudicationForm)(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            labels_services.label_adjudicate(
                actor=Actor.from_request(request), reviewer=request.user, item=view.item, **form.cleaned_data
            )
        except ServiceError as exc:
            messages.error(request, exc.message)
            view = selectors.adjudication_item(request.user, public_id)  # another reviewer may have decided it
        else:
            messages.success(request, f"Labelled {form.cleaned_data.get('verdict') or 'claim by claim'}.")
            return redirect("grading-adjudication-list")
    return render(request, "grading/adjudication_item.html", {"view": view, "form": form})


@require_GET
def agreement(request):
    _require_reviewer(request)
    routes = list(selectors.reviewable_routes(request.user))
    route = next((r for r in routes if r.slug == request.GET.get("route")), routes[0] if routes else None)
    return render(
        request,
        "grading/agreement.html",
        {
            "routes": routes,
            "route": route,
            "agreement": selectors.route_agreement(route) if route else None,
            "blindness": route_blindness(route) if route else None,
        },
    )


def _reviewed_route(request, slug: str) -> Route:
    """The route whose guidelines the reviewer edits; 404 for a route they do not review."""
    _require_reviewer(request)
    route = selectors.reviewable_routes(request.user).filter(slug=slug).first()
    if route is None:
        raise Http404("No such route.")
    return route


def _guidelines_page(request, route: Route, form: GuidelinesForm, *, confirm: bool = False):
    published = selectors.published_guidelines(route)
    if not form.is_bound:
        text = draft = published
    elif form.is_valid():
        text = draft = form.cleaned_data["guidelines"]
    else:  # keep what was typed in the box, but render nothing that failed the checks
        text, draft = "", form.data.get("guidelines", "")
    context = {"route": route, "form": form, "text": text, "draft": draft, "confirm": confirm}
    if confirm:
        context["diff"] = selectors.guidelines_diff(published, text)
        context["base"] = pool_services.guidelines_sha256(published)
    return render(request, "grading/guidelines.html", context)


@require_http_methods(["GET", "POST"])
def guidelines_edit(request, slug: str):
    """Edit (with a live preview), then review the change, then publish it: the last step only
    from the review step, which carries the sha256 of the text the change was shown against."""
    route = _reviewed_route(request, slug)
    form = GuidelinesForm(request.POST or None, initial={"guidelines": selectors.published_guidelines(route)})
    step = request.POST.get("step")
    if request.method == "GET" or not form.is_valid() or step == "edit":
        return _guidelines_page(request, route, form)
    if step == "publish" and form.cleaned_data["base"]:
        try:
            pool_services.route_guidelines_update(
                actor=Actor.from_request(request),
                route=route,
                guidelines=form.cleaned_data["guidelines"],
                base_sha256=form.cleaned_data["base"],
            )
        except ServiceError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, "Guidelines published; graders see them with their next item.")
            return redirect("grading-guidelines", slug=route.slug)
    return _guidelines_page(request, route, form, confirm=True)


@require_POST
@vary_on_headers("HX-Request")
def guidelines_preview(request, slug: str):
    """The text being edited as graders would see it; saves nothing. htmx asks for the preview
    region while the reviewer types; without JavaScript the Preview button gets the whole page."""
    route = _reviewed_route(request, slug)
    form = GuidelinesForm(request.POST)
    if not request.htmx:
        return _guidelines_page(request, route, form)
    text = form.cleaned_data["guidelines"] if form.is_valid() else ""
    return render(request, "grading/partials/guidelines_preview.html", {"text": text, "form": form})


# --------------------------------------------------------------------------- admins: sampling plans, gold items


def _require_grading_manager(request) -> None:
    if not permissions.can_manage_grading(request.user):
        raise PermissionDenied("Only admins may set sampling plans and gold items.")


def _managed_route(request, slug: str) -> Route:
    _require_grading_manager(request)
    return selectors.managed_route(request.user, slug)


@require_GET
def plan_list(request):
    """Every route's sampling plan (or none: everything enters) and its gold items handed out."""
    _require_grading_manager(request)
    return render(request, "grading/plan_list.html", {"routes": list(selectors.managed_routes(request.user))})


def _band_formset(plan, data=None) -> BandFormSet:
    if data is not None:
        return BandFormSet(data, prefix="bands")
    bands = [{"low": b["low"], "high": b["high"], "target": b["target"]} for b in (plan.strata if plan else [])]
    return BandFormSet(initial=bands + [{}] * BLANK_BAND_ROWS, prefix="bands")


@require_http_methods(["GET", "POST"])
def plan_edit(request, slug: str):
    """Create or change a route's plan: its score bands with their targets, the gold share, the window."""
    route = _managed_route(request, slug)
    plan = selectors.route_plan(route)
    initial = {"gold_percent": round(plan.gold_rate * 100, 4), "window_days": plan.window_days} if plan else None
    form = PlanForm(request.POST or None, initial=initial)
    bands = _band_formset(plan, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid() and bands.is_valid():
        try:
            pool_services.grading_plan_set(
                actor=Actor.from_request(request),
                route=route,
                bands=bands.bands(),
                gold_rate=form.cleaned_data["gold_percent"] / 100,
                window_days=form.cleaned_data["window_days"],
            )
        except ServiceError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(
                request, f"Sampling plan of {route.name} saved; it applies to decisions entering the pool from now on."
            )
            return redirect("grading-plan", slug=route.slug)
    return render(request, "grading/plan.html", {"route": route, "plan": plan, "form": form, "bands": bands})


@require_POST
def plan_retire(request, slug: str):
    route = _managed_route(request, slug)
    if pool_services.grading_plan_retire(actor=Actor.from_request(request), route=route) is None:
        messages.info(request, f"{route.name} has no sampling plan: every decision already enters the pool.")
    else:
        messages.success(
            request, f"Sampling plan of {route.name} retired: every decision entering the pool from now on enters it."
        )
    return redirect("grading-plans")


@require_http_methods(["GET", "POST"])
def gold_list(request, slug: str):
    """A route's gold items handed out now, and the form that adds one from a decision of the route."""
    route = _managed_route(request, slug)
    form = GoldItemForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        decision = Decision.objects.filter(route=route, request_id=form.cleaned_data["request_id"]).first()
        if decision is None:
            form.add_error("request_id", "No decision of this route has that request id.")
        else:
            try:
                pool_services.gold_item_create(
                    actor=Actor.from_request(request),
                    decision=decision,
                    verdict=form.cleaned_data["verdict"],
                    answer=form.cleaned_data["answer"],
                )
            except ServiceError as exc:
                form.add_error("answer", exc.message)
            else:
                messages.success(
                    request, f"Gold item added from {decision.request_id}: graders get it like any other item."
                )
                return redirect("grading-gold", slug=route.slug)
    context = {
        "route": route,
        "form": form,
        "items": selectors.gold_items(route),
        "removed": selectors.removed_gold_count(route),
        "plan": selectors.route_plan(route),
    }
    return render(request, "grading/gold.html", context)


@require_POST
def gold_remove(request, slug: str, pk: int):
    route = _managed_route(request, slug)
    item = selectors.gold_item_of_route(route, pk)
    try:
        pool_services.gold_item_remove(actor=Actor.from_request(request), item=item)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.success(request, "Gold item removed: it is no longer handed out, and its grades still count.")
    return redirect("grading-gold", slug=route.slug)
