"""Corpus-gap runs: the route's refused questions of a window clustered and ranked."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts.models import Route
from console.similarity import topics
from console.similarity.models import GapCluster, GapRun
from console.similarity.spaces import active_space


def gaps_compute(
    *, actor: Actor, route_id: int, window_days: int | None = None, now: datetime | None = None, seed: int = 0
) -> GapRun | None:
    """Cluster the route's refused questions of the window and store the clusters, ranked by
    size x share with no supporting passage. None when the route has no vectors yet."""
    started = time.monotonic()
    route = Route.objects.get(pk=route_id)
    space = active_space(route)
    if space is None:
        return None
    window_days = window_days or settings.SIMILARITY_GAPS_WINDOW_DAYS
    window_to = now or timezone.now()
    window_from = window_to - timedelta(days=window_days)
    rows = list(
        space.vectors()
        .filter(refused=True, occurred_at__gte=window_from, occurred_at__lt=window_to)
        .order_by("decision_id")
        .values_list(
            "decision_id",
            "occurred_at",
            "vector",
            "decision__question",
            "decision__support__no_supporting_passage",
            "decision__support__status",
        )
    )
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vectors = np.stack([np.asarray(r[2], dtype=np.float32) for r in rows]) if rows else np.zeros((0, 1))
    found = (
        topics.cluster(
            vectors,
            sample_max=settings.SIMILARITY_GAPS_SAMPLE,
            seed=seed,
            one_group_min=settings.SIMILARITY_SAME_FORM_MIN,
        )
        if rows
        else None
    )
    clusters = []
    if found is not None and len(found.centres):
        questions = [r[3] for r in rows]
        cluster_ids = list(range(len(found.centres)))
        terms = topics.class_tfidf_terms(questions, found.labels, cluster_ids)
        week = window_to - timedelta(days=7)
        fortnight = window_to - timedelta(days=14)
        for c in cluster_ids:
            members = np.flatnonzero(found.labels == c)
            verified = [i for i in members if rows[i][5] == "done"]
            no_support = sum(1 for i in verified if rows[i][4])
            share = no_support / len(verified) if verified else 0.0
            examples = topics.representatives(vectors, found.labels, found.centres, c)
            clusters.append(
                dict(
                    size=len(members),
                    verified=len(verified),
                    no_support_share=share,
                    score=len(members) * share,
                    size_this_week=sum(1 for i in members if rows[i][1] >= week),
                    size_last_week=sum(1 for i in members if fortnight <= rows[i][1] < week),
                    examples=[{"id": int(ids[i]), "question": questions[i]} for i in examples],
                    terms=terms.get(c, []),
                    decision_ids=[int(ids[i]) for i in members],
                )
            )
    clusters.sort(key=lambda c: (-c["score"], -c["size"]))
    with transaction.atomic():
        run = GapRun.objects.create(
            route=route,
            window_from=window_from,
            window_to=window_to,
            source=space.source,
            embedder_id=space.embedder_id,
            refusals=len(rows),
            sampled=found.sampled if found else 0,
            unclustered=int((found.labels < 0).sum()) if found else 0,
            params={
                "algorithm": "hdbscan",
                "metric": "cosine",
                "sample_max": settings.SIMILARITY_GAPS_SAMPLE,
                "window_days": window_days,
                "seed": seed,
                "one_group_min": settings.SIMILARITY_SAME_FORM_MIN,
            },
            seconds=round(time.monotonic() - started, 3),
        )
        GapCluster.objects.bulk_create([GapCluster(run=run, rank=rank, **c) for rank, c in enumerate(clusters, 1)])
        audit_record(
            actor=actor,
            action=Action.GAPS_COMPUTED,
            object_type="gap_run",
            object_id=run.pk,
            route=route.slug,
            payload=field_changes(new={"refusals": len(rows), "clusters": len(clusters), "window_days": window_days}),
        )
    return run
