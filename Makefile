# Set-up and checks; the README's two commands are `make demo` and `make test`.
VENV := .venv
BIN := $(VENV)/bin
STOCK := Stock(Name:string,Price:float,Volume:int)[min]

.PHONY: setup demo test lint browser diagrams flink-venv

# cesar is installed editable in setuptools' strict mode: a tree of links to the repository's
# files under the package names cesar.* (build/__editable__.*), which mypy can read. The tree
# holds the files that existed when it was made, so it is made again when the list of files
# (build/files.txt, rewritten only when it changes) or pyproject.toml does; the build backend
# (proto/build_backend.py) generates cesar.v1 from the .proto files at each install. A new
# benchmark result (perf/results) is not a module: it does not count (a new tree has no
# compiled modules until `make setup` builds them again, so it must not come for nothing).
$(shell mkdir -p build && git ls-files -co --exclude-standard -- automata index server perf \
    examples proto ':!perf/results' | sort > build/files.new && \
    (cmp -s build/files.new build/files.txt || mv build/files.new build/files.txt))

# cesar's own modules are byte-compiled once here: with PYTHONDONTWRITEBYTECODE set (as on this
# machine) no process writes them, and each would compile every module it imports again
# (0.15 CPU-s a server process, 0.1 a CLI call). A module edited since is compiled in memory.
$(VENV)/.installed: pyproject.toml build/files.txt $(wildcard proto/cesar/v1/*.proto)
	@echo "setting up $(VENV): cesar and its pinned dependencies (pyspark, grpcio, ...);" \
	    "the first time downloads ~400 MB and takes a few minutes"
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]' \
	    --config-settings editable_mode=strict
	$(BIN)/python -m compileall -q -j0 build/__editable__.* > /dev/null
	touch $@
	@echo "set up: $(BIN)/cesar"

# The hot path compiled by mypyc (cesar.build.COMPILED, proto/build_compiled.py): about 30 s on
# 2 cores (its C files compiled one per core), again whenever one of the engine's or the
# indices' sources changes; until then (and with CESAR_PURE=1) every module runs from its source.
$(VENV)/.compiled: $(VENV)/.installed $(wildcard index/*.py server/engine/*.py) \
    server/shard/lanes.py server/wire/alertbytes.py server/wire/protocolumns.py \
    automata/arithmetic.py automata/evaluate.py automata/making.py automata/schema.py \
    automata/skipping.py proto/cesar/build.py proto/build_compiled.py
	$(BIN)/python proto/build_compiled.py > build/mypyc.log 2>&1 || (cat build/mypyc.log; exit 1)
	@tail -1 build/mypyc.log
	touch $@

setup: $(VENV)/.compiled

demo: setup
	$(BIN)/cesar demo

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Three workers on the 2 cores (a quarter of the suite's time is spent waiting on servers,
# timeouts and Spark), each taking a whole test file at a time (module fixtures, the
# session's SparkSession and the server processes a file starts stay on one worker).
JOBS ?= 3

# The console's browser tests drive a real headless Chromium: Debian's, with its chromedriver.
/usr/bin/chromedriver:
	@echo "installing Debian's chromium and chromium-driver for the browser tests"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null || \
	    (apt-get update -q > /dev/null && \
	     DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver > /dev/null)

browser: /usr/bin/chromedriver

# The checks and the compile of the hot path run side by side, one per core.
test: browser
	$(MAKE) --no-print-directory -j2 lint $(VENV)/.compiled
	$(BIN)/pytest -n $(JOBS) --dist loadfile

# docs/diagrams/*.dot are `cesar explain --dot` of the .cel files; the .svg need Graphviz.
diagrams: setup
	for q in docs/diagrams/*.cel; do \
	  $(BIN)/cesar explain --dot --stream '$(STOCK)' $$q > $${q%.cel}.dot && \
	  dot -Tsvg $${q%.cel}.dot -o $${q%.cel}.svg || exit 1; \
	done

# perf.flinkcmp's Flink side: apache-flink in its own environment (its grpcio/protobuf pins
# are older than cesar's); about 850 MB.
.venv-flink/.installed: perf/flink-requirements.txt
	python3 -m venv .venv-flink
	.venv-flink/bin/pip install --quiet --disable-pip-version-check -r perf/flink-requirements.txt
	touch $@

flink-venv: .venv-flink/.installed
