# Set-up and checks; the README's two commands are `make demo` and `make test`.
VENV := .venv
BIN := $(VENV)/bin
STOCK := Stock(Name:string,Price:float,Volume:int)[min]

.PHONY: setup demo test lint diagrams flink-venv

PROTOS := $(wildcard proto/cesar/v1/*.proto)
GENERATED := proto/cesar/v1/.generated

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

# The cesar.v1 Python modules are generated from the .proto files, never committed.
$(GENERATED): $(PROTOS) server/protogen.py $(VENV)/.installed
	$(BIN)/python -m server.protogen
	touch $@

setup: $(VENV)/.installed $(GENERATED)

demo: setup
	$(BIN)/cesar demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

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
