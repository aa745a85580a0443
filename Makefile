# Everything runs through these targets: locally, in CI (.ci/run) and in the Jenkins stages.
SHELL := /bin/bash
PYPY ?= pypy3
CPYTHON ?= python3.11
VENV_PYPY := .venv-pypy
VENV_CPY := .venv-cpy
CONFIG ?= .local/streamer.yaml
PYTEST_ARGS ?=

.PHONY: help deps venv up down config run demo-load test test-pypy test-cpython unit lint bench clean

help:
	@echo "make run        set everything up and stream the local MariaDB into the local Kafka"
	@echo "make test       the whole suite under PyPy and CPython against real servers"
	@echo "make up/down    start/stop the private MariaDB and Kafka (state in .local/)"
	@echo "make demo-load  write demo row changes to watch with 'streamer tail'"

deps:
	deploy/local/deps.sh

$(VENV_PYPY)/.stamp: setup.py | deps
	test -x $(VENV_PYPY)/bin/python || $(PYPY) -m venv $(VENV_PYPY)
	$(VENV_PYPY)/bin/pip install -q -U pip setuptools wheel
	$(VENV_PYPY)/bin/pip install -q -e '.[test]'
	touch $@

$(VENV_CPY)/.stamp: setup.py
	test -x $(VENV_CPY)/bin/python || $(CPYTHON) -m venv $(VENV_CPY)
	$(VENV_CPY)/bin/pip install -q -U pip setuptools wheel
	$(VENV_CPY)/bin/pip install -q -e '.[test]'
	touch $@

venv: $(VENV_PYPY)/.stamp $(VENV_CPY)/.stamp

up:
	deploy/local/up.sh

down:
	deploy/local/down.sh

config: up
	deploy/local/config.sh $(CONFIG)

run: venv config
	$(VENV_PYPY)/bin/streamer run -c $(CONFIG)

demo-load: venv up
	$(VENV_PYPY)/bin/python -m streamer.demo --config $(CONFIG)

unit: venv
	$(VENV_PYPY)/bin/python -m pytest -q tests/unit $(PYTEST_ARGS)
	$(VENV_CPY)/bin/python -m pytest -q tests/unit $(PYTEST_ARGS)

test-pypy: venv up
	$(VENV_PYPY)/bin/python -m pytest -q tests $(PYTEST_ARGS)

test-cpython: venv up
	$(VENV_CPY)/bin/python -m pytest -q tests $(PYTEST_ARGS)

test: lint test-pypy test-cpython

lint: venv
	$(VENV_CPY)/bin/ruff check streamer tests bench

bench: venv up
	$(VENV_PYPY)/bin/python -m bench.catchup --python $(VENV_PYPY)/bin/python --python $(VENV_CPY)/bin/python

clean:
	rm -rf $(VENV_PYPY) $(VENV_CPY)
