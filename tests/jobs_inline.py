"""Running queued jobs inside a test's transaction.

Jobs are queued after commit (console.core.jobs.enqueue) and tests run them eagerly, but a test's
transaction never commits; capturing the on-commit callbacks with execute=True runs them (and
the jobs those jobs queue) when the block ends.
"""

from __future__ import annotations

from django.test import TestCase

from tests.factories import ingest


def run_jobs():
    """`with run_jobs(): ...` runs every job queued inside the block when it ends."""
    return TestCase.captureOnCommitCallbacks(execute=True)


def ingest_with_jobs(records: list[dict]) -> list[int]:
    with run_jobs():
        ids = ingest(records)
    return ids
