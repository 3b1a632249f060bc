"""The load test's workload: epochs of quotes and a seeded stream of subscriptions.

Events are a seeded random walk of ``names`` stocks, ``epoch_size`` quotes per
time unit, all of an epoch simultaneous (``t0 = t1 = epoch``), generated epoch
by epoch so a run of any length holds only what it published.  Queries come
from one of:

* ``stock``: CEL over ``Stock`` — 70 % selections pinned to a stock with a
  rare volume, 29 % drops of a stock joined on ``Name`` (key-partitioned), 1 %
  two-stock sequences pinned at both ends (global).  The thresholds keep the
  alert rate near one alert per event whatever the subscription count;
* a techbench template (``Filter``, ``LinearStat``, ... — Section 5.1 of the
  Cayuga paper), sent as algebra messages over the stream ``S`` (discrete values
  drawn from 10, not Table 2's 100, so that queries match: ``TECH_DOMAIN``);
* a file of CEL queries, one per line, drawn at random.

Every query PUBLISHes (or is named) ``<prefix><n>`` (``L0``, ``L1``, ...), so
an alert's stream names the query that made it.

>>> work = Workload("stock", seed=1)
>>> [e.t1 for e in work.epoch(0, 3)], work.query(0).name
([0, 0, 0], 'L0')
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cesar.automata.compiler import CompiledQuery
from cesar.automata.schema import Event, StreamSchema, Value, parse_stream_spec
from cesar.automata.shape import QueryCache
from cesar.perf import techbench
from cesar.server.engine.workload import Workload as Queries
from cesar.server.wire.algebra_proto import to_algebra
from cesar.server.wire.source import Source, compile_source, parse_source
from cesar.v1 import cesar_pb2 as pb

STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"
TECH = "S(d1:int,d2:int,d3:int,d4:int,c1:float,c2:float,c3:float,c4:float)"
AlertKey = tuple[int, int, tuple[tuple[str, Any], ...]]
"""An alert as the load test compares them: its t0, t1 and values."""
TEMPLATES = ("stock", *techbench.TEMPLATES)
# Table 2's domain is 100; with epochs of a few hundred events its 3-step queries almost never
# match, and a load test should make alerts. A domain of 10 makes the equalities 10x likelier.
TECH_DOMAIN = 10


@dataclass(frozen=True)
class Query:
    """One subscription to make: CEL ``text`` or an ``algebra`` message, and its stream name."""

    name: str
    text: str = ""
    algebra: pb.Algebra | None = None

    def request(self) -> pb.SubscribeRequest:
        """The SubscribeRequest for it."""
        if self.algebra is not None:
            return pb.SubscribeRequest(algebra=self.algebra, name=self.name)
        return pb.SubscribeRequest(query=self.text)


class Workload:
    """Seeded events and queries of one template (or a query file)."""

    def __init__(
        self,
        template: str,
        seed: int,
        names: int = 200,
        query_file: Path | None = None,
        prefix: str = "L",
    ) -> None:
        if template not in TEMPLATES:
            raise ValueError(f"template must be one of {', '.join(TEMPLATES)}")
        self.template = template
        self.prefix = prefix
        self.names = names
        self.seed = seed
        self.lines = (
            [x for x in query_file.read_text().splitlines() if x.strip()] if query_file else []
        )
        self.prices = [random.Random(seed + k).uniform(10, 500) for k in range(names)]
        self.events_rng = random.Random(seed)
        if template != "stock":
            params = techbench.Parameters(domain=TECH_DOMAIN, duration=4)
            self.tech = techbench.Generator(template, params, seed)

    @property
    def stream_spec(self) -> str:
        """The input stream the queries read."""
        return STOCK if self.template == "stock" else TECH

    def epoch(self, t: int, size: int) -> list[Event]:
        """The ``size`` simultaneous events of epoch ``t`` (call with t = 0, 1, 2, ...)."""
        rng = self.events_rng
        if self.template != "stock":
            return [
                Event.of(
                    "S",
                    t,
                    t,
                    {
                        **{a: rng.randrange(TECH_DOMAIN) for a in techbench.DISCRETE},
                        **{c: round(rng.random(), 4) for c in techbench.CONTINUOUS},
                    },
                )
                for _ in range(size)
            ]
        out = []
        for _ in range(size):
            k = rng.randrange(self.names)
            self.prices[k] = round(self.prices[k] * rng.uniform(0.97, 1.03), 4)
            values: dict[str, Value] = {
                "Name": f"N{k}",
                "Price": self.prices[k],
                "Volume": rng.randrange(10_000),
            }
            out.append(Event.of("Stock", t, t, values))
        return out

    def query(self, number: int) -> Query:
        """Query ``number`` (deterministic in the seed and the number)."""
        name = f"{self.prefix}{number}"
        rng = random.Random(self.seed * 1_000_003 + number)
        if self.lines:
            return Query(name, f"{rng.choice(self.lines)} PUBLISH {name}")
        if self.template != "stock":
            self.tech.rng.seed(self.seed * 1_000_003 + number)
            return Query(name, algebra=to_algebra(self.tech.query()))
        stock = f"N{rng.randrange(self.names)}"
        kind = number % 100
        if kind < 70:
            text = f"FILTER{{Name = '{stock}' AND Volume > {rng.randrange(9_985, 10_000)}}} Stock"
        elif kind < 99:
            text = (
                f"FILTER{{Name = '{stock}' AND After < {rng.uniform(0.92, 0.94):.4f} * Before}} "
                "(SELECT Name, Price_1 AS Before, Price AS After "
                "FROM Stock NEXT{$1.Name = $2.Name} Stock)"
            )
        else:
            other = f"N{rng.randrange(self.names)}"
            text = (
                f"FILTER{{Name = '{stock}' AND Volume > 9000}} Stock "
                f"NEXT{{$2.Name = '{other}' AND $2.Price > {rng.uniform(0.8, 1.2):.2f} * $1.Price}}"
                " Stock"
            )
        return Query(name, f"{text} PUBLISH {name}")


def input_schema(work: Workload) -> StreamSchema:
    """The parsed input stream of ``work``."""
    return parse_stream_spec(work.stream_spec)


def expected_alerts(
    work: Workload, stable: Mapping[str, Query], events: Sequence[Event]
) -> dict[str, Counter[AlertKey]]:
    """Per subscription id of ``stable``, the alerts ``cesar run``'s engine makes of its query
    over ``events``, as (t0, t1, values) keys counted: what the server must have sent."""
    schema = input_schema(work)
    schemas = {schema.name: schema}
    compiled: list[CompiledQuery] = []
    by_stream: dict[str, str] = {}
    cache = QueryCache()
    for sub_id, query in stable.items():
        text = "" if query.algebra is not None else query.text
        parsed = parse_source(Source(text, query.algebra))
        compiled.append(compile_source(parsed, schemas, query.name, cache))
        by_stream[compiled[-1].name] = sub_id
    expected: dict[str, Counter[AlertKey]] = {}
    for event in Queries(schemas, compiled).run(events, engine="engine"):
        key = (event.t0, event.t1, event.values)
        expected.setdefault(by_stream[event.stream], Counter())[key] += 1
    return expected
