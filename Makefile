# Two commands do all the set-up: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck bench clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-demo: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install --quiet -e '.[exact,fast]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed-demo

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/activate
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/ctxfold demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest

# Every topic at full size, peers included; writes benchmarks/results/ and the README's figures
# from them. Takes several minutes.
bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.readme

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
