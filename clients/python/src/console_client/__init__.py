"""The import name the README gives the client; the package itself is `abstention_console`."""

from abstention_console import (
    AsyncConsole,
    Backoff,
    Console,
    ConsoleError,
    NoSignedPolicy,
    PolicyRefused,
    PolicyUnavailable,
    __version__,
)

__all__ = [
    "AsyncConsole",
    "Backoff",
    "Console",
    "ConsoleError",
    "NoSignedPolicy",
    "PolicyRefused",
    "PolicyUnavailable",
    "__version__",
]
