"""Writes of blind grading, one module per concern: pool entry and plans (`pool`), leases
(`queue`), grades and final labels (`labels`). Each service is one transaction with its audit."""
