# Copas: every target sets up what it needs (a virtual environment in .venv/, the project
# with its test extras, the generated protobuf code), so each works from a fresh clone.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.copas-installed
PROTO_DIR := protos
PROTOS := $(wildcard $(PROTO_DIR)/copas/v1/*.proto)
PROTO_STAMP := $(PROTO_DIR)/copas/v1/.generated

.DEFAULT_GOAL := help
.PHONY: help setup proto run play demo test lint bench bench-bots bench-load clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

setup: $(STAMP) $(PROTO_STAMP) ## create .venv/, install the project with its test extras, generate protos

$(STAMP): pyproject.toml setup.py engine/game.py ai/playout.py  # the compiled modules
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

proto: $(PROTO_STAMP) ## generate the Python code for protos/ (never edited by hand)

$(PROTO_STAMP): $(PROTOS) $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I$(PROTO_DIR) --python_out=$(PROTO_DIR) \
		--grpc_python_out=$(PROTO_DIR) --pyi_out=$(PROTO_DIR) $(PROTOS)
	@touch $@

run: setup ## start the server on localhost:50051 (metrics on localhost:9464)
	$(BIN)/copas-server

play: setup ## play against three bots on the local server (start it first with make run)
	$(BIN)/copas play

demo: setup ## a demo game between engine bots in the terminal (no server)
	$(BIN)/copas-demo

test: setup lint ## run lint and the whole test suite
	$(BIN)/python -m pytest -q

lint: setup ## ruff, mypy --strict on the engine and ai/, buf lint on the protos
	$(BIN)/ruff check .
	$(BIN)/mypy --strict engine/ ai/
	cd $(PROTO_DIR) && ../$(BIN)/buf lint

bench: setup ## benchmarks: engine vs OpenSpiel; a move vs a bare gRPC echo; durable vs in-memory; a flood
	$(BIN)/python bench/engine_vs_openspiel.py
	$(BIN)/python bench/move_cost.py
	$(BIN)/python bench/durability.py
	$(BIN)/python bench/flood.py

bench-bots: setup ## bot strength: mc vs duck, random, greedy on duplicate deals; decision time (minutes)
	$(BIN)/python bench/bots_strength.py

bench-load: setup ## load test vs a bare gRPC echo swarm at 100 and 1000 tables (minutes)
	$(BIN)/python bench/load_vs_echo.py --tables 100 1000 --duration 30

clean: ## remove the virtual environment, generated code and caches
	rm -rf $(VENV) $(PROTO_DIR)/copas/v1/*_pb2*.py* $(PROTO_STAMP) .pytest_cache .mypy_cache \
		.ruff_cache .hypothesis *.egg-info build engine/*.so ai/*.so  # data/ is kept
