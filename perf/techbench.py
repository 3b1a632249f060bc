"""The technical benchmark of the Cayuga paper (Section 5.1, Table 2) on three engines in one run.

    python -m cesar.perf.techbench --template Filter --queries 10000 --events 5000 \\
        --engines full,nomerge,naive --seed 1 --json out.json
    python -m cesar.perf.techbench --smoke        # a tiny configuration of every template (CI)

The stream ``S`` has four discrete attributes ``d1..d4`` (integers, domain
100) and four continuous ones ``c1..c4`` (uniform in [0, 1)); events are
generated uniformly from a seed, one per tick.  Each query has three steps
over renamed copies ``S_i`` (attributes ``d1_i``…), and each step's formula
θ_i is a conjunct of four atomic predicates (Table 2: 2 + 2):

* two equalities on discrete attributes: the query's *primary attribute*
  with its primary value (the same in all three θ_i), and one other discrete
  attribute; attributes are drawn with Zipf(zipf1) over d1..d4, values with
  Zipf(zipf_i) over the domain;
* two range predicates on continuous attributes (drawn with Zipf(zipf1)):
  ``lo <= c < lo + 0.7``, one of 25 ranges of selectivity 0.7 (``lo`` in
  0, 0.0125, …, 0.3), drawn with Zipf(zipf_i) like the values.  Table 2 says
  "25 distinct ranges, selectivity 0.7"; two-sided ranges and Zipf-drawn
  ranges are our reading, and they exercise the range clusters.

Templates (Section 5.1):

* LinearStat  σθ3(σθ2(σθ1(S1) ; S2) ; S3)
* LinearDyn   as LinearStat, θ2 and θ3 with a parameterized atom (the first
  continuous attribute 1 % above the first event's)
* Filter      σθ3(σθ2(σθ1(S1) ;θ4 S2) ;θ5 S3), θ4 = DUR <= t AND d_prim = primary value
* NonDeterministic     σθ3 ∘ μ(σθ2 ∘ μ(σθ1(S1), S2; θ4), S3; θ5)
* NonDeterministicAgg  as NonDeterministic, with a running sum of the continuous
  attributes of the three chosen events

Queries are built as algebra directly (compiling 200K CEL texts would measure
the parser); ``subscribe_cel_ms`` times the full CEL path on a sample.  Every
engine must produce the same matches (``match_digest``); the naive engine
(no merging, FR index only, Section 5.2.1) is usually run on fewer events.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import resource
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cesar.automata import algebra as alg
from cesar.automata.compiler import compile_query
from cesar.automata.construct import build_automata
from cesar.automata.schema import AttrType, Event, StreamSchema
from cesar.automata.terms import TRUE, And, Arith, Attr, Cmp, Const, Dur, Pred, Scope, Term
from cesar.perf.report import machine
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import ENGINE_MODES
from cesar.server.front import limits
from cesar.server.host.collector import tune_collector

DISCRETE = ("d1", "d2", "d3", "d4")
CONTINUOUS = ("c1", "c2", "c3", "c4")
COLUMNS = tuple((a, AttrType.INT) for a in DISCRETE) + tuple(
    (a, AttrType.FLOAT) for a in CONTINUOUS
)
SCHEMA = StreamSchema("S", COLUMNS)
SOURCE = alg.Source("S", COLUMNS)
TEMPLATES = ("LinearStat", "LinearDyn", "Filter", "NonDeterministic", "NonDeterministicAgg")
ENGINES: dict[str, EngineOptions] = {
    "full": ENGINE_MODES["engine"] or EngineOptions(),
    "nomerge": ENGINE_MODES["nomerge"] or EngineOptions(),
    "naive": ENGINE_MODES["naive"] or EngineOptions(),
    "nosteps": EngineOptions(steps=False),
    "budget": EngineOptions(
        max_steps=limits.MAX_STEPS_PER_EPOCH,
        max_engine_steps=limits.MAX_ENGINE_STEPS_PER_EPOCH,
        max_instances_per_subscription=limits.MAX_INSTANCES_PER_SUBSCRIPTION,
        max_instances=limits.MAX_INSTANCES,
    ),
}
"""Section 5's names for the engine's modes (:data:`~cesar.server.engine.workload.ENGINE_MODES`),
``nosteps``: the full engine with every FOLD run moving at every step
(:mod:`~cesar.server.engine.stepping` off), and ``budget``: the full engine with the server's
default budgets (work per subscription and epoch, instances per subscription and engine)."""


@dataclass(frozen=True)
class Parameters:
    """Table 2's parameters (defaults as in the paper)."""

    queries: int = 200_000
    events: int = 100_000
    domain: int = 100
    ranges: int = 25
    selectivity: float = 0.7
    zipf1: float = 1.0
    zipf2: float = 1.0
    zipf3: float = 0.8
    duration: int = 20
    events_per_tick: int = 1


class Zipf:
    """Draws ranks 0..n-1 with P(k) ∝ 1 / (k + 1)^s, from a seeded generator."""

    def __init__(self, n: int, s: float, rng: random.Random) -> None:
        weights = [1.0 / (k + 1) ** s for k in range(n)]
        total = sum(weights)
        acc, self.cumulative = 0.0, []
        for weight in weights:
            acc += weight / total
            self.cumulative.append(acc)
        self.rng = rng

    def draw(self) -> int:
        x = self.rng.random()
        lo, hi = 0, len(self.cumulative) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.cumulative[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        return lo


def _attr(name: str) -> Attr:
    return Attr(Scope.EVENT, name)


def _eq(name: str, value: int) -> Cmp:
    return Cmp("=", _attr(name), Const(value, AttrType.INT))


def _range(name: str, lo: float, width: float) -> list[Cmp]:
    return [
        Cmp(">=", _attr(name), Const(lo, AttrType.FLOAT)),
        Cmp("<", _attr(name), Const(round(lo + width, 6), AttrType.FLOAT)),
    ]


def renamed(step: int) -> alg.Expr:
    """S_i: every attribute ``a`` of S as ``a_i``."""
    return alg.Rename(SOURCE, tuple((a, f"{a}_{step}") for a, _ in COLUMNS))


class Generator:
    """Seeded query and event generation for one template."""

    def __init__(self, template: str, params: Parameters, seed: int) -> None:
        assert template in TEMPLATES, template
        self.template = template
        self.params = params
        self.rng = random.Random(seed)
        self.attr_zipf = Zipf(len(DISCRETE), params.zipf1, self.rng)
        self.cont_zipf = Zipf(len(CONTINUOUS), params.zipf1, self.rng)
        self.value_zipf = [
            Zipf(params.domain, s, self.rng) for s in (params.zipf1, params.zipf2, params.zipf3)
        ]
        self.range_zipf = [
            Zipf(params.ranges, s, self.rng) for s in (params.zipf1, params.zipf2, params.zipf3)
        ]
        spread = 1.0 - params.selectivity
        self.lows = [round(spread * i / (params.ranges - 1), 6) for i in range(params.ranges)]

    def theta(self, step: int, primary: str, value: int) -> list[Cmp]:
        """θ_step over S_step's attributes: 2 equalities and 2 ranges (Table 2)."""
        others = [a for a in DISCRETE if a != primary]
        second = others[self.attr_zipf.draw() % len(others)]
        atoms = [
            _eq(f"{primary}_{step}", value),
            _eq(f"{second}_{step}", self.value_zipf[step - 1].draw()),
        ]
        first = CONTINUOUS[self.cont_zipf.draw()]
        rest = [c for c in CONTINUOUS if c != first]
        for name in (first, rest[self.cont_zipf.draw() % len(rest)]):
            lo = self.lows[self.range_zipf[step - 1].draw()]
            atoms += _range(f"{name}_{step}", lo, self.params.selectivity)
        return atoms

    def query(self) -> alg.Expr:
        """One random query of the template, as algebra."""
        primary = DISCRETE[self.attr_zipf.draw()]
        value = self.value_zipf[0].draw()
        thetas = [self.theta(step, primary, value) for step in (1, 2, 3)]
        first = alg.Select(renamed(1), And(tuple(thetas[0])))
        if self.template in ("LinearStat", "LinearDyn", "Filter"):
            return self._linear(first, thetas, primary, value)
        return self._nondeterministic(first, thetas, primary, value)

    def _step_pred(self, step: int, primary: str, value: int) -> Pred:
        """θ4 / θ5: DUR <= t AND the step's primary predicate; TRUE for the linear templates."""
        if self.template not in ("LinearStat", "LinearDyn"):
            return And(
                (
                    Cmp("<=", Dur(), Const(self.params.duration, AttrType.INT)),
                    Cmp("=", Attr(Scope.RIGHT, f"{primary}_{step}"), Const(value, AttrType.INT)),
                )
            )
        return TRUE

    def _linear(
        self, first: alg.Expr, thetas: list[list[Cmp]], primary: str, value: int
    ) -> alg.Expr:
        expr = first
        for step in (2, 3):
            atoms: list[Pred] = list(thetas[step - 1])
            if self.template == "LinearDyn":
                base = Attr(Scope.EVENT, "c1_1")
                bump = Arith("*", Const(1.01, AttrType.FLOAT), base)
                atoms.append(Cmp(">", Attr(Scope.EVENT, f"c1_{step}"), bump))
            seq = alg.Seq(expr, renamed(step), self._step_pred(step, primary, value))
            expr = alg.Select(seq, And(tuple(atoms)))
        return expr

    def _nondeterministic(
        self, first: alg.Expr, thetas: list[list[Cmp]], primary: str, value: int
    ) -> alg.Expr:
        step_pred = self._step_pred
        agg = self.template == "NonDeterministicAgg"
        expr: alg.Expr = first
        if agg:
            total: Term = Attr(Scope.EVENT, "c1_1")
            for name in CONTINUOUS[1:]:
                total = Arith("+", total, Attr(Scope.EVENT, f"{name}_1"))
            expr = alg.Introduce(expr, (alg.Assign("sum", total, AttrType.FLOAT),))
        for step in (2, 3):
            # μ needs the right operand's attributes on the left: start them as copies.
            copies = tuple(
                alg.Assign(f"{a}_{step}", Attr(Scope.EVENT, f"{a}_{step - 1}"), t)
                for a, t in COLUMNS
            )
            left = alg.Introduce(expr, copies)
            aggregates: tuple[alg.Assign, ...] = ()
            if agg:
                added: Term = Attr(Scope.LEFT, "sum")
                for name in CONTINUOUS:
                    added = Arith("+", added, Attr(Scope.RIGHT, f"{name}_{step}"))
                aggregates = (alg.Assign("sum", added, AttrType.FLOAT),)
            fold = alg.Fold(left, renamed(step), step_pred(step, primary, value), TRUE, aggregates)
            expr = alg.Select(fold, And(tuple(thetas[step - 1])))
        return expr

    def events(self, count: int) -> list[Event]:
        """``count`` uniform events from t = 1, ``events_per_tick`` of them per tick."""
        rng = random.Random(self.rng.random())
        out = []
        for number in range(count):
            t = 1 + number // self.params.events_per_tick
            values: dict[str, int | float] = {
                a: rng.randrange(self.params.domain) for a in DISCRETE
            }
            values.update({c: round(rng.random(), 4) for c in CONTINUOUS})
            out.append(Event.of("S", t, t, values))
        return out


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return round(pages * resource.getpagesize() / 2**20, 1)


def digest(events: Sequence[Event]) -> str:
    """Order-independent fingerprint of matches, ignoring which subscription got them."""
    lines = sorted(repr((e.stream, e.t0, e.t1)) for e in events)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def run_engine(
    name: str,
    template: str,
    queries: list[alg.Expr],
    events: list[Event],
) -> dict[str, object]:
    """Subscribe every query to a fresh engine, process the events, and measure.

    ``rss_mb`` is what the engine holds: each query's schema (cached on its
    algebra nodes, 4.3 KB a Filter query) is worked out before the baseline,
    as it is part of the benchmark's input, not of the engine.
    """
    schemas = [expr.attributes for expr in queries]
    gc.collect()
    rss_before = _rss_mb()
    engine = Engine(ENGINES[name])
    subscribe_ms = []
    unmerged = 0
    for number, expr in enumerate(queries):
        tick = time.perf_counter()
        automata = build_automata(expr, StreamSchema(f"q{number}", schemas[number]))
        engine.subscribe(f"q{number}", automata)
        subscribe_ms.append((time.perf_counter() - tick) * 1000)
        unmerged += sum(len(a.nodes) - 1 for a in automata)
    tick = time.perf_counter()
    matches = engine.run(events)
    seconds = time.perf_counter() - tick
    counters = engine.counters
    cuts = statistics.quantiles(subscribe_ms, n=100) if len(subscribe_ms) > 1 else [0.0] * 99
    record = {
        "engine": name,
        "template": template,
        "queries": len(queries),
        "events": len(events),
        "seconds": round(seconds, 3),
        "events_per_s": round(len(events) / seconds, 1) if seconds else None,
        "matches": len(matches),
        "match_digest": digest(matches),
        "dag_nodes_unmerged": unmerged,
        "dag_nodes_by_level": engine.program.dag.levels(),
        "active_nodes_avg": round(counters.active_nodes_sum / max(counters.epochs, 1), 1),
        "fr_hits_per_event": round(counters.fr_hits / max(counters.events, 1), 1),
        "nodes_touched_per_event": round(counters.nodes_touched / max(counters.events, 1), 2),
        "nodes_visited_per_event": round(counters.nodes_visited / max(counters.events, 1), 1),
        "instances_touched_per_event": round(
            counters.instances_touched / max(counters.events, 1), 2
        ),
        "spawned_per_event": round(counters.spawned / max(counters.events, 1), 2),
        "steps_shared_per_event": round(counters.steps_shared / max(counters.events, 1), 2),
        "collected": counters.collected,
        "rss_mb": round(_rss_mb() - rss_before, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "subscribe_ms_p50": round(cuts[49], 4),
        "subscribe_ms_p99": round(cuts[98], 4),
    }
    del engine
    return record


CEL_SAMPLE = """
FILTER{{d{p}_3 = {v} AND c1_3 >= 0.1 AND c1_3 < 0.8}} (
  FILTER{{d{p}_2 = {v} AND c2_2 >= 0.2 AND c2_2 < 0.9}} (
    (SELECT d1 AS d1_1, d2 AS d2_1, d3 AS d3_1, d4 AS d4_1, c1 AS c1_1, c2 AS c2_1,
            c3 AS c3_1, c4 AS c4_1 FROM FILTER{{d{p} = {v} AND c3 >= 0.0 AND c3 < 0.7}} S)
    NEXT{{}}
    (SELECT d1 AS d1_2, d2 AS d2_2, d3 AS d3_2, d4 AS d4_2, c1 AS c1_2, c2 AS c2_2,
            c3 AS c3_2, c4 AS c4_2 FROM S))
  NEXT{{}}
  (SELECT d1 AS d1_3, d2 AS d2_3, d3 AS d3_3, d4 AS d4_3, c1 AS c1_3, c2 AS c2_3,
          c3 AS c3_3, c4 AS c4_3 FROM S))
"""


def cel_subscribe_ms(samples: int, seed: int) -> float:
    """Median milliseconds to compile a LinearStat-shaped CEL query and subscribe it."""
    rng = random.Random(seed)
    engine = Engine()
    timings = []
    for number in range(samples):
        text = CEL_SAMPLE.format(p=rng.randint(1, 4), v=rng.randrange(100))
        tick = time.perf_counter()
        compiled = compile_query(text, {"S": SCHEMA}, f"cel{number}")
        engine.subscribe(compiled.name, compiled.automata)
        timings.append((time.perf_counter() - tick) * 1000)
    return round(statistics.median(timings), 3)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.techbench", description=__doc__)
    parser.add_argument("--template", choices=TEMPLATES, default="Filter")
    parser.add_argument("--queries", type=int, default=Parameters.queries)
    parser.add_argument("--events", type=int, default=Parameters.events)
    parser.add_argument("--engines", default="full,nomerge,naive")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--zipf1", type=float, default=Parameters.zipf1)
    parser.add_argument(
        "--events-per-tick",
        type=int,
        default=Parameters.events_per_tick,
        help="simultaneous events per time unit (DUR <= t then spans t times as many events)",
    )
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument(
        "--smoke", action="store_true", help="every template, 200 queries, 300 events"
    )
    args = parser.parse_args(argv)
    tune_collector()  # as the server's shards run the engine
    engines = args.engines.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        parser.error(f"unknown engines {unknown}; choose from {sorted(ENGINES)}")
    templates = list(TEMPLATES) if args.smoke else [args.template]
    queries_n, events_n = (200, 300) if args.smoke else (args.queries, args.events)
    params = Parameters(
        queries=queries_n,
        events=events_n,
        zipf1=args.zipf1,
        events_per_tick=args.events_per_tick,
    )
    records = []
    for template in templates:
        generator = Generator(template, params, args.seed)
        queries = [generator.query() for _ in range(params.queries)]
        events = generator.events(params.events)
        for name in engines:
            record = run_engine(name, template, queries, events)
            records.append(record)
            print(json.dumps(record), flush=True)
        digests = {r["match_digest"] for r in records if r["template"] == template}
        if len(digests) != 1:
            print(f"techbench: engines disagree on {template}: {digests}", flush=True)
            return 1
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "parameters": asdict(params),
        "seed": args.seed,
        "subscribe_cel_ms_p50": cel_subscribe_ms(20 if args.smoke else 200, args.seed),
        "records": records,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
