# MemoryStore — the two commands a newcomer needs:
#   make demo   run the main job on the embedded default (no cluster, no API key)
#   make test   install everything the suite needs and run all of it
PYTHON     ?= python3
VENV       ?= .venv
UV_VERSION := 0.13.9
BIN        := $(VENV)/bin
# The repo's top-level folders (operator/, service/) must never be imported by accident
# from the working directory: `operator` would shadow the standard library.
export PYTHONSAFEPATH := 1
export MEM0_TELEMETRY := False

.PHONY: install demo test lint format bench-service lock clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock
	@echo "== installing pinned dependencies into $(VENV) (uv cache: ~/.cache/uv)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	@touch $@

demo: install
	$(BIN)/memorystore demo

test: install lint
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench-service: install
	$(BIN)/memorystore bench service

# Re-pin the whole dependency tree after changing pyproject.toml.
lock: install
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
