"""Requests released at the same moment from threads of their own: how the race tests try to slip
past a limit that is checked and counted in two steps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any


def at_once(
    arguments: Iterable[Any],
    send: Callable[[Any], Any],
    *,
    prepare: Callable[[Any], Any] | None = None,
    timeout: float = 60.0,
) -> list[Any]:
    """`send(prepare(argument))` for every argument, each in a thread of its own; the threads do
    their `prepare` (signing in, building a client) first and then wait at a barrier, so the sends
    start together. Each thread closes its own database connection when done. Returns the sends'
    results in the order they finished; the first exception any thread raised is raised here,
    once all of them have stopped."""
    arguments = list(arguments)
    barrier = threading.Barrier(len(arguments))
    results: list[Any] = []
    errors: list[BaseException] = []

    def run(argument: Any) -> None:
        from django.db import connection

        try:
            prepared = prepare(argument) if prepare else argument
            barrier.wait(timeout)
            results.append(send(prepared))
        except BaseException as error:  # reported by the caller, not lost in the thread
            barrier.abort()
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(argument,)) for argument in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    return results
