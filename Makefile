# The two set-up commands of README.md: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.kernel-lens-installed

.PHONY: demo test setup python-test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	# torch pinned: this spec installs the local CPU build (any other spec downloads CUDA wheels)
	$(VPY) -m pip install --quiet torch==2.13.0
	$(VPY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VPY) -m compiler compile examples/foo1.py
	@echo
	@echo "Debug directories are under examples/torch_compile_debug/."
	@echo "Index them:  $(VPY) -m compiler index examples/torch_compile_debug"

python-test: setup
	$(VPY) -m pytest -q -p no:cacheprovider

test: python-test
