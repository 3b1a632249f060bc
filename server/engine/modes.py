"""The names of the evaluators ``cesar run`` and ``cesar bench`` offer, without importing them.

The command line lists them before it knows which command runs (its ``--help``), so they are
named here, apart from the engine: :data:`cesar.server.engine.workload.ENGINE_MODES` gives
each its options, in this order.
"""

ENGINE_NAMES: tuple[str, ...] = ("engine", "nomerge", "naive", "planned", "automaton", "reference")
"""The multi-query engine with its optimisations on, then off one by one, then with pattern
plans; one automaton per query; the reference evaluator."""
