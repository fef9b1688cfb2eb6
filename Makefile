# idee-notebook-agent — two commands for newcomers: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
PORT ?= 8888

.PHONY: demo test lint format bench serve clean venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)  ## JupyterLab on the quickstart notebook (works with no API key: offline planner)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --port=$(PORT) notebooks/01_quickstart.ipynb $(if $(shell [ "$$(id -u)" = 0 ] && echo root),--allow-root,)

test: $(STAMP)  ## ruff + the whole pytest suite (unit, fakes, notebooks, browser)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pre-commit run --all-files || true

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)  ## print benchmark figures (ratios against baselines measured in the same run)
	@for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

serve: $(STAMP)
	$(BIN)/idee-agent serve

clean:
	rm -rf $(VENV) dist build .pytest_cache .ruff_cache
