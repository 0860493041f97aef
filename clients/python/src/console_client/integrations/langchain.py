"""`abstention_console.integrations.langchain` under the import name the console's README gives the client."""

from abstention_console.integrations.langchain import ConsoleCallbackHandler

__all__ = ["ConsoleCallbackHandler"]
