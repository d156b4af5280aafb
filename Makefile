# The two set-up commands of README.md: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.kernel-lens-installed
NODE_STAMP := node_modules/.kernel-lens-installed

.PHONY: demo test setup extension python-test extension-test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	# torch pinned: this spec installs the local CPU build (any other spec downloads CUDA wheels)
	$(VPY) -m pip install --quiet torch==2.13.0
	$(VPY) -m pip install --quiet -e '.[test]'
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

python-test: setup
	$(VPY) -m pytest -q -p no:cacheprovider

extension-test: setup $(NODE_STAMP)
	npm test
	npm run test:e2e

test: python-test extension-test
