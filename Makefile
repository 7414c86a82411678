# The two commands of the README, plus helpers. Every target sets up .venv first (no-op when ready).
SHELL := /bin/bash
VENV  := .venv
BIN   := $(VENV)/bin
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: main test test-fast lint format env evidence results repro report dvc-yaml bench bench-server bench-cli

env:
	@scripts/setup-env.sh

## main: every registered pipeline at default params (Prefect embedded, MLflow SQLite, DVC local cache)
main: env
	paperflows run all
	paperflows report
	paperflows report --html

## evidence: every pipeline with an evidence preset at scale=evidence (the smallest budget that decides its
## headline claim on 2 CPU cores: at most 15 min each, one torch thread, two pipelines at a time), then RESULTS.md
evidence: env
	PAPERFLOWS_TORCH_THREADS=1 paperflows run all --set scale=evidence --jobs 2 --no-progress
	paperflows report
	paperflows report --markdown

## results: regenerate RESULTS.md from the run folders (no run)
results: env
	paperflows report --markdown

## test: the house rules, then the whole test suite (what CI runs)
test: env lint
	python -m pytest -q --durations=15

## test-fast: the inner loop (under 5 minutes): everything but the slow tier (whole-system tests, each paper's
## end-to-end flow, kills), on both cores
test-fast: env
	python -m pytest -q -m "not slow" -n 2 --dist loadfile

## lint: formatter, linter (120 columns) and the import contracts (layers, independent papers, plain components)
lint: env
	ruff format --check .
	ruff check .
	lint-imports

## format: apply the formatter and the linter's safe fixes
format: env
	ruff format .
	ruff check --fix .

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
