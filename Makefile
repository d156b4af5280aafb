# The two set-up commands of README.md: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.kernel-lens-installed
NODE_STAMP := node_modules/.kernel-lens-installed

.PHONY: demo test setup extension python-test extension-test editors

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	# torch pinned: this spec installs the local CPU build (any other spec downloads CUDA wheels)
	$(VPY) -m pip install --quiet torch==2.13.0
	$(VPY) -m pip install --quiet -e '.[test]'
	# oneDNN's C headers only (no library: lens calls torch's own oneDNN; compiler/machine/onednn_direct.py)
	$(VPY) -m pip install --quiet --no-deps onednn-devel==2026.1.0
	touch $(STAMP)

setup: $(STAMP)

$(NODE_STAMP): package.json package-lock.json vscode-extension/package.json
	npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

extension: $(NODE_STAMP)
	npm run package

demo: setup extension
	$(VPY) -m compiler compile examples/foo1.py
	@echo
	@echo "Done. Debug directories: examples/torch_compile_debug/   Extension: vscode-extension/kernel-lens.vsix"
	@echo "Install the .vsix in VS Code, open the examples/ folder, and hover foo1."
	@echo "Print the index:  $(VENV)/bin/kernel-lens index examples/torch_compile_debug"

# Neovim, the second LSP client the tests drive (tests/lsp_server/test_neovim.py), from Debian's packages where it is
# missing and we are root; without it that test skips and says why.
editors:
	@command -v nvim > /dev/null || [ "$$(id -u)" != 0 ] || { export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq neovim > /dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq neovim > /dev/null; }; } \
	  || echo "neovim could not be installed: tests/lsp_server/test_neovim.py will skip"

python-test: setup editors
	$(VPY) -m pytest -q -p no:cacheprovider

extension-test: setup $(NODE_STAMP)
	npm test
	npm run test:e2e

test: python-test extension-test
