# Two commands do all the set-up: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-pythons lint typecheck bench clean

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

# The suite on the other Pythons ctxfold supports (3.10 is the oldest), each in a .venv-<version>
# of its own; not part of `make test` or CI, which run on $(PYTHON). PYTHONS takes commands or
# paths (with pyenv: PYTHONS="$(pyenv root)/versions/3.10.13/bin/python ..."); one that does not
# run is skipped.
PYTHONS ?= python3.10 python3.12 python3.13
test-pythons:
	@for py in $(PYTHONS); do \
		version=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
			|| { echo "$$py: does not run, skipped"; continue; }; \
		echo "== Python $$version ($$py) in .venv-$$version"; \
		[ -x .venv-$$version/bin/python ] || $$py -m venv .venv-$$version || exit 1; \
		.venv-$$version/bin/pip install --quiet -e '.[test]' || exit 1; \
		.venv-$$version/bin/python -m pytest -q || exit 1; \
	done

# Every topic at full size, peers included; writes benchmarks/results/ and the README's figures
# from them. Takes several minutes.
bench: $(VENV)/.installed-bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks.readme

clean:
	rm -rf $(VENV) .venv-3.* .mypy_cache .pytest_cache .ruff_cache
