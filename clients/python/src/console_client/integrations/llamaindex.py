"""`abstention_console.integrations.llamaindex` under the import name DESIGN.md gives the client."""

from abstention_console.integrations.llamaindex import ConsoleEventHandler

__all__ = ["ConsoleEventHandler"]
