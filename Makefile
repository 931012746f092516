# o1sim developer tasks. Rust comes from rustup (`cargo` on PATH); Python from python3.
# `make run` and `make test` are all a newcomer needs.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
STAMP  := $(VENV)/.o1sim-deps-stamp
PYTEST_ARGS ?= -q

.PHONY: all venv build run serve test test-rust test-py test-web test-node test-browser web bench golden profiles lint clean check-cargo fuzz

NPM    ?= npm
PORT   ?= 8000
WEB_DEPS := web/node_modules/.o1sim-stamp
PW_STAMP := $(VENV)/.o1sim-playwright-stamp

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

# The page's chart library comes from npm (web/package-lock.json), never committed.
$(WEB_DEPS): web/package.json web/package-lock.json
	cd web && $(NPM) ci --no-audit --no-fund --silent
	@touch $@

# The WASM module and the page's vendored files, into git-ignored web/pkg/ (the policy
# registry comes from the module's presets()).
web: check-cargo $(WEB_DEPS)
	crates/sim-wasm/build-wasm.sh
	cp web/node_modules/uplot/dist/uPlot.esm.js web/node_modules/uplot/dist/uPlot.min.css web/pkg/

# The main job: compare the policies on the embedded default scenario, then say where the
# in-browser lab is (`make serve` serves it; `make run` itself returns).
run: build web
	$(VENV)/bin/o1sim compare
	@echo "The in-browser lab: make serve, then open http://127.0.0.1:$(PORT)/  (.venv/bin/o1sim web --port $(PORT))"

serve: build web
	$(VENV)/bin/o1sim web --port $(PORT)

# The property tests draw from a fixed seed here, so that CI is reproducible; `make fuzz`
# draws fresh seeds and many more cases (a failure there is saved under
# crates/sim-core/proptest-regressions/, committed, and then replayed here).
PROPTEST_SEED ?= 20261202
test-rust: check-cargo
	PROPTEST_RNG_SEED=$(PROPTEST_SEED) cargo test --workspace --exclude sim-py

# pytest exits 5 when it collected nothing: that must fail, not pass quietly. The page is
# built first: the README test serves it (`make serve`), and must not skip in CI.
test-py: build web
	@rc=0; $(VPY) -m pytest $(PYTEST_ARGS) tests --ignore=tests/web || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "error: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# Playwright drives Debian's Chromium (/usr/bin/chromium): no browser download.
$(PW_STAMP): $(STAMP)
	$(VPY) -m pip install --quiet "playwright>=1.40,<2"
	@touch $@

# Golden parity and garbage inputs through the WASM module under Node.
test-node: web
	node --test tests/web/

# Headless Chromium: the page, errors next to fields, URL restore, a screenshot
# (tests/web/out/), the Worker keeping the page responsive. Fails without a browser.
test-browser: build web $(PW_STAMP)
	O1SIM_REQUIRE_BROWSER=1 $(VPY) -m pytest $(PYTEST_ARGS) tests/web

test-web: test-node test-browser

test: test-rust test-py test-web

bench: build web $(PW_STAMP)
	@set -e; for f in benchmarks/*.py; do echo "== $$f"; $(VPY) $$f; done

# The long fuzz run (`make test` runs the same suites CI-sized): proptest over the parser and
# simulate, 10,000 random link-event schedules, Hypothesis over the Python API and the Node
# fuzz of o1sim.js, and the conservation property over the three front ends (Python, the CLI,
# WASM under one Node process; tests/test_conservation_fronts.py, which `make test` runs
# CI-sized as part of test-py). The defaults give over a million cases through Python and
# WASM; the counts, typed errors and peak memory are summarised by tools/fuzz_report.py.
# The core's own proptest fuzz (crates/sim-core/tests/fuzz.rs, two properties) ran a million
# cases once, PROPTEST_CASES=500000 (2026-12-04, this 2-core machine beside a fresh-clone
# `make test`: 951 s CPU, no failure: no panic, no untyped error, no hang, every request counted).
FUZZ_RUST   ?= 20000
FUZZ_PY     ?= 100000
FUZZ_WASM   ?= 220000
FUZZ_FRONTS ?= 5000
fuzz: build web
	PROPTEST_CASES=$(FUZZ_RUST) cargo test --release -p sim-core --test fuzz
	PROPTEST_CASES=$(FUZZ_RUST) cargo test --release -p sim-core --lib
	O1SIM_FLAP_SCHEDULES=10000 cargo test --release -p sim-core --test link_flap -- --nocapture
	O1SIM_FUZZ_CASES=$(FUZZ_PY) $(VPY) -m pytest -q -p no:cacheprovider tests/test_fuzz.py
	O1SIM_FUZZ_CASES=$(FUZZ_WASM) node --test tests/web/fuzz.test.mjs
	O1SIM_FUZZ_CASES=$(FUZZ_FRONTS) $(VPY) -m pytest -q -p no:cacheprovider tests/test_conservation_fronts.py
	$(VPY) tools/fuzz_report.py

# Regenerate tests/golden/*.json from the Rust runner; review the diff before committing.
golden: check-cargo
	UPDATE_GOLDEN=1 cargo test -p sim-core --test golden

# The linters, each at a pinned version so a new release cannot fail CI: clippy from the
# LINT_RUST toolchain (rustup installs it when missing; warnings are errors), ruff and mypy
# --strict at the versions pyproject.toml's `lint` extra names. `.ci/run` runs it after the tests.
LINT_RUST  ?= 1.95.0
LINT_STAMP := $(VENV)/.o1sim-lint-stamp

$(LINT_STAMP): $(STAMP)
	$(VPY) tools/deps.py lint > $(VENV)/lint-requirements.txt
	$(VPY) -m pip install --quiet -r $(VENV)/lint-requirements.txt
	@touch $@

lint: check-cargo $(LINT_STAMP)
	@command -v rustup >/dev/null 2>&1 || { echo "error: make lint pins clippy through rustup (toolchain $(LINT_RUST)); install rustup" >&2; exit 1; }
	@rustup run $(LINT_RUST) cargo clippy --version >/dev/null 2>&1 || \
	  rustup toolchain install $(LINT_RUST) --profile minimal --component clippy
	rustup run $(LINT_RUST) cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict python/o1sim

# Regenerate the shipped profiles' static snapshot (crates/sim-core/src/calib/snapshot/
# builtin.rs) after changing crates/sim-core/profiles/*.json; a test fails while it is stale.
profiles: check-cargo
	UPDATE_PROFILES=1 cargo test -p sim-core --lib calib::snapshot

clean:
	rm -rf $(VENV) target web/pkg web/node_modules tests/web/out python/o1sim/*.so python/o1sim/__pycache__ .pytest_cache .mypy_cache
