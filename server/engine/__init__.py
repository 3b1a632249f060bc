"""Running many queries at once (Section 4): the merged DAG, generated code, the epoch loop.

:class:`~cesar.server.engine.engine.Engine` pairs a compiled
:class:`~cesar.server.engine.program.QueryProgram` with its run state,
:class:`~cesar.server.engine.state.EngineState`; :mod:`cesar.server.engine.workload`
runs a set of queries on any evaluator (``cesar run``).  Pure: no I/O, no clock.
"""
