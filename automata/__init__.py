"""The meaning and compilation of subscriptions: CEL, the CESAR algebra, its evaluator.

Pure code without I/O or clocks; ``automata.compiler.compile_query`` is the
entry point of the pipeline CEL text → syntax tree → algebra → automata;
``automata.engine`` runs many subscriptions on one merged DAG.
"""

ENGINES = ("engine", "nomerge", "naive", "automaton", "reference")
"""The evaluators of ``cesar run`` and ``cesar bench`` (:meth:`automata.compiler.Program.run`)."""
