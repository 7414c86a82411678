# The two commands of the README, plus helpers. Every target sets up .venv first (no-op when ready).
SHELL := /bin/bash
VENV  := .venv
BIN   := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: main test env repro report dvc-yaml bench bench-server bench-cli

env:
	@scripts/setup-env.sh

## main: every registered pipeline at default params (Prefect embedded, MLflow SQLite, DVC local cache)
main: env
	paperflows run all
	paperflows report
	paperflows report --html

## test: the whole test suite
test: env
	python -m pytest -q --durations=15

repro: env
	dvc repro

report: env
	paperflows report
	paperflows report --html

dvc-yaml: env
	paperflows dvc-yaml

bench: env
	python benchmarks/orchestration_overhead.py

## bench-server: trigger-to-Completed and per-task overhead on a Prefect server (add ARGS="--api-url ..." for a running stack)
bench-server: env
	python benchmarks/server_overhead.py $(ARGS)

## bench-cli: fixed cost of --help / list / report and of one DVC stage, against the interpreter and its imports
bench-cli: env
	python benchmarks/cli_startup.py
