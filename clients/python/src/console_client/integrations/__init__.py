"""`abstention_console.integrations` under the import name the console's README gives the client."""
