"""Monitoring writes, one module per concern: rechecks, aggregates, alarms."""
