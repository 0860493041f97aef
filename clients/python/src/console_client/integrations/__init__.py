"""`abstention_console.integrations` under the import name DESIGN.md gives the client."""
