# The two Quick-start commands: `make demo` and `make test`.
# Each creates or refreshes .venv (an editable install with the test extras); `make test` also installs the
# tests' npm packages (tests/package-lock.json: gift-pegjs, axe-core) into tests/node_modules where npm is
# installed; where it is not, the tests that need them skip and say so.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NPM    := $(shell command -v npm 2>/dev/null)
NODE_STAMP := tests/node_modules/.installed

.PHONY: demo test bench clean extract update compile

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

# again whenever the lock file changes; a failed install (no network) leaves the tests to skip, not make to stop
$(NODE_STAMP): tests/package.json tests/package-lock.json
	npm ci --prefix tests --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP) \
	    || echo "note: npm ci --prefix tests failed: the tests that need gift-pegjs or axe-core will not run"

demo: $(STAMP)
	$(BIN)/worked solve
	$(BIN)/worked sheet

test: $(STAMP) $(if $(NPM),$(NODE_STAMP))
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_solve.py

# the catalogues (worked/locale): extract the English msgids into worked.pot, merge them into each <lang>'s .po,
# keeping each .po's header (its Plural-Forms) and its width of 100 columns; compile each .po into the .mo that ships (committed, so a fresh clone needs no step; tests/test_i18n.py checks
# that each .mo is its .po compiled). A new language: $(BIN)/pybabel init -D worked -i worked/locale/worked.pot
# -d worked/locale -l <lang>, translate, make compile.
LOCALE := worked/locale
extract: $(STAMP)
	$(BIN)/pybabel -q extract -F babel.cfg -k say -k N_ -k Msg -k tr -k _markup -k _t --no-location --sort-output --omit-header \
	    --project=worked -o $(LOCALE)/worked.pot .

update: extract
	$(BIN)/pybabel -q update -D worked -i $(LOCALE)/worked.pot -d $(LOCALE) --no-fuzzy-matching --ignore-pot-creation-date -w 100

compile: $(STAMP)
	$(BIN)/pybabel -q compile -D worked -d $(LOCALE) --statistics

clean:
	rm -rf $(VENV) output/*/
