"""The corpus-gaps page, its CSV, the refusals of one cluster, and the recompute button."""

import csv

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Forbidden, NotFound
from console.core.jobs import enqueue
from console.similarity import selectors
from console.similarity.apis import get_route_for_gaps
from console.similarity.models import GapCluster


def _routes_for(user) -> list[Route]:
    if not permissions.can_read_gaps(user):
        raise Forbidden("Corpus gaps are for reviewers and policy owners.")
    return [route for route in Route.objects.order_by("slug") if permissions.can_read_gaps(user, route)]


@login_required
@require_GET
def gaps(request):
    routes = _routes_for(request.user)
    slug = request.GET.get("route") or (routes[0].slug if routes else None)
    route = get_route_for_gaps(request.user, slug) if slug else None
    run = selectors.latest_gap_run(route) if route else None
    clusters = selectors.gap_clusters(run) if run else []
    return render(
        request,
        "similarity/gaps.html",
        {
            "routes": routes,
            "route": route,
            "run": run,
            "clusters": clusters,
            "reason": selectors.gaps_reason(run, clusters),
            "space": selectors.active_space(route) if route else None,
        },
    )


@login_required
@require_POST
def gaps_recompute(request):
    route = get_route_for_gaps(request.user, request.POST.get("route", ""))
    enqueue("similarity.gaps_compute", route.pk)
    messages.success(request, f"Clustering of {route.name}'s refusals is queued; reload in a minute.")
    return redirect(f"{reverse('gaps')}?route={route.slug}")


@login_required
@require_GET
def gaps_csv(request):
    route = get_route_for_gaps(request.user, request.GET.get("route", ""))
    run = selectors.latest_gap_run(route)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="corpus-gaps-{route.slug}.csv"'
    writer = csv.writer(response)
    writer.writerow(
        [
            "rank",
            "cluster_id",
            "size",
            "size_this_week",
            "size_last_week",
            "no_support_share",
            "verified",
            "graded",
            "correct_share",
            "terms",
            "examples",
            "computed_at",
            "window_from",
            "window_to",
            "source",
        ]
    )
    for cluster in selectors.gap_clusters(run) if run else []:
        writer.writerow(
            [
                cluster.rank,
                cluster.pk,
                cluster.size,
                cluster.size_this_week,
                cluster.size_last_week,
                f"{cluster.no_support_share:.4f}",
                cluster.verified,
                cluster.graded,
                "" if cluster.correct_share is None else f"{cluster.correct_share:.4f}",
                "; ".join(cluster.terms),
                " | ".join(e["question"] for e in cluster.examples),
                run.computed_at.isoformat(),
                run.window_from.isoformat(),
                run.window_to.isoformat(),
                run.source,
            ]
        )
    return response


@login_required
@require_GET
def gap_cluster(request, pk: int):
    cluster = GapCluster.objects.select_related("run__route").filter(pk=pk).first()
    if cluster is None:
        raise NotFound("No such cluster.")
    get_route_for_gaps(request.user, cluster.run.route.slug)
    return render(
        request,
        "similarity/gap_cluster.html",
        {
            "cluster": cluster,
            "run": cluster.run,
            "route": cluster.run.route,
            "decisions": selectors.cluster_refusals(cluster),
        },
    )
