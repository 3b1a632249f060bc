"""The ``cesar`` command line.

Subcommands import only what they need, so ``cesar`` starts fast; later
subcommands that talk gRPC or run Spark import those libraries inside their
handlers.  Commands that live above the server — ``cesar loadtest`` in
:mod:`cesar.perf.loadtest` — register themselves through the ``cesar.commands``
entry point group (``pyproject.toml``), so no server module imports ``perf``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cesar import build
from cesar.examples import STOCKS_SAMPLE
from cesar.server.engine.modes import ENGINE_NAMES

if TYPE_CHECKING:
    from cesar.automata.schema import Event, StreamSchema
    from cesar.server.engine.workload import Workload

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""The shell's status for a command stopped by SIGINT (128 + 2): Ctrl-C."""
COMMANDS = "cesar.commands"
"""The entry point group of commands defined above the server: ``f(subparsers)`` adds one."""
ENGINE_HELP = (
    "engine: merged DAG with FR/AN/AI indices; nomerge: no state merging; "
    "naive: one automaton per query with the FR index only; planned: engine, each pattern "
    "on its cheapest plan; automaton: one automaton per query, no indices; reference: the "
    "algebra, literally (slow)"
)


def _stream_specs(values: Sequence[str]) -> list[StreamSchema]:
    from cesar.automata.schema import SchemaError, parse_stream_spec

    try:
        return [parse_stream_spec(value) for value in values]
    except SchemaError as exc:
        raise SystemExit(_fail(f"--stream: {exc}")) from None


def _fail(message: str) -> int:
    print(f"cesar: {message}", file=sys.stderr)
    return EXIT_USAGE


def _query_sources(args: argparse.Namespace) -> list[tuple[str, str]]:
    from cesar.automata.script import split_script

    sources: list[tuple[str, str]] = []
    for path in args.query or ():
        try:
            texts = split_script(Path(path).read_text())
        except OSError as exc:
            raise SystemExit(_fail(f"--query {path}: {exc.strerror}")) from None
        if not texts:
            raise SystemExit(_fail(f"--query {path}: the file holds no query"))
        stem = Path(path).stem
        sources += [(stem if n == 1 else f"{stem}_{n}", t) for n, t in enumerate(texts, 1)]
    if args.queries and Path(args.queries).is_dir():
        folder = Path(args.queries)
        for path in sorted([*folder.glob("*.cel"), *folder.glob("*.sase")]):
            sources.append((path.stem, path.read_text()))
    elif args.queries:
        try:
            lines = Path(args.queries).read_text().splitlines()
        except OSError as exc:
            raise SystemExit(_fail(f"--queries {args.queries}: {exc.strerror}")) from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                sources.append((str(record["id"]), str(record["query"])))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise SystemExit(
                    _fail(f'{args.queries}:{number}: expected {{"id": ..., "query": ...}}')
                ) from None
    if not sources:
        raise SystemExit(_fail("give at least one --query FILE.cel or --queries FILE.jsonl"))
    return sources


def _compiled(
    args: argparse.Namespace, schemas: list[StreamSchema], automata: bool = True
) -> Workload:
    """The queries of ``run`` and ``bench`` compiled, with a bar counting them; checked
    against ``--engine``'s plans.  WorkloadError if one does not compile."""
    from cesar.automata.translate import Options
    from cesar.server.cli.progress import progress_bar
    from cesar.server.engine.workload import Workload

    sources = _query_sources(args)
    with progress_bar(args.quiet) as bar:
        task = bar.add_task("compiling queries", total=len(sources))
        program = Workload.build(
            schemas,
            sources,
            Options(dnf_limit=args.dnf_limit),
            automata,
            lambda done, total: bar.update(task, completed=done, total=total),
        )
    program.check_plans(args.engine)
    return program


def cmd_run(args: argparse.Namespace) -> int:
    """Evaluate queries over an event file and print every published event as JSON."""
    from cesar.automata.evaluate import Faults
    from cesar.server.cli.ingest import read_event_file, skipped_report
    from cesar.server.cli.progress import progress_bar
    from cesar.server.engine.workload import WorkloadError
    from cesar.server.host.collector import tune_collector
    from cesar.server.wire.eventfile import EventInputError, event_json

    tune_collector()  # as the server's front and shards: a large, long-lived heap
    schemas = _stream_specs(args.stream)
    try:
        program = _compiled(args, schemas, automata=args.engine != "reference")
    except WorkloadError as exc:
        return _fail(str(exc))
    with progress_bar(args.quiet) as bar:
        reading = bar.add_task("reading lines", total=None)
        try:
            result = read_event_file(
                args,
                program.inputs,
                lambda done, lines: bar.update(reading, completed=done, total=lines),
            )
        except OSError as exc:
            return _fail(f"{args.events}: {exc.strerror}")
        except EventInputError as exc:
            return _fail(f"{args.events}: {exc}")
    if result.skipped:
        print(skipped_report(result.skipped).report("skipped"), file=sys.stderr)
        if not result.events:
            print(f"cesar: no event of {args.events} could be read", file=sys.stderr)
            return EXIT_USAGE
    faults = Faults()
    with progress_bar(args.quiet) as bar:
        task = bar.add_task(f"evaluating ({args.engine})", total=len(result.events))
        outputs = program.run(
            result.events, faults, args.engine, lambda done: bar.update(task, completed=done)
        )
    if program.released:
        print(
            f"cesar: the input ended: {program.released} match(es) that AFTER MATCH SKIP held "
            "were released (no run could complete any more)",
            file=sys.stderr,
        )
    schemas_out = {query.name: query.output for query in program.queries}
    outputs.sort(key=lambda e: (e.t1, e.t0, e.stream, repr(e.values)))
    write = sys.stdout.write
    for event in outputs:
        write(event_json(event, schemas_out[event.stream]) + "\n")
    if faults.arithmetic:
        print(
            f"cesar: {faults.arithmetic} predicate atom(s) were false because of an arithmetic "
            "fault (division by zero or overflow)",
            file=sys.stderr,
        )
    return 0


def _read_program_events(args: argparse.Namespace) -> tuple[Workload, list[Event], int]:
    """Compile the queries and read the (sorted) events of ``cesar bench``, and how many lines
    it skipped (said on standard error; none read at all is an error)."""
    from cesar.server.cli.ingest import ingest_of, read_event_file, skipped_report
    from cesar.server.cli.progress import progress_bar
    from cesar.server.engine.workload import WorkloadError
    from cesar.server.wire.eventfile import EventInputError

    schemas = _stream_specs(args.stream)
    try:
        program = _compiled(args, schemas)
    except WorkloadError as exc:
        raise SystemExit(_fail(str(exc))) from None
    try:
        with progress_bar(args.quiet) as bar:
            reading = bar.add_task("reading lines", total=None)
            result = read_event_file(  # sorted, bad lines skipped
                args,
                program.inputs,
                lambda done, lines: bar.update(reading, completed=done, total=lines),
            )
    except OSError as exc:
        raise SystemExit(_fail(f"{args.events}: {exc.strerror}")) from None
    except EventInputError as exc:
        raise SystemExit(_fail(f"{args.events}: {exc}")) from None
    if result.skipped:
        print(skipped_report(result.skipped).report("rejected"), file=sys.stderr)
        if not result.events:
            hint = (
                ""
                if ingest_of(args) is not None
                else " (a file not written for cesar: --time-column)"
            )
            raise SystemExit(_fail(f"{args.events}: no event read{hint}"))
    events = result.events[: args.limit] if args.limit else result.events
    return program, list(events), len(result.skipped)


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure one engine on any queries and events; print a JSON summary."""
    import resource
    import statistics
    import time
    from dataclasses import asdict

    from cesar.automata.evaluate import Faults
    from cesar.server.engine.engine import Engine
    from cesar.server.engine.workload import ENGINE_MODES

    started = time.perf_counter()
    program, events, skipped = _read_program_events(args)
    compile_s = time.perf_counter() - started
    summary: dict[str, object] = {"engine": args.engine, "queries": len(program.queries)}
    options = ENGINE_MODES[args.engine]
    if options is not None:
        engine = Engine(options)
        subscribe_ms = []
        for query in program.queries:
            tick = time.perf_counter()
            engine.subscribe(query.name, query.automata, None, query.pattern)
            subscribe_ms.append((time.perf_counter() - tick) * 1000)
        tick = time.perf_counter()
        matches = len(engine.run(events))
        released = len(engine.finish())
        seconds = time.perf_counter() - tick
        matches += released
        cuts = (
            statistics.quantiles(subscribe_ms, n=100)
            if len(subscribe_ms) > 1
            else subscribe_ms * 99
        )
        summary.update(
            subscribe_ms_p50=round(cuts[49], 3),
            subscribe_ms_p99=round(cuts[98], 3),
            dag_nodes_by_level=engine.program.dag.levels(),
            released_at_end=released,
            counters=asdict(engine.counters),
            faults=engine.faults.arithmetic,
        )
    else:
        faults = Faults()
        tick = time.perf_counter()
        matches = len(program.run(events, faults, engine=args.engine))
        seconds = time.perf_counter() - tick
        summary.update(faults=faults.arithmetic, released_at_end=program.released)
    summary.update(
        events=len(events),
        skipped=skipped,
        compile_s=round(compile_s, 3),
        seconds=round(seconds, 3),
        events_per_s=round(len(events) / seconds, 1) if seconds else None,
        matches=matches,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    print(json.dumps(summary, indent=2))
    return 0


_QUERY_FILE = re.compile(r"[^\s{}()']+\.(cel|sase|jsonl)")
"""What can only be a query file's name (no query text looks like it)."""


def _query_text(value: str) -> str:
    """A query file's contents (CEL or a pattern), or ``value`` itself when it names no file."""
    path = Path(value)
    try:
        named_file = path.is_file()
    except OSError:  # not even a possible path (too long, say): it is query text
        named_file = False
    if not named_file:
        if _QUERY_FILE.fullmatch(value):
            raise SystemExit(_fail(f"{value}: no such file"))
        return value
    try:
        return path.read_text()
    except OSError as exc:
        raise SystemExit(_fail(f"{value}: {exc.strerror}")) from None


def cmd_explain(args: argparse.Namespace) -> int:
    """Print a query's compiled algebra, output schema, placement and automata (or DOT)."""
    from cesar.automata.automaton import format_dot
    from cesar.automata.compiler import compile_query
    from cesar.automata.errors import CelError
    from cesar.automata.explain import explain, explain_data

    if args.queries:
        if args.query is not None:
            return _fail("give a QUERY or --queries, not both")
        if args.json:
            return _fail("--json shows one QUERY's compiled form, not the sharing report")
        return _explain_sharing(args)
    if args.json and args.dot:
        return _fail("give --json or --dot, not both")
    if args.query is None:
        return _fail("give a QUERY, or --queries for the sharing report of many")
    schemas = {schema.name: schema for schema in _stream_specs(args.stream)}
    try:
        compiled = compile_query(_query_text(args.query), schemas, "query")
    except CelError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(explain_data(compiled, schemas), indent=2))
    else:
        print(format_dot(compiled.automata) if args.dot else explain(compiled, schemas))
    return 0


def _explain_sharing(args: argparse.Namespace) -> int:
    """Subscribe every query to one engine and print which share which template edges."""
    from cesar.server.engine.engine import Engine
    from cesar.server.engine.sharing import sharing_report
    from cesar.server.engine.workload import Workload, WorkloadError

    try:
        program = Workload.build(_stream_specs(args.stream), _query_sources(args))
    except WorkloadError as exc:
        return _fail(str(exc))
    engine = Engine()
    for query in program.queries:
        engine.subscribe(query.name, query.automata)
    print(sharing_report(engine))
    return 0


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Help that names each option's default, where it has one worth naming."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, [], argparse.SUPPRESS):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every parser of ``cesar`` (subcommands included) shows defaults in its help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)


def cmd_demo(args: argparse.Namespace) -> int:
    """``cesar demo`` (:mod:`cesar.server.cli.demo`, imported when it runs)."""
    from cesar.server.cli.demo import cmd_demo as demo

    return demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="cesar", description="Cayuga-style complex event subscriptions.")
    parser.add_argument(
        "--version", action="version", version=f"cesar {version('cesar')}, {build.describe()}"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="evaluate queries over an event file")
    run.add_argument(
        "--stream",
        action="append",
        required=True,
        metavar="SPEC",
        help="input stream, e.g. 'Stock(Name:string,Price:float)[min]'",
    )
    run.add_argument(
        "--query",
        action="append",
        metavar="FILE",
        help="a query file: CEL (.cel) or a pattern (.sase)",
    )
    run.add_argument(
        "--queries", metavar="FILE.jsonl", help='many queries as {"id", "query"} JSON lines'
    )
    run.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="engine",
        help=ENGINE_HELP,
    )
    run.add_argument("--sort", action="store_true", help="sort events by t1 before evaluating")
    run.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal)"
    )
    run.add_argument(
        "--skip-bad", action="store_true", help="skip malformed event lines and count them"
    )
    run.add_argument(
        "--dnf-limit", type=int, default=256, help="maximum DNF conjuncts of one predicate"
    )
    run.add_argument("events", metavar="EVENTS", help="JSON Lines or CSV file, or - for stdin")
    from cesar.server.cli.ingest import add_ingest_arguments

    add_ingest_arguments(run)
    run.set_defaults(handler=cmd_run)

    bench = sub.add_parser("bench", help="measure an engine on queries and an event file")
    bench.add_argument("--stream", action="append", required=True, metavar="SPEC")
    bench.add_argument(
        "--queries",
        required=True,
        metavar="Q",
        help='a directory of .cel and .sase files, or JSON Lines of {"id", "query"}',
    )
    bench.add_argument("--events", required=True, metavar="E", help="JSON Lines or CSV events")
    bench.add_argument("--engine", choices=ENGINE_NAMES, default="engine", help=ENGINE_HELP)
    bench.add_argument("--limit", type=int, help="use only the first N events (after sorting)")
    bench.add_argument("--dnf-limit", type=int, default=256)
    bench.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal)"
    )
    add_ingest_arguments(bench)
    bench.set_defaults(handler=cmd_bench, query=None, sort=True, skip_bad=True)

    explain = sub.add_parser("explain", help="show a query's compiled form")
    explain.add_argument("--stream", action="append", required=True, metavar="SPEC")
    explain.add_argument("--dot", action="store_true", help="print Graphviz source instead")
    explain.add_argument("--json", action="store_true", help="print it as one JSON object")
    explain.add_argument(
        "query", metavar="QUERY", nargs="?", help="a .cel or .sase file, or the query text"
    )
    explain.add_argument(
        "--queries",
        metavar="Q",
        help="instead of QUERY: a directory of .cel and .sase files or JSON Lines of "
        '{"id", "query"}; prints which subscriptions share each template edge',
    )
    explain.set_defaults(handler=cmd_explain)
    serve = sub.add_parser("serve", help="run the server: a front and its shard processes")
    from cesar.server.cli.remote import add_remote_commands
    from cesar.server.cli.serve import add_serve_arguments

    add_serve_arguments(serve)
    shard = sub.add_parser(
        "shard", help="run one shard on its own, for a front on another machine (--listen)"
    )
    from cesar.server.shard.options import add_shard_arguments

    add_shard_arguments(shard)

    def standalone_shard(args: argparse.Namespace) -> int:
        if args.listen is None:
            print("cesar shard: --listen HOST:PORT is required", file=sys.stderr)
            return 2
        from cesar.server.shard.process import run as run_shard

        return run_shard(args)

    def repair_command(args: argparse.Namespace) -> int:
        from cesar.server.front.serve import repair_log

        return repair_log(args.data_dir, args.stream, args.after)

    shard.set_defaults(handler=standalone_shard)
    repair = sub.add_parser(
        "repair-log",
        help="with the server stopped, drop a stream's logged events after a time "
        "(the way back from a wrong timestamp)",
    )
    repair.add_argument("--data-dir", type=Path, required=True, help="the server's data directory")
    repair.add_argument("--stream", required=True, help="the input stream whose events go")
    repair.add_argument(
        "--after",
        required=True,
        metavar="TIME",
        help="drop its events with t1 after this: ticks of its unit, or an ISO 8601 time such "
        "as 2020-10-26T16:45Z (with a zone offset, or UTC)",
    )
    repair.set_defaults(handler=repair_command)
    add_remote_commands(sub)
    from cesar.server.cli.feed import add_feed_command

    add_feed_command(sub)
    demo = sub.add_parser("demo", help="server + Spark feed on the stock sample, printing alerts")
    demo.add_argument("--events", default=str(STOCKS_SAMPLE))
    demo.add_argument("--rows-per-file", type=int, default=300, help="quotes per dropped file")
    demo.add_argument("--pause", type=float, default=0.5, help="seconds between files")
    demo.set_defaults(handler=cmd_demo)
    for entry in entry_points(group=COMMANDS):
        entry.load()(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except BrokenPipeError:
        # The reader (e.g. `head`) went away: stop quietly, as Unix tools do.
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        # Ctrl-C: stop without a traceback, with the status a shell gives SIGINT.
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    raise SystemExit(main())
