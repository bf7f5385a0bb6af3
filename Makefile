# bridge_lake: `make demo` and `make test` work on a fresh machine with Python ≥ 3.11 and pip.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
export DAGSTER_HOME := $(CURDIR)/.dagster_home
# `dagster dev` / `definitions validate` point to `dg` (another package); ours work in 1.13
SUPERSEDED := ignore:Function `dev_command` is superseded,ignore:Function `definitions_validate_command` is superseded

.PHONY: install chromium postgres redis ros1 demo test lint format validate dev bench bench-smoke fuzz clean

install: $(VENV)/.installed $(DAGSTER_HOME)/dagster.yaml

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $@

## demo: synthesize two drives and materialize every asset on the embedded default
## (DEMO_ARGS: more `bridge-lake demo` options, e.g. DEMO_ARGS='--minutes 0.2' for a quick one)
DEMO_ARGS ?=
demo: install
	$(BIN)/bridge-lake demo --workdir demo $(DEMO_ARGS)

## chromium: headless Chromium for the report rendering test (Debian package; needs root)
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "install Chromium (e.g. 'sudo apt-get install chromium') to run the tests"; \
	    exit 1; fi; }

## postgres, redis: servers the integration tests start on 127.0.0.1 (Debian packages; root)
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	  else echo "install PostgreSQL (e.g. 'sudo apt-get install postgresql') to run the tests"; \
	    exit 1; fi; }

redis:
	@command -v redis-server >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; \
	  else echo "install Redis (e.g. 'sudo apt-get install redis-server') to run the tests"; \
	    exit 1; fi; }

## ros1: Debian's ROS 1 for the ROS 1 tests and the README (roscore, rosbag and its Python
## API, roscpp, topic_tools, g++ for the tests' subscriber, sensor_msgs for `rostopic echo`;
## root). Where apt has no ROS 1 (not Debian) the tests skip.
ROS1_PACKAGES := ros-core python3-rosbag libroscpp-dev libtopic-tools-dev python3-sensor-msgs g++
ros1:
	@{ test -x /usr/bin/roscore && test -x /usr/bin/rosbag && command -v g++ >/dev/null && \
	   test -f /usr/include/topic_tools/shape_shifter.h && \
	   test -d /usr/lib/python3/dist-packages/sensor_msgs; } || { \
	  if ! command -v apt-get >/dev/null; then \
	    echo "no apt-get: the ROS 1 tests will skip (they need Debian's ROS 1)"; \
	  elif [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq; \
	    if apt-cache show ros-core >/dev/null 2>&1; then \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ROS1_PACKAGES); \
	    else echo "apt has no ROS 1 packages (not Debian): the ROS 1 tests will skip"; fi; \
	  elif apt-cache show ros-core >/dev/null 2>&1; then \
	    echo "install ROS 1 (sudo apt-get install $(ROS1_PACKAGES)) to run the tests"; exit 1; \
	  else echo "apt has no ROS 1 packages (not Debian): the ROS 1 tests will skip"; fi; }

## test: the full test suite (with the integration tests, which need postgres, redis, ROS 1)
## test: the whole suite on two workers (pytest-xdist), each test file on one of them (its
## module fixtures made once); serial it took 28 min on the 2-core machine
test: install chromium postgres redis ros1
	$(BIN)/python -m pytest -n 2 --dist loadfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

validate: install
	PYTHONWARNINGS='$(SUPERSEDED)' $(BIN)/dagster definitions validate -w workspace.yaml

## dev: the Dagster UI over the demo's lake and landing zone (run `make demo` first); started
## in DAGSTER_HOME, as dagster dev warns about a dagster.yaml in its folder that is not the home's
dev: install
	cd $(DAGSTER_HOME) && PYTHONWARNINGS='$(SUPERSEDED)' \
	  BRIDGE_LAKE_ROOT=$(CURDIR)/demo/lake BRIDGE_LAKE_LANDING=$(CURDIR)/demo/landing \
	  $(CURDIR)/$(BIN)/dagster dev -w $(CURDIR)/workspace.yaml -h 127.0.0.1 -p 3000

## bench: every benchmark at full size, one table of figures against their baselines
## (hours, GBs in /tmp; docs/benchmarks.md). bench-smoke: the same at smoke sizes (CI).
bench: install
	$(BIN)/python benchmarks/run_all.py --logs benchmarks/.logs --markdown benchmarks/.logs/table.md

bench-smoke: install
	$(BIN)/python benchmarks/run_all.py --smoke

## fuzz: coverage-guided fuzzing of every reader (atheris), FUZZ_SECONDS per target, two at
## a time; corpus and findings under fuzz/.work/ (docs/fuzzing.md). The tests run a short form.
FUZZ_SECONDS ?= 600
fuzz: install
	$(BIN)/python -m fuzz.run --seconds $(FUZZ_SECONDS) --jobs 2 --json fuzz/.work/results.json

clean:
	rm -rf $(VENV) $(DAGSTER_HOME) demo .pytest_cache .ruff_cache
