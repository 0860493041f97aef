"""The official Python client of the Abstention Review Console.

    from abstention_console import Console

    console = Console("https://console.example.org", token)
    console.record({"request_id": "q-1", "route": "it-support", ...})  # never waits for the network
    cutoff = console.policy("it-support")["cutoff"]

See README.md beside this package for the behaviour during outages, the spool and the policy's
fail-safe.
"""

from abstention_console._core import (
    Backoff,
    ConsoleError,
    NoSignedPolicy,
    PolicyRefused,
    PolicyUnavailable,
)
from abstention_console.aio import AsyncConsole
from abstention_console.sync import Console

__all__ = [
    "AsyncConsole",
    "Backoff",
    "Console",
    "ConsoleError",
    "NoSignedPolicy",
    "PolicyRefused",
    "PolicyUnavailable",
]
__version__ = "0.1.0"
