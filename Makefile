# Everything runs through these targets: locally, in CI (.ci/run) and in the Jenkins stages.
SHELL := /bin/bash
PYPY ?= pypy3
CPYTHON ?= python3.11
VENV_PYPY := .venv-pypy
VENV_CPY := .venv-cpy
CONFIG ?= .local/streamer.yaml
PYTEST_ARGS ?=
# The suites' slowest tests, named at the end of each run: the matrix grows, and CI's budget is
# kept to ~55 min of the 90 it may take.
SLOWEST := --durations=15 --durations-min=20

# The suite under PyPy marks each major collection in one step, as `streamer run` does
# (streamer/ops/gcpacing.py, GC_MARKING_STEP, says why): Debian's PyPy 7.3.11 has an incremental-GC
# bug, fixed in 7.3.16, that shows as a rare segfault in pytest's assertion rewriting (one CI run
# crashed so while collecting).
PYPY_GC := PYPY_GC_INCREMENT_STEP=64GB
PYTEST_PYPY := $(PYPY_GC) $(VENV_PYPY)/bin/python -m pytest

.PHONY: help deps venv up up-replica down config run demo-load test test-pypy test-cpython soak unit lint docs bench bench-compare bench-targets clean \
	constraints ffi build deploy-canary verify-canary deploy-stage deploy-main check-jenkinsfile

help:
	@echo "make run        set everything up and stream the local MariaDB into the local Kafka"
	@echo "make test       the whole suite under PyPy and CPython against real servers"
	@echo "make soak       the kill loops at full length (make test runs them shorter)"
	@echo "make up/down    start/stop the private MariaDB and Kafka (state in .local/)"
	@echo "make up-replica a GTID replica of the local MariaDB on 13307, to try mysql.hosts failover"
	@echo "make demo-load  write demo row changes to watch with 'streamer tail'"

deps:
	deploy/local/deps.sh

# librdkafka 2.16.0, upstream's, from confluent-kafka's wheel on the package index: fetched once
# per machine (deploy/librdkafka.sh) into the cache the deploy tests' release builds share, and
# installed where the producer loads it. PyPy's confluent-kafka-pypy is relinked to the same file.
LIBRDKAFKA_CACHE := .local/deploy-deps

$(VENV_PYPY)/.stamp: setup.py deploy/librdkafka.sh | deps
	test -x $(VENV_PYPY)/bin/python || $(PYPY) -m venv $(VENV_PYPY)
	$(VENV_PYPY)/bin/pip install -q -U pip setuptools wheel
	$(VENV_PYPY)/bin/pip install -q -e '.[test]'
	deploy/librdkafka.sh --relink-consumer $(LIBRDKAFKA_CACHE) $(VENV_PYPY)/bin/python $(VENV_PYPY) >/dev/null
	touch $@

$(VENV_CPY)/.stamp: setup.py deploy/librdkafka.sh
	test -x $(VENV_CPY)/bin/python || $(CPYTHON) -m venv $(VENV_CPY)
	$(VENV_CPY)/bin/pip install -q -U pip setuptools wheel
	$(VENV_CPY)/bin/pip install -q -e '.[test]'
	deploy/librdkafka.sh $(LIBRDKAFKA_CACHE) $(VENV_CPY)/bin/python $(VENV_CPY) >/dev/null
	touch $@

# The project's bytecode, under both runtimes: where PYTHONDONTWRITEBYTECODE is set (as in CI),
# a process keeps nothing it compiles, and each of the hundreds of streamers the suite starts
# compiled the package again: ~0.5 s of CPU each under PyPy, on a run bound by its two cores.
venv: $(VENV_PYPY)/.stamp $(VENV_CPY)/.stamp
	@$(VENV_PYPY)/bin/python -m compileall -q streamer bench
	@$(VENV_CPY)/bin/python -m compileall -q streamer bench

up:
	deploy/local/up.sh

# A GTID replica of the local MariaDB on 127.0.0.1:13307, to try mysql.hosts failover.
up-replica: up
	deploy/local/replica.sh up

down:
	deploy/local/down.sh

config: up
	deploy/local/config.sh $(CONFIG)

run: venv config
	$(VENV_PYPY)/bin/streamer run -c $(CONFIG)

demo-load: venv up
	$(VENV_PYPY)/bin/python -m streamer.tools.demo --config $(CONFIG)

unit: venv
	$(PYTEST_PYPY) -q tests/unit tests/bench tests/deploy $(PYTEST_ARGS)
	$(VENV_CPY)/bin/python -m pytest -q tests/unit tests/bench tests/deploy $(PYTEST_ARGS)

# PyPy, the production runtime, runs the contract tests against every server of the source matrix
# (MySQL 8.0 and MariaDB 11.4 too, started by the suite: deploy/local/sources.sh); CPython runs
# them against the default server only. STREAMER_TEST_SOURCES narrows the matrix.
test-pypy: venv up
	$(PYTEST_PYPY) -q tests $(SLOWEST) $(PYTEST_ARGS)

test-cpython: venv up
	STREAMER_TEST_SOURCES=$${STREAMER_TEST_SOURCES:-mariadb-10.11} \
		$(VENV_CPY)/bin/python -m pytest -q tests $(SLOWEST) $(PYTEST_ARGS)

# `make test`: both, in two lanes at once (tests/lanes.sh says how, and starts the servers): the
# default server's tests, and beside them the rest (the other servers', private servers', units).
test: lint venv
	$(PYPY_GC) tests/lanes.sh $(SLOWEST) $(PYTEST_ARGS)

# The kill loops at their full length under PyPy (`make test` runs each shorter: tests/support.soak),
# and the randomized tests with new draws: a new seed each time, named so a failure can be replayed
# (make soak STREAMER_TEST_SEED=N).
soak: venv up
	seed=$${STREAMER_TEST_SEED:-$$(date +%s)}; echo "soak: STREAMER_TEST_SEED=$$seed"; \
	STREAMER_SOAK=1 STREAMER_TEST_SEED=$$seed $(PYTEST_PYPY) -q \
		tests/e2e/test_exactly_once.py tests/e2e/test_standby.py tests/e2e/test_ddl_random.py \
		tests/e2e/test_tx_random.py tests/e2e/test_json_random.py tests/unit/engine/test_tracker_random.py \
		tests/e2e/test_types.py::test_random_rows_of_every_type_inserted_updated_and_snapshotted_read_as_select_reads_them \
		tests/e2e/test_snapshot.py::test_chunks_follow_every_kind_of_key_under_changes_each_row_once_and_current \
		$(SLOWEST) $(PYTEST_ARGS)

lint: venv
	$(VENV_CPY)/bin/ruff check streamer tests bench

# docs/config.md: every config key, generated from its declaration (a unit test keeps it current).
docs: venv
	$(VENV_CPY)/bin/python -c "from streamer import config; print(config.reference(), end='')" > docs/config.md

# The driver runs under CPython (its Kafka consumer is cheaper there); the streamer and the bare
# read run under each --python. Results are appended to bench/results.jsonl (docs/benchmarks.md).
BENCH_ARGS ?= --repeat 3
bench: venv up
	$(VENV_CPY)/bin/python -m bench.suite --python $(VENV_PYPY)/bin/python --python $(VENV_CPY)/bin/python $(BENCH_ARGS)

bench-compare: venv
	@test -n "$(A)" -a -n "$(B)" || { echo "usage: make bench-compare A=<commit|file> B=<commit|file>" >&2; exit 2; }
	$(VENV_CPY)/bin/python -m bench.compare $(A) $(B)

# The targets judged on the medians of the results of one or more commits (C="A B"; default:
# the newest commit in bench/results.jsonl). make bench prints the same table for its own run.
bench-targets: venv
	$(VENV_CPY)/bin/python -m bench.targets $(C)

# Releases and deploys (deploy/Jenkinsfile calls only these; README.md, "Deploying"). A release is
# STREAMER_PREFIX/releases/VERSION, built with the PyPy venv's pins in deploy/constraints-pypy.txt.
VERSION ?= $(shell git rev-parse --short=12 HEAD)
VERIFY_WINDOW ?= 30
GROOVY_VERSION := 4.0.22
GROOVY_JAR := .local/groovy/groovy-$(GROOVY_VERSION).jar
JENKINSFILE ?= deploy/Jenkinsfile
DEPLOY := STREAMER_DEPLOY_PYTHON=$(VENV_PYPY)/bin/python deploy/deploy.sh

# streamer/kafka/_rdkafka_ffi.py: rdkafka's cffi declarations, parsed ahead (a unit test keeps it current).
ffi: $(VENV_PYPY)/.stamp
	$(VENV_PYPY)/bin/python -c 'from streamer.kafka import rdkafka; rdkafka.generate("streamer/kafka/_rdkafka_ffi.py")'

constraints: $(VENV_PYPY)/.stamp
	$(VENV_PYPY)/bin/pip freeze --exclude-editable > deploy/constraints-pypy.txt

build: $(VENV_PYPY)/.stamp
	$(DEPLOY) build $(VERSION)

deploy-canary: $(VENV_PYPY)/.stamp
	$(DEPLOY) canary $(VERSION)

verify-canary: $(VENV_PYPY)/.stamp
	$(DEPLOY) verify canary --main main --window $(VERIFY_WINDOW)

deploy-stage: $(VENV_PYPY)/.stamp
	$(DEPLOY) stage $(VERSION)

deploy-main: $(VENV_PYPY)/.stamp
	$(DEPLOY) main $(VERSION)

$(GROOVY_JAR):
	mvn -q dependency:copy -Dartifact=org.apache.groovy:groovy:$(GROOVY_VERSION) -DoutputDirectory=$(dir $@)

# Parses the Jenkinsfile with the real Groovy compiler (syntax errors fail, names stay dynamic).
check-jenkinsfile: $(GROOVY_JAR)
	java -cp $(GROOVY_JAR) groovy.ui.GroovyMain -e 'new GroovyShell().parse(new File(args[0]))' $(JENKINSFILE)

clean:
	rm -rf $(VENV_PYPY) $(VENV_CPY)
