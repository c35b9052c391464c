# Perdix: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TOOLS  := .tools

export PYSPARK_PYTHON := $(abspath $(BIN)/python)
export PATH := $(abspath $(TOOLS)/bin):$(PATH)
# One BLAS thread per process: the loop's small fits lose time to thread hand-offs on 2 cores.
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1

.PHONY: demo test bench lint setup system-deps clean traces generate lock image

# Everything (the lab and batch extras, the dev tools) at the versions of constraints.txt.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[all,dev]'
	touch $(STAMP)

setup: $(STAMP)

# Debian packages and the helm binary the tests run against (idempotent; needs root or sudo).
system-deps:
	bash scripts/install-system-deps.sh

demo: $(STAMP)
	$(BIN)/perdix simulate --trace traces/bank_calls.csv --policy daedalus --hours 6 --out out/demo --log-format console

# The real-Flink scenarios (tests/flink, real time, mostly waiting) beside the rest (CPU-bound, at nice 15).
test: $(STAMP) system-deps lint
	bash scripts/run-tests.sh $(BIN)/python

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy agent cli lab models planner spark simulator benchmarks

# The files generated from the code (tests fail while a checked-in one lags behind).
generate: $(STAMP)
	$(BIN)/python scripts/gen_docs.py
	$(BIN)/python scripts/gen_helm_schema.py

# constraints.txt from the versions installed in $(VENV) (run after the tests pass on an upgrade).
lock: $(STAMP)
	$(BIN)/python scripts/lock.py > constraints.txt.new && mv constraints.txt.new constraints.txt

# The agent image perdix:VERSION (scripts/build-image.sh: podman, a debootstrap base, no network in the build).
image: $(STAMP)
	bash scripts/install-system-deps.sh image
	PYTHON=$(BIN)/python bash scripts/build-image.sh

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run_all

traces: $(STAMP)
	$(BIN)/python scripts/make_traces.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
