# o1sim developer tasks. Rust comes from rustup (`cargo` on PATH); Python from python3.
# `make run` and `make test` are all a newcomer needs.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.o1sim-deps-stamp
PYTEST_ARGS ?= -q

.PHONY: all venv build run test test-rust test-py bench golden clean check-cargo

all: build

check-cargo:
	@command -v cargo >/dev/null 2>&1 || { \
	  echo "error: cargo not found on PATH. Install Rust with rustup:" >&2; \
	  echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$$HOME/.cargo/env\"" >&2; \
	  exit 1; }

# The venv holds maturin plus the package's runtime and test dependencies (read from
# pyproject.toml, so the list lives in one place). Re-run only when pyproject.toml changes.
venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet "maturin>=1.7,<2" "tomli; python_version < '3.11'"
	$(VPY) tools/deps.py > $(VENV)/requirements.txt
	$(VPY) -m pip install --quiet -r $(VENV)/requirements.txt
	@touch $(STAMP)

# Builds the extension (release) and installs the package into the venv (editable).
build: check-cargo $(STAMP)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH \
	  $(VENV)/bin/maturin develop --release --quiet

run: build
	$(VENV)/bin/o1sim compare

test-rust: check-cargo
	cargo test --workspace --exclude sim-py

# pytest exits 5 when it collected nothing: that must fail, not pass quietly.
test-py: build
	@rc=0; $(VPY) -m pytest $(PYTEST_ARGS) tests || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

test: test-rust test-py

bench: build
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(VPY) $$f; done

# Regenerate tests/golden/*.json from the Rust runner; review the diff before committing.
golden: check-cargo
	UPDATE_GOLDEN=1 cargo test -p sim-core --test golden

clean:
	rm -rf $(VENV) target python/o1sim/*.so python/o1sim/__pycache__ .pytest_cache .mypy_cache
