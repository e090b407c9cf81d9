# fairseq-clear: `make demo` (end-to-end CPU run), `make test` (the test suite) and `make test-fast`
# (its unit tier).
# Both set up ./.venv on first use and are safe to run again.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fairseq-clear-installed
CORPUS ?=
DEMO_DIR ?= demo
PYTEST_ARGS ?=
export NLTK_DATA := $(CURDIR)/nltk_data
export PYTHONUNBUFFERED := 1

.PHONY: venv wordnet demo test test-fast bench bench-quick clean

venv: $(STAMP)

# torch first (the CPU wheel on this machine), then fairseq-fixed without its
# metadata's dependencies (they drag in torchaudio, which pins an older torch),
# then this package with fairseq's real runtime dependencies (setup.py).
$(STAMP): setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q torch==2.13.0 "numpy<2" cython
	@$(PY) -c "import fairseq" 2>/dev/null || { \
	  echo "compiling fairseq-fixed 0.12.3.1 (about 3 minutes) ..."; \
	  $(PY) -m pip install -q --no-deps --no-build-isolation fairseq-fixed==0.12.3.1; }
	$(PY) -m pip install -q -e ".[test,export,mteb]"
	@touch $@

wordnet: nltk_data/corpora/wordnet/lexnames

nltk_data/corpora/wordnet/lexnames:
	bash scripts/install_wordnet.sh nltk_data

demo: venv wordnet
	$(PY) examples/quickstart/demo.py --out $(DEMO_DIR) $(if $(CORPUS),--corpus $(CORPUS))

test: venv wordnet
	$(PY) -m pytest -q $(PYTEST_ARGS) tests

# the fast loop: tests/unit (no subprocess, no training run; under 2 minutes) and the linter
test-fast: venv
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/unit

bench: venv wordnet
	$(PY) benchmarks/run_all.py

bench-quick: venv wordnet
	$(PY) benchmarks/run_all.py --quick

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
