"""`abstention_console.integrations.llamaindex` under the import name the console's README gives the client."""

from abstention_console.integrations.llamaindex import ConsoleEventHandler

__all__ = ["ConsoleEventHandler"]
