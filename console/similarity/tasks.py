"""Similarity jobs: thin wrappers that take ids and re-read state."""

from datetime import timedelta

from celery.signals import worker_init
from django.utils import timezone

from audit.services import Actor
from console.core.jobs import enqueue, job
from console.similarity import embedder
from console.similarity.models import GapRun, RouteEmbedding
from console.similarity.services import builtin, gaps, partitions


@worker_init.connect
def _embedder_before_fork(sender=None, **kwargs) -> None:
    """A worker that consumes the similarity queue imports the embedder's libraries in its main
    process, before its pool forks (embedder.preload); any other worker (the gradable path, trials)
    never loads them."""
    queues = getattr(getattr(getattr(sender, "app", None), "amqp", None), "queues", None)
    if queues is None:
        return
    consumed = set(queues.consume_from or queues)
    if "similarity" in consumed:
        embedder.preload()


@job("similarity.vectors_embed", soft_time_limit=600)
def vectors_embed(decision_ids: list[int]) -> int:
    """After every ingest batch: built-in vectors for the new decisions of built-in routes."""
    return builtin.vectors_embed(decision_ids=decision_ids)


@job("similarity.embedder_fit", soft_time_limit=3600)
def embedder_fit(route_id: int) -> int | None:
    version = builtin.embedder_fit(actor=Actor.system("embedder_fit"), route_id=route_id, when_due=True)
    return version.number if version else None


@job("similarity.space_index_create", soft_time_limit=3600)
def space_index_create(route_id: int) -> bool:
    return partitions.space_index_create(route_id=route_id)


@job("similarity.gaps_compute", soft_time_limit=1800)
def gaps_compute(route_id: int) -> int | None:
    run = gaps.gaps_compute(actor=Actor.system("gaps_compute"), route_id=route_id)
    return run.pk if run else None


@job("similarity.gaps_refresh")
def gaps_refresh() -> int:
    """Beat job: recompute the gaps of every route with vectors whose latest run is a day old,
    build any sent-vector index an interrupted job left missing, embed decisions of built-in
    routes whose after-ingest job was lost, and drop what a retired version left behind."""
    stale_before = timezone.now() - timedelta(days=1)
    queued = 0
    for route_id in RouteEmbedding.objects.values_list("route_id", flat=True):
        latest = GapRun.objects.filter(route_id=route_id).order_by("-computed_at").first()
        if latest is None or latest.computed_at < stale_before:
            enqueue(gaps_compute, route_id)
            queued += 1
    for route_id in RouteEmbedding.objects.filter(index_ready=False, source="sent").values_list("route_id", flat=True):
        enqueue(space_index_create, route_id)
    builtin.vectors_embed_missing()
    partitions.spaces_retired_drop()
    return queued
