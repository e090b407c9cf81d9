# fairseq-clear: `make demo` (end-to-end CPU run), `make test` (the test suite, on WORKERS pytest-xdist
# workers; it prints its wall time: about 16 minutes on 2 cores) and `make test-fast` (its unit tier:
# about 20 seconds).
# Both set up ./.venv on first use and are safe to run again.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fairseq-clear-installed
CORPUS ?=
DEMO_DIR ?= demo
PYTEST_ARGS ?=
# pytest-xdist workers of `make test` (tests that need the machine to themselves share one worker:
# the xdist_group "exclusive"); WORKERS=0 runs in one process
WORKERS ?= 2
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
	$(PY) -m pip install -q -e ".[test,export,mteb,onnx]"
	@touch $@

wordnet: nltk_data/corpora/wordnet/lexnames

nltk_data/corpora/wordnet/lexnames:
	bash scripts/install_wordnet.sh nltk_data

demo: venv wordnet
	$(PY) examples/quickstart/demo.py --out $(DEMO_DIR) $(if $(CORPUS),--corpus $(CORPUS))

# one torch thread per worker: the workers share the cores (the commands the tests start use one too)
test: venv wordnet
	@start=$$(date +%s); \
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(PY) -m pytest -q -n $(WORKERS) --dist loadgroup -m "not bench_smoke" $(PYTEST_ARGS) tests; \
	rc=$$?; echo "make test: $$(( $$(date +%s) - start )) s of wall time (exit status $$rc)"; exit $$rc

# the fast loop: tests/unit (no subprocess, no training run) and the linter
test-fast: venv
	@start=$$(date +%s); \
	$(PY) -m pytest -q $(PYTEST_ARGS) tests/unit; \
	rc=$$?; echo "make test-fast: $$(( $$(date +%s) - start )) s of wall time (exit status $$rc)"; exit $$rc

bench: venv wordnet
	$(PY) benchmarks/run_all.py

# every section at a small size, then the studies' small runs (tests marked bench_smoke)
bench-quick: venv wordnet
	$(PY) benchmarks/run_all.py --quick
	$(PY) -m pytest -q -m bench_smoke tests/e2e/test_benchmarks.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
