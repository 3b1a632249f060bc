"""Compiling one query: CEL, the CESAR algebra, its reference evaluator, event automata.

Pure code without I/O or clocks; :func:`cesar.automata.compiler.compile_query`
is the entry point of the pipeline CEL text → syntax tree → algebra →
automata; :mod:`cesar.automata.reference` is the oracle every fast path is
tested against.  Running many queries at once is :mod:`cesar.server.engine`.
"""
