"""The vector table's partitions (one per space) and their HNSW indexes, made and dropped through
functions with the table owner's rights (migrations 0006 and 0007)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection

from console.core.locks import LockWaitExpired, lock_wait_at_most
from console.similarity.models import EmbedderState, EmbedderVersion, RouteEmbedding, Source

logger = logging.getLogger(__name__)


def space_partition_create(space: str) -> None:
    """Make the space's partition of the vector table, and of the models for a built-in version
    (`similarity_space_create`, migrations 0006 and 0007, with the table owner's rights: only an
    owner may add partitions); nothing when they exist.
    Creating it and attaching it locks the table against other schema changes only, not against
    reads and writes of vectors."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_space_create(%s)", [space])


def space_partition_drop(space: str) -> bool:
    """Detach and drop a retired version's partitions, its vectors with their index and its model:
    the space goes back to the file system at once, where deleting the rows (or emptying the
    model) left it dead in the table. The function refuses the space of a version that is not
    retired.

    Detaching needs the vector table to itself for a moment, and every lookup queues behind a
    detach that waits: it gives up after SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT (a long index
    build or ingest holds the table) and leaves the partitions to the sweeper (False)."""
    try:
        with lock_wait_at_most(settings.SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT), connection.cursor() as cursor:
            cursor.execute("SELECT similarity_space_drop(%s)", [space])
    except LockWaitExpired:
        logger.info("similarity: partitions of %s still in use; the sweeper drops them later", space)
        return False
    return True


def build_list(links: int) -> int:
    """The candidates a bulk build searches for each vector's neighbours in a graph of `links` links
    a node: SIMILARITY_HNSW_EF_CONSTRUCTION, and never fewer than pgvector allows (2 x links)."""
    return max(settings.SIMILARITY_HNSW_EF_CONSTRUCTION, 2 * links)


def index_create(
    *,
    name: str,
    dimension: int,
    space: str,
    graph_dimension: int | None = None,
    links: int | None = None,
    insert_list: int | None = None,
) -> None:
    """Build the HNSW index of one space on its partition through `similarity_index_create`
    (migrations 0006 and 0014), which runs with the table owner's rights: the app's role may not
    create indexes itself. The build holds a SHARE lock on the space's partition for its duration
    (writes of its vectors wait; reads do not). The graph holds the whole vector, or its leading
    `graph_dimension` components (a built-in version's, `builtin.graph_dimension`).

    Each node links to `links` others (pgvector's m), and the build searches `build_list(links)`
    candidates for each vector's neighbours; then the index's option is set to `insert_list`, the
    list later inserts search, which pgvector reads at each insert (migration 0013): an after-ingest
    job's refusal then costs about half. Both default to the general settings, SIMILARITY_HNSW_M and
    SIMILARITY_HNSW_EF_INSERT; a built-in version's graph passes its own (`builtin.graph_links`)."""
    if links is None:
        links = settings.SIMILARITY_HNSW_M
    if insert_list is None:
        insert_list = settings.SIMILARITY_HNSW_EF_INSERT
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            # CREATE INDEX refuses a table with deferred foreign-key checks pending in the transaction.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # An HNSW build whose graph outgrows maintenance_work_mem slows down by an order of magnitude.
        cursor.execute(
            "SELECT set_config('maintenance_work_mem', %s, %s)",
            [settings.SIMILARITY_INDEX_BUILD_MEMORY, bool(connection.in_atomic_block)],
        )
        cursor.execute(
            "SELECT similarity_index_create(%s, %s, %s, %s, %s, %s)",
            [
                name,
                space,
                int(dimension),
                int(links),
                build_list(int(links)),
                int(graph_dimension or dimension),
            ],
        )
        cursor.execute("SELECT similarity_index_insert_effort(%s, %s)", [name, int(insert_list)])
        if not connection.in_atomic_block:
            cursor.execute("RESET maintenance_work_mem")


def space_index_create(*, route_id: int) -> bool:
    """Build the HNSW index of a route's sent refusals; idempotent."""
    space = RouteEmbedding.objects.filter(route_id=route_id, source=Source.SENT).first()
    if space is None:
        return False
    index_create(name=space.index_name, dimension=space.dimension, space=space.space_key)
    RouteEmbedding.objects.filter(pk=route_id).update(index_ready=True)
    return True


def spaces_retired_drop() -> int:
    """Sweeper: drop the partitions of retired versions still there (a promotion whose drop
    failed, or was cut short, after its transaction committed)."""
    dropped = 0
    for version in EmbedderVersion.objects.filter(state=EmbedderState.RETIRED).only("pk"):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL", [f"public.similarity_questionvector_{version.space_key}"]
            )
            if cursor.fetchone()[0] and space_partition_drop(version.space_key):
                dropped += 1
    return dropped
