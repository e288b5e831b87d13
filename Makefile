# microingest: `make demo` to see it work, `make test` to run the suite. Both set up everything they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON  ?= python3
VENV    := .venv
# TOPOLOGY=cluster: three brokers, a Spark master with two workers, Airflow with two Edge workers (see
# scripts/local_platform/config.py); it keeps its state apart from the single topology's, on ports of its own.
TOPOLOGY ?= single
ifeq ($(TOPOLOGY),cluster)
STATE   ?= .state/cluster
endif
STATE   ?= .state
INSTALL := .state
MVN     ?= mvn
BIN     := $(VENV)/bin
export MICROINGEST_STATE := $(abspath $(STATE))
export MICROINGEST_INSTALL := $(abspath $(INSTALL))
export MICROINGEST_TOPOLOGY := $(TOPOLOGY)
export PATH := $(abspath $(BIN)):$(PATH)

STAMP_PY    := $(VENV)/.installed
STAMP_KAFKA := $(INSTALL)/kafka/libs/.resolved
STAMP_SPARK := $(INSTALL)/spark/jars/.resolved
STAMP_BENCH := $(INSTALL)/spark/bench-jars/.resolved
STAMP_REGISTRY := $(INSTALL)/schema-registry/app/.resolved
DECODER_JAR := $(INSTALL)/spark/decoders/microingest-decoders.jar
CLASS_ARCHIVE := $(INSTALL)/spark/classes.jsa
WORKER_PYTHON := $(INSTALL)/spark/worker-python/.installed
PLATFORM    := $(BIN)/python scripts/services.py
WITH_ENV    := set -a && source $(STATE)/platform.env && set +a &&

.PHONY: help install up down status demo lint test test-cluster compose-test test-unit test-quick chaos soak soak-cluster bench clean clean-platforms

help:
	@echo "make demo    set up, start the platform, produce sample events, run the demo DAG, print the outcome"
	@echo "make test    set up and run the whole test suite (what CI runs)"
	@echo "make up | down | status    start / stop / show the local platform (TOPOLOGY=cluster: the production shape)"
	@echo "make lint                  ruff (lint and format check) and mypy, as make test runs them"
	@echo "make test-unit             pure-logic tests only (no services), under 2 minutes"
	@echo "make test-quick            the unit tests and a few end-to-end ones on the running platform, under 8 minutes"
	@echo "make chaos                 fault injection into Spark jobs (20 kill -9s, 5 of each restart), report in .state/chaos-report.json"
	@echo "make soak                  105 faults across the cluster topology, report in .state/cluster/soak-report.json"
	@echo "make compose-test          docker-compose.yml built and run under podman, driven from outside (~25 min cold)"
	@echo "make bench                 throughput and small-batch latency against the alternatives and limits, report in .state/bench/"

install: $(STAMP_PY) $(STAMP_KAFKA) $(STAMP_SPARK) $(STAMP_BENCH) $(STAMP_REGISTRY) $(DECODER_JAR) $(CLASS_ARCHIVE) \
  $(WORKER_PYTHON) postgres-binaries

$(STAMP_PY): constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	@# pyspark and pyspark-client (a dependency of the Spark provider) ship the same modules; whichever was
	@# installed last wins, so put the full pyspark back on top and check it imports.
	$(BIN)/pip install -q --no-deps --force-reinstall "$$(grep -i '^pyspark==' constraints.txt)"
	$(BIN)/python -c "import pyspark.core.status, pyspark.sql, airflow.sdk, kafka, psycopg2"
	touch $@

$(STAMP_KAFKA): build/maven/kafka-broker/pom.xml
	rm -rf $(dir $@) && mkdir -p $(dir $@)
	$(MVN) -q -B -f build/maven/kafka-broker/pom.xml dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=$(abspath $(dir $@))
	touch $@

$(STAMP_SPARK): build/maven/spark-kafka/pom.xml
	rm -rf $(dir $@) && mkdir -p $(dir $@)
	$(MVN) -q -B -f build/maven/spark-kafka/pom.xml dependency:copy-dependencies \
	  -DoutputDirectory=$(abspath $(dir $@))
	touch $@

$(STAMP_BENCH): build/maven/bench-jdbc/pom.xml
	rm -rf $(dir $@) && mkdir -p $(dir $@)
	$(MVN) -q -B -f build/maven/bench-jdbc/pom.xml dependency:copy-dependencies -DoutputDirectory=$(abspath $(dir $@))
	touch $@

# The platform's decoding functions for Spark's JVM, built and unit-tested by Maven (src/microingest/spark/jvm_decode.py).
$(DECODER_JAR): build/jvm-decoders/pom.xml $(shell find build/jvm-decoders/src -type f)
	$(MVN) -q -B -f build/jvm-decoders/pom.xml package
	# Replaced whole (a rename), never rewritten in place: a job reading it meanwhile sees one build or the other.
	mkdir -p $(dir $@) && cp build/jvm-decoders/target/microingest-decoders.jar $@.tmp && mv $@.tmp $@

# The classes a job's JVM loads, parsed and verified once (src/microingest/spark/class_archive.py): about 30 s here.
$(CLASS_ARCHIVE): $(STAMP_PY) $(STAMP_SPARK) $(DECODER_JAR) src/microingest/spark/entry/class_archive_job.py
	$(BIN)/python -m microingest.spark.class_archive_build

# The cluster topology's Spark workers' Python: pyspark's requirements and none of microingest, which every job ships
# (src/microingest/spark/job_bundle.py), as it would to a team's own cluster.
$(WORKER_PYTHON): constraints.txt $(STAMP_PY)
	rm -rf $(dir $@) && $(BIN)/python -m venv $(dir $@)
	$(dir $@)bin/pip install -q -c constraints.txt pyarrow pandas numpy
	touch $@

$(STAMP_REGISTRY): build/maven/schema-registry/pom.xml
	rm -rf $(dir $@) && mkdir -p $(dir $@)
	$(MVN) -q -B -f build/maven/schema-registry/pom.xml dependency:unpack-dependencies \
	  -DoutputDirectory=$(abspath $(dir $@)) -DmarkersDirectory=$(abspath $(dir $@))/.markers
	touch $@

.PHONY: browser
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing Debian's chromium and chromium-driver (the UI tests drive them)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

# The soak cuts the network between services with nftables rules (scripts/local_platform/faults/network_partition.py).
.PHONY: nftables
nftables:
	@if ! command -v nft >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's nftables (the soak's network partitions)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nftables >/dev/null; \
	fi

.PHONY: postgres-binaries
postgres-binaries:
	@if [ -z "$$AIRFLOW_CONN_MICROINGEST_POSTGRES" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "installing Debian's PostgreSQL server binaries"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	fi

up: install
	$(PLATFORM) up

down:
	$(PLATFORM) down

status:
	$(PLATFORM) status

demo: install
	$(PLATFORM) up
	$(WITH_ENV) $(BIN)/python -m microingest.cli.demo

# The code's own checks, configured in pyproject.toml: seconds, so `make test` runs them while its platform starts.
LINTED := src tests dags plugins spark_jobs scripts
lint: $(STAMP_PY)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

# The suite declares its Airflow-served pipelines in a folder of its own; `make up` serves pipelines/ again.
TEST_PIPELINES := $(STATE)/test-pipelines

# The suite's Spark jobs read a few hundred records each: for their driver JVMs a quick start (C1 only, serial GC)
# saves more than peak speed would, about 4 s of 20 per job. The platforms the tests start pass it to Airflow too, for
# the spark-submit jobs its tasks start (not to the Spark Connect server, long-lived). `make up` keeps the defaults.
# Their temporary folders (where spark-submit copies the job's bundle) go to the platform's Spark scratch space, as
# `up` sets for its own (config.SPARK_SCRATCH): a driver a test kills leaves its folder there, not in /tmp.
TEST_SPARK_JVM := -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.io.tmpdir=$(abspath $(STATE))/spark-scratch

# Most of a test's time is spent waiting on the platform (a scheduler's loop, a JVM, a broker), so two test processes
# share the two cores better than one: each takes whole modules (`--dist loadfile`), on names of its own. The tests
# marked `disruptive` stop or kill a service every test shares: they run after the others, one at a time in one
# process, while the other takes the `platform_free` ones (tests/conftest.py says which pass a test belongs to).
TEST_WORKERS ?= 2

# The suite runs on the single topology, then its cluster stage on the cluster topology (one platform at a time:
# two would share two cores). The code's checks run while the platform starts (mypy alone takes 20 s of the 40); a
# failure of either stops there, the checks' output shown after the platform's.
test: install browser
	rm -f $(TEST_PIPELINES)/*.yaml
	mkdir -p $(STATE)
	$(MAKE) --no-print-directory lint > $(STATE)/lint.log 2>&1 & checks=$$!; \
	  SPARK_SUBMIT_OPTS="$(TEST_SPARK_JVM)" $(PLATFORM) up --pipelines-dir $(TEST_PIPELINES) --spark-connect \
	  --schema-registry; started=$$?; \
	  wait $$checks; checked=$$?; cat $(STATE)/lint.log; [ $$checked -eq 0 ] && [ $$started -eq 0 ]
	$(WITH_ENV) SPARK_SUBMIT_OPTS="$(TEST_SPARK_JVM)" $(BIN)/pytest -q --durations=30 -n $(TEST_WORKERS) \
	  --dist loadfile -m "not disruptive and not platform_free" --junitxml=$(STATE)/test-results.xml tests \
	  --ignore=tests/integration/cluster --ignore=tests/compose
	$(WITH_ENV) SPARK_SUBMIT_OPTS="$(TEST_SPARK_JVM)" $(BIN)/pytest -q --durations=10 -n $(TEST_WORKERS) \
	  --dist loadgroup -m "disruptive or platform_free" --junitxml=$(STATE)/test-results-second-pass.xml tests \
	  --ignore=tests/integration/cluster --ignore=tests/compose
	$(BIN)/python scripts/test_durations.py $(STATE)/test-results.xml $(STATE)/test-results-second-pass.xml --top 15
	$(PLATFORM) down
	$(PLATFORM) leftovers
	$(MAKE) --no-print-directory test-cluster TOPOLOGY=cluster

# The cluster stage: the topology's own tests and the short soak (one fault of each kind), then `down`, after which no
# process of the platform may be left.
test-cluster: install nftables
	rm -f $(TEST_PIPELINES)/*.yaml
	SPARK_SUBMIT_OPTS="$(TEST_SPARK_JVM)" $(PLATFORM) up --pipelines-dir $(TEST_PIPELINES)
	$(WITH_ENV) $(BIN)/pytest -q -s --durations=10 tests/integration/cluster
	$(PLATFORM) down
	$(PLATFORM) leftovers

# The long soak: 105 faults, one every 20 s, on the cluster topology; report in .state/cluster/soak-report.json.
SOAK_FAULTS   ?= 105
SOAK_INTERVAL ?= 20
soak: install nftables
	$(MAKE) --no-print-directory soak-cluster TOPOLOGY=cluster

soak-cluster:
	rm -f $(TEST_PIPELINES)/*.yaml
	$(PLATFORM) up --pipelines-dir $(TEST_PIPELINES)
	$(WITH_ENV) MICROINGEST_SOAK_FAULTS=$(SOAK_FAULTS) MICROINGEST_SOAK_INTERVAL=$(SOAK_INTERVAL) \
	  $(BIN)/pytest -q -s tests/integration/cluster/test_soak.py
	$(PLATFORM) down
	$(PLATFORM) leftovers

chaos: install
	$(PLATFORM) up --no-airflow-services --spark-connect
	$(WITH_ENV) MICROINGEST_CHAOS_KILLS=$${MICROINGEST_CHAOS_KILLS:-20} MICROINGEST_CHAOS_RESTARTS=$${MICROINGEST_CHAOS_RESTARTS:-5} \
	  $(BIN)/pytest -q -s tests/integration/deploy/test_chaos.py

# The bench declares its pipelines in a folder of its own too. BENCH_ARGS passes more options (see
# `python -m microingest.bench --help`), e.g. BENCH_ARGS="--contenders airflow,kafka_loop --small-batches 5".
BENCH_PIPELINES  := $(STATE)/bench/pipelines
BENCH_RECORDS    ?= 1000000
BENCH_PARTITIONS ?= 6

bench: install
	$(PLATFORM) up --pipelines-dir $(BENCH_PIPELINES) --spark-connect --schema-registry
	$(WITH_ENV) $(BIN)/python -m microingest.bench --records $(BENCH_RECORDS) --partitions $(BENCH_PARTITIONS) $(BENCH_ARGS)

# docker-compose.yml built and run under podman (docker/podman-setup.sh installs it and makes the base image once):
# minutes from an empty image store, so a developer runs it by hand; figures in .state/compose/figures.json.
compose-test: $(STAMP_PY) browser
	bash docker/podman-setup.sh
	$(BIN)/pytest -q -s --durations=0 tests/compose

test-unit: $(STAMP_PY) $(DECODER_JAR)
	$(BIN)/pytest -q tests/unit

# The contributor's loop: the unit tests, then the end-to-end tests marked `quick` on the platform, started if it is not
# running and left running for the next time (`make down` stops it).
test-quick: install
	rm -f $(TEST_PIPELINES)/*.yaml
	$(PLATFORM) up --pipelines-dir $(TEST_PIPELINES) --spark-connect --schema-registry
	$(BIN)/pytest -q tests/unit
	$(WITH_ENV) SPARK_SUBMIT_OPTS="$(TEST_SPARK_JVM)" $(BIN)/pytest -q -m quick tests/integration --ignore=tests/integration/cluster

# Stop this platform and the cluster topology's, and delete their Postgres clusters (run as root, they live outside
# the state folder).
clean-platforms:
	test ! -x $(BIN)/python || $(PLATFORM) clean
	test ! -x $(BIN)/python || ! test -d .state/cluster || \
	  MICROINGEST_TOPOLOGY=cluster MICROINGEST_STATE=$(abspath .state/cluster) $(PLATFORM) clean

clean: clean-platforms
	rm -rf $(STATE) $(VENV) build/jvm-decoders/target
