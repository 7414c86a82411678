#!/usr/bin/env bash
# First start of the PostgreSQL container: one database per server (the Prefect one is POSTGRES_DB).
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -c "CREATE DATABASE \"${MLFLOW_DB:?MLFLOW_DB is not set}\""
