"""The server side of cesar: the multi-query engine and the processes around it.

* :mod:`cesar.server.engine`: running many queries at once on one merged DAG (Section 4);
* :mod:`cesar.server.wire`: what crosses a process boundary — protobuf and Arrow
  conversions, event files, routing, the client connection;
* :mod:`cesar.server.host`: what every process shares with its host (JSON logs, memory);
* :mod:`cesar.server.front`, :mod:`cesar.server.shard`, :mod:`cesar.server.feed`: the
  three programs — the public gRPC front, the shard processes, the Spark feed;
* :mod:`cesar.server.cli`: the ``cesar`` command.
"""
