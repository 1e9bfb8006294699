# mqtool: the two set-up commands of the README are `make demo` and `make test`.
# Both create the virtual environment (.venv) on a fresh machine and install mqtool into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO ?= demo-store
SPARK_JAR := spark/jars/mqtool-spark.jar
CLASS_ARCHIVE := spark/jars/spark-classes.jsa
JAVA_SRC := $(wildcard spark/java/mqtool/spark/*.java)

.PHONY: dev test demo lint typecheck conformance bench clean peers chromium realmq spark-layout dist

# setuptools warns on every editable install whose packages are mapped (formats/ is installed as
# mqtool.formats): "folders in your working directory with the same name as your package ... may
# take precedence during imports". Here the folder mqtool/ IS the source the editable install
# points to, so it shadows nothing; the warning is silenced for this one install, nothing else.
EDITABLE_QUIET := PYTHONWARNINGS=ignore:::setuptools.command.editable_wheel

# The first install downloads about 700 MB from PyPI (pyspark alone 450 MB): pip shows its
# progress; later installs (pyproject.toml changed) come from pip's cache.
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@echo "== installing mqtool and its dependencies into $(VENV) (the first time: minutes)"
	$(BIN)/python -m pip install -q --upgrade pip
	$(EDITABLE_QUIET) $(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	touch $@

dev: $(BIN)/.installed $(SPARK_JAR) $(CLASS_ARCHIVE)
	@if command -v mvn >/dev/null && command -v javac >/dev/null; then $(MAKE) --no-print-directory realmq; \
	else echo "no mvn or javac: the tests that run real RocketMQ (tests/realmq.py) need Maven and Java 17"; fi

# mqtool's Java commitlog reader for Spark (spark/java, a DataSource V2 source): compiled with
# javac against the jars pyspark ships (spark/javabuild.py, which the wheel build uses too).
# Without a JDK the scan reads the commitlog with the Python data source alone (same rows).

# RecordLayout.java is generated from the record layout table (formats/commitlog_layout.py);
# tests/spark/test_java_layout.py fails when the committed file is not current.
spark-layout: $(BIN)/.installed
	$(BIN)/python -m mqtool.spark.java_layout

spark/java/mqtool/spark/RecordLayout.java: formats/commitlog_layout.py spark/java_layout.py
	$(BIN)/python -m mqtool.spark.java_layout

$(SPARK_JAR): $(BIN)/.installed $(JAVA_SRC) spark/java/mqtool/spark/RecordLayout.java
	$(BIN)/python -m mqtool.spark.javabuild $@

# The Spark driver JVM's class-data archive (mqtool.spark.classarchive: one scan of a fixture
# store in a JVM that writes it as it exits, about 30 s): sessions start about 2.4 s sooner.
# Without it (no JDK, or the build failed: said on stderr) Spark starts as it is.
$(CLASS_ARCHIVE): $(BIN)/.installed $(SPARK_JAR)
	@echo "== Spark's class-data archive: one scan in a JVM that writes it (about 30 s)"
	$(BIN)/python -m mqtool.spark.classarchive

# The wheel and the sdist users install (dist/): both carry the Spark reader's jar built above
# (only the build tools and the jar are needed: not the class-data archive or real RocketMQ).
# `pipx install dist/mqtool-*.whl` installs the mqtool command for a user.
dist: $(BIN)/.installed $(SPARK_JAR)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# Three worker processes, each taking whole test files (so a module's broker or Spark session
# starts once; the files grouped in tests/conftest.py's TOGETHER, which share one real broker's
# run, go to one worker together). Three on two cores: much of a test's time is a JVM starting
# or a client waiting on a broker; with two workers the suite used about 1.3 of the 2 cores,
# with four it waited on the cores (23.9 minutes against 21.4 and 22.9 with three). The 25
# slowest steps are listed at the end.
test: dev peers chromium realmq
	$(BIN)/python -m pytest -n 3 --dist loadfile --durations=25

# Real Apache RocketMQ 4.9.7 and 5.3.3 for the tests (tests/realmq.py, tests/judge): the official
# broker, namesrv, tools, client and store artifacts resolved from Maven Central with mvn into
# ~/.m2 (about 125 MB), and the tests' Java programs compiled, so no test downloads anything.
realmq: $(BIN)/.installed
	$(BIN)/python tests/realmq.py

# tests/report render the HTML pages in headless Chromium: Debian's package (Playwright drives
# it; no browser download). Installed with apt-get when missing (needs root, as on CI).
chromium:
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

# The real RocketMQ remoting clients the serve tests start (see tests/serve/): PyPI rocketmq 0.4.4
# (C++ core, own venv: it installs a top-level `rocketmq` package) and npm ali-ons 3.12.0.
PEERS := build/peers
PEERS_STAMP := $(PEERS)/.installed-rocketmq-0.4.4-ali-ons-3.12.0

peers: $(PEERS_STAMP)

$(PEERS_STAMP):
	rm -rf $(PEERS)/cpp $(PEERS)/node
	$(PY) -m venv $(PEERS)/cpp
	$(PEERS)/cpp/bin/python -m pip install -q rocketmq==0.4.4
	mkdir -p $(PEERS)/node
	cd $(PEERS)/node && echo '{"name":"mqtool-peers","private":true}' > package.json \
		&& npm install --no-audit --no-fund --loglevel=error ali-ons@3.12.0
	touch $@

# The main job on the built-in reference store: build a demo store, look inside it, follow a
# dead-lettered order through its retries, resend it (dry run first), trace it again, audit it.
demo: dev
	rm -rf $(DEMO)
	$(BIN)/mqtool demo $(DEMO)
	$(BIN)/mqtool inspect $(DEMO)
	$(BIN)/mqtool trace $(DEMO) --key ORD-100006
	$(BIN)/mqtool dlq list $(DEMO)
	$(BIN)/mqtool dlq show $(DEMO) --group cg_orders --limit 5
	$(BIN)/mqtool dlq resend $(DEMO) --group cg_orders --key ORD-100006 --target $(DEMO) --dry-run
	$(BIN)/mqtool dlq resend $(DEMO) --group cg_orders --key ORD-100006 --target $(DEMO)
	$(BIN)/mqtool trace $(DEMO) --key ORD-100006
	$(BIN)/mqtool scan $(DEMO)

lint: dev
	$(BIN)/ruff check mqtool formats spark tests bench

# mypy cannot follow setuptools' package-dir mapping (formats/ is mqtool.formats): check a
# symlinked tree of the real layout instead.
typecheck: dev
	rm -rf build/typecheck && mkdir -p build/typecheck/mqtool
	for f in mqtool/*; do ln -s ../../../$$f build/typecheck/mqtool/; done
	ln -s ../../../formats build/typecheck/mqtool/formats
	ln -s ../../../spark build/typecheck/mqtool/spark
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p mqtool

# Every benchmark at its small default size (bench/<name>/run.py, or bench/<name>/bench_<name>.py),
# then bench/figures.py copies each bench/<name>/last-run.json into README.md.
bench: dev
	set -e; for d in bench/*/; do \
	  n=$$(basename $$d); r=$$d/run.py; [ -f $$r ] || r=$$d/bench_$$n.py; \
	  if [ -f $$r ]; then echo "== $$r"; $(BIN)/python $$r; fi; \
	done
	$(BIN)/python bench/figures.py

conformance: dev
	MQTOOL=$(BIN)/mqtool ../shared/conformance/check

clean:
	rm -rf build dist $(DEMO) bench/out .pytest_cache
