"""Writes of the similarity app, one module per concern: question vectors and the integrator's
sent ones (`vectors`), the vector table's partitions and HNSW indexes (`partitions`), the built-in
embedder's fits, re-embeds and promotions (`builtin`), and corpus-gap runs (`gaps`).

Vector rows are written with binary COPY (pgvector's psycopg adapter), the fast path at a million
rows. Each space is a partition of the vector table (see models.py), made when the space is and
dropped whole when an embedder version retires; its index is built by a job, outside the ingest
transaction. Both go through functions with the table owner's rights (migration 0006).
"""
