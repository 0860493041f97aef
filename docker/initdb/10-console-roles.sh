#!/bin/sh
# Least privilege for the console (see console/core/db_roles.py). Run once by the postgres image,
# as the superuser, when the database volume is first initialised:
#   console_owner  owns the database, its tables and the audit trail's trigger; only `migrate` uses it.
#   console_app    what web, worker and beat connect as; `migrate` grants it read/write on the tables
#                  and only SELECT and INSERT on the audit trail, and it owns nothing, so it can neither
#                  alter the audit table nor disable its trigger.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
     -v owner_password="$CONSOLE_OWNER_PASSWORD" -v app_password="$CONSOLE_APP_PASSWORD" <<'SQL'
CREATE ROLE console_owner LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'owner_password';
CREATE ROLE console_app LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD :'app_password';
CREATE DATABASE console OWNER console_owner;
\connect console
-- pgvector is not a trusted extension: the superuser creates it, the owner's migration then finds it.
CREATE EXTENSION IF NOT EXISTS vector;
SQL
