"""cesar: a Cayuga-style multi-query publish/subscribe server for complex events.

The installed package maps the repository's folders under one name
(``pyproject.toml``, ``[tool.setuptools.package-dir]``), lowest layer first:

* ``cesar.automata`` (``automata/``): compiling one query — CEL, the CESAR algebra, its
  reference evaluator, event automata;
* ``cesar.index`` (``index/``): predicate indices, knowing nothing of CEL;
* ``cesar.server`` (``server/``): the engine, the wire formats, the front, the shards,
  the Spark feed and the ``cesar`` command;
* ``cesar.perf`` (``perf/``): benchmarks;
* ``cesar.v1`` (``proto/cesar/v1/``): the gRPC API, generated at build time;
* ``cesar.examples`` (``examples/``): the bundled sample data and queries.
"""

from cesar.build import install

install()  # the compiled hot path, or every module from source (cesar.build)
