"""A shard builds from the front's Algebra message exactly what the front compiled from CEL.

Shards no longer parse: the front sends each subscription as the Algebra message
of its compiled query (``to_algebra``) and the shard builds the automata with
``compile_algebra``.  The two must give equal automata and output schemas, or
shards would run something else than the front placed and explained.
"""

import random

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.schema import parse_stream_spec
from cesar.examples import QUERIES
from cesar.perf.families import FAMILIES
from cesar.perf.serverbench import queries
from cesar.server.wire.algebra_proto import compile_algebra, to_algebra
from cesar.v1 import cesar_pb2 as pb

STOCK = {"Stock": parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")}
PUBLISHED = dict(STOCK)
for _example in ("rising", "drops"):  # drop_after_rise reads what these two publish
    _output = compile_query((QUERIES / f"{_example}.cel").read_text(), STOCK).output
    PUBLISHED[_output.name] = _output
CASES = [((QUERIES / "drop_after_rise.cel").read_text(), PUBLISHED)]
CASES += [((QUERIES / f"{name}.cel").read_text(), STOCK) for name in ("rising", "drops")]
CASES += [(text, STOCK) for _, text in queries(300)]
CASES += [
    (make(random.Random(n), "AAPL", 115.0), STOCK) for n in range(5) for make in FAMILIES.values()
]


@pytest.mark.parametrize("number", range(len(CASES)))
def test_the_shards_build_equals_the_fronts_compile(number: int) -> None:
    text, schemas = CASES[number]
    front = compile_query(text, schemas, f"s{number}")
    wire = pb.Algebra.FromString(to_algebra(front.algebra).SerializeToString())
    shard = compile_algebra(wire, schemas, front.name)
    assert shard.automata == front.automata
    assert shard.output == front.output
    assert shard.reads == front.reads
