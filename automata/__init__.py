"""The meaning and compilation of subscriptions: CEL, the CESAR algebra, its evaluator.

Pure code without I/O or clocks; ``automata.compiler.compile_query`` is the
entry point of the pipeline CEL text → syntax tree → algebra.
"""
