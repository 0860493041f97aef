"""Pages: a route's trials (with a form to start one) and one trial, side by side with the current gate."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from django.views.decorators.vary import vary_on_headers

from audit.services import Actor
from console.core.errors import InvalidInput
from console.trials import selectors, services
from console.trials.validation import GATE_LABELS, trial_spec


def _form_body(post) -> dict:
    """The page's form as an API body: empty fields are left out so the API's defaults apply."""
    body = {"name": post.get("name", ""), "kind": post.get("kind", "http")}
    if body["kind"] == "http":
        body["url"] = post.get("url", "")
        if post.get("auth_header"):
            body["headers"] = {"Authorization": post["auth_header"]}
    for key, cast in (("timeout_s", float), ("repeats", int)):
        if post.get(key):
            try:
                body[key] = cast(post[key])
            except ValueError:
                body[key] = post[key]
    subset = {k: post[f"subset_{k}"] for k in ("from", "to", "segment", "model") if post.get(f"subset_{k}")}
    if subset:
        body["subset"] = subset
    return body


@login_required
@require_http_methods(["GET", "POST"])
def trial_list(request, slug: str):
    route = selectors.route_for_trials(request.user, slug)
    errors: dict = {}
    if request.method == "POST":
        try:
            spec = trial_spec(_form_body(request.POST))
            trial = services.trial_start(actor=Actor.user(request.user), user=request.user, route=route, spec=spec)
        except InvalidInput as exc:
            errors = {d["field"] or "": d["message"] for d in exc.details or []} or {"": exc.message}
        else:
            return redirect("trial-detail", pk=trial.pk)
    return render(
        request,
        "trials/trial_list.html",
        {"route": route, "trials": selectors.trials_of(route), "errors": errors, "form": request.POST},
    )


@login_required
@vary_on_headers("HX-Request")
def trial_detail(request, pk: int):
    trial = selectors.get_trial_for_user(request.user, pk)
    doc = selectors.trial_as_dict(trial)
    context = {
        "trial": trial,
        "doc": doc,
        "errors": selectors.call_errors(trial),
        "progress": selectors.progress(trial),
        "figure_rows": selectors.figure_rows(doc),
        "gates": [{**gate, "label": GATE_LABELS.get(gate["name"], gate["name"])} for gate in doc.get("gates", [])],
    }
    if request.htmx and trial.status == "running":
        return render(request, "trials/partials/progress.html", context)
    if request.htmx:  # finished while the page polled: the whole page, once
        response = render(request, "trials/trial_detail.html", context)
        response["HX-Refresh"] = "true"
        return response
    return render(request, "trials/trial_detail.html", context)
