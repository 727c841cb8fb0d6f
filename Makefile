# Two commands do all set-up: `make run` (serve the app) and `make test` (run the tests).
PY ?= python3
VENV ?= .venv
PORT ?= 8501
HOST ?= 127.0.0.1
# The CPU build of torch: pinning it first stops pip from pulling a CUDA build (several GB)
# to satisfy pyproject.toml's range. On a GPU node, set TORCH_SPEC= to keep the node's torch.
TORCH_SPEC ?= torch==2.13.0
# The tests in one process per CPU, at most 4 (half the suite's time is spent waiting on browsers
# and child processes); a file's tests stay in one process, in order. PYTEST_PROCS= runs them serially.
PYTEST_PROCS ?= -n logical --maxprocesses 4 --dist loadfile
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install bench screenshots notebooks clean-venv

# requirements.txt is `-e .[test]`: the project from pyproject.toml (dependencies, the `workbench`
# command), editable, so the app and the tests run from this checkout.
$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@if [ -n "$(TORCH_SPEC)" ] && ! $(BIN)/python -c "import torch" 2>/dev/null; then \
		$(BIN)/pip install -q "$(TORCH_SPEC)"; fi
	$(BIN)/pip install -q -r requirements.txt
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/streamlit run serve.py --server.address $(HOST) --server.port $(PORT) \
		--server.headless true --browser.gatherUsageStats false

test: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PROCS)

notebooks: $(STAMP)
	$(BIN)/python -m workbench notebooks -o notebooks

# Refresh the screenshots of the README and docs/ from the browser tests.
screenshots: $(STAMP)
	WORKBENCH_SCREENSHOTS=docs/screenshots $(BIN)/python -m pytest -q tests/e2e/test_browser.py tests/e2e/test_jupyter.py

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
