"""The function library (automata/functions.py): values, types, faults and errors, in CEL and in
patterns, on the reference evaluators and on every engine."""

import math
from collections import Counter

import pytest

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.evaluate import Faults
from cesar.automata.functions import DEFAULT_FUNCTIONS
from cesar.automata.schema import AttrType, Event, parse_stream_spec
from cesar.server.engine.workload import ENGINE_MODES, Workload

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)")
SCHEMAS = {"Stock": STOCK}


def call(name, *args):
    return DEFAULT_FUNCTIONS.get(name).impl(*args)


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("ABS", (-3,), 3),
        ("ABS", (-2.5,), 2.5),
        ("ROUND", (2.5,), 3.0),
        ("ROUND", (-2.5,), -3.0),
        ("ROUND", (2.345, 2), 2.35),
        ("ROUND", (1250, -2), 1300),
        ("ROUND", (7,), 7),
        ("FLOOR", (-1.5,), -2.0),
        ("CEIL", (-1.5,), -1.0),
        ("FLOOR", (4,), 4),
        ("SQRT", (16,), 4.0),
        ("LN", (math.e,), 1.0),
        ("LOG", (1000,), 3.0),
        ("EXP", (0,), 1.0),
        ("POW", (2, 10), 1024),
        ("POW", (4, 0.5), 2.0),
        ("LEAST", (3, 1, 2), 1),
        ("GREATEST", (3, 1.5), 3.0),
        ("LOWER", ("IbM",), "ibm"),
        ("UPPER", ("IbM",), "IBM"),
        ("LENGTH", ("IBM",), 3),
        ("STARTS_WITH", ("IBM", "IB"), 1),
        ("ENDS_WITH", ("IBM", "IB"), 0),
        ("CONTAINS", ("IBM", "B"), 1),
    ],
)
def test_each_function_gives_its_value_in_its_type(name, args, expected):
    result = call(name, *args)
    assert result == pytest.approx(expected) and type(result) is type(expected)


@pytest.mark.parametrize(
    ("name", "args"),
    [("SQRT", (-1.0,)), ("LN", (0,)), ("LOG", (-5,)), ("EXP", (1e6,)), ("ABS", (-(2**63),))],
)
def test_a_result_outside_the_domain_faults(name, args):
    with pytest.raises(ArithmeticFault):
        call(name, *args)


def test_result_types_follow_the_arguments():
    for text, want in [
        ("SELECT ROUND(Volume) AS r FROM Stock", AttrType.INT),
        ("SELECT ROUND(Price, 1) AS r FROM Stock", AttrType.FLOAT),
        ("SELECT LEAST(Volume, 3) AS r FROM Stock", AttrType.INT),
        ("SELECT LEAST(Volume, Price) AS r FROM Stock", AttrType.FLOAT),
        ("SELECT SQRT(Volume) AS r FROM Stock", AttrType.FLOAT),
        ("SELECT LOWER(Name) AS r FROM Stock", AttrType.STRING),
    ]:
        assert compile_query(text, SCHEMAS, "q").output.type_of("r") is want, text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "FILTER{SQRT(Name) > 1} Stock",
            "argument 1 of SQRT must be a number, not string Name (SQRT(number) -> float)",
        ),
        ("FILTER{LOWER(Price) = 'a'} Stock", "argument 1 of LOWER must be string"),
        ("FILTER{ROUND(Price, 1.5) > 1} Stock", "argument 2 of ROUND must be int"),
        ("FILTER{LEAST(Price) > 1} Stock", "LEAST takes 2 or more arguments, 1 given"),
        ("FILTER{ROUND(Price, 1, 2) > 1} Stock", "ROUND takes 1 to 2 arguments, 3 given"),
        ("FILTER{NOPE(Price) > 1} Stock", "unknown function NOPE"),
    ],
)
def test_errors_name_the_function_its_signature_and_the_argument_types(text, message):
    with pytest.raises(CelSemanticError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_query(text, SCHEMAS, "q")


def test_an_argument_error_points_at_the_argument():
    with pytest.raises(CelSemanticError) as caught:
        compile_query("FILTER{\n  ROUND(Price, Name) > 1} Stock", SCHEMAS, "q")
    assert (caught.value.line, caught.value.column) == (
        2,
        16,
    ) and "ROUND(number[, int]) -> number" in str(caught.value)


QUOTES = [
    Event.of("Stock", t, t, {"Name": name, "Price": price, "Volume": volume})
    for t, (name, price, volume) in enumerate(
        [("ibm", 99.5, 1000), ("IBM", 100.4, -4), ("msft", 12.0, 0), ("IBM", 103.49, 250)], 1
    )
]
QUERIES = [
    ("CEL", "SELECT Name, ROUND(Price) AS p FROM FILTER{UPPER(Name) = 'IBM'} Stock PUBLISH C"),
    ("CEL sqrt", "FILTER{SQRT(Volume) >= 10} Stock PUBLISH Root"),
    (
        "pattern",
        "PATTERN SEQ(Stock a, Stock b) WHERE LOWER(a.Name) = LOWER(b.Name) "
        "AND ABS(b.Price - a.Price) > 0.5 RETURN a.Name AS n, ROUND(b.Price - a.Price, 1) AS d "
        "PUBLISH Moves",
    ),
]


@pytest.mark.parametrize("engine", ["reference", "automaton", *ENGINE_MODES])
def test_every_engine_gives_the_reference_its_values(engine):
    faults = Faults()
    workload = Workload.build([STOCK], QUERIES)
    got = Counter(workload.run(QUOTES, faults, engine=engine))
    assert got == Counter(
        [
            Event.of("C", 1, 1, {"Name": "ibm", "p": 100.0}),
            Event.of("C", 2, 2, {"Name": "IBM", "p": 100.0}),
            Event.of("C", 4, 4, {"Name": "IBM", "p": 103.0}),
            Event.of("Root", 1, 1, {"Name": "ibm", "Price": 99.5, "Volume": 1000}),
            Event.of("Root", 4, 4, {"Name": "IBM", "Price": 103.49, "Volume": 250}),
            Event.of("Moves", 1, 2, {"n": "ibm", "d": 0.9}),
            Event.of("Moves", 1, 4, {"n": "ibm", "d": 4.0}),
            Event.of("Moves", 2, 4, {"n": "IBM", "d": 3.1}),
        ]
    )
    assert faults.arithmetic == 1  # SQRT(-4): the atom is false, and counted
