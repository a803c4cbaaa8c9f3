# memsync: two commands matter: `make demo` and `make test`. Each builds .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test check lint typecheck bench bench-smoke clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/memsync demo

check: $(STAMP)
	$(BIN)/ruff check protocol device cloud simulator tests bench
	$(BIN)/ruff format --check protocol device cloud simulator tests bench
	$(BIN)/mypy

test: check
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench.run

bench-smoke: $(STAMP)
	$(BIN)/python -m bench.run --smoke

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache bench/results.json
