import pytest

from cesar.automata.arithmetic import ArithmeticFault, arith
from cesar.automata.evaluate import Env, Faults, eval_term, holds
from cesar.automata.functions import DEFAULT_FUNCTIONS, Function
from cesar.automata.schema import AttrType
from cesar.automata.terms import Arith, Attr, Call, Cmp, Const, Dur, Neg, Not, Scope


def c(value):
    types = {bool: AttrType.BOOL, int: AttrType.INT, float: AttrType.FLOAT, str: AttrType.STRING}
    return Const(value, types[type(value)])


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [
        ("/", 7, 2, 3),
        ("/", -7, 2, -3),
        ("/", 7, -2, -3),
        ("%", -7, 2, -1),
        ("%", 7, -2, 1),
        ("/", 7.0, 2, 3.5),
        ("%", -7.5, 2, -1.5),
        ("^", 2, 10, 1024),
        ("^", 2, -1, 0),
        ("^", -1, -3, -1),
        ("^", 2.0, 0.5, 2**0.5),
        ("+", 1, 2.5, 3.5),
        ("*", 3, 4, 12),
    ],
)
def test_arithmetic_follows_cel(op, a, b, expected):
    result = arith(op, a, b)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("op", "a", "b"),
    [
        ("/", 1, 0),
        ("%", 1, 0),
        ("/", 1.0, 0.0),
        ("%", 1.0, 0),
        ("^", 0, -1),
        ("^", 2, 64),
        ("*", 2**62, 4),
        ("+", 2**63 - 1, 1),
        ("^", -8.0, 0.5),
        ("^", 10.0, 400.0),
    ],
)
def test_faults(op, a, b):
    with pytest.raises(ArithmeticFault):
        arith(op, a, b)


def test_fault_makes_atom_false_even_under_not_and_is_counted():
    env = Env({Scope.EVENT: {"x": 0}}, dur=1)
    atom = Cmp(">", Arith("/", c(1), Attr(Scope.EVENT, "x")), c(0))
    faults = Faults()
    assert not holds(atom, env, faults)
    assert not holds(Not(atom), env, faults)
    assert faults.arithmetic == 2


def test_negating_min_int_faults():
    env = Env({Scope.EVENT: {"x": -(2**63)}}, dur=1)
    with pytest.raises(ArithmeticFault):
        eval_term(Neg(Attr(Scope.EVENT, "x")), env)


def test_dur_and_scopes():
    env = Env({Scope.LEFT: {"a": 1}, Scope.RIGHT: {"a": 2}}, dur=9)
    assert eval_term(Dur(), env) == 9
    assert eval_term(Arith("-", Attr(Scope.RIGHT, "a"), Attr(Scope.LEFT, "a")), env) == 1


def test_builtin_functions():
    env = Env({}, 1)
    assert eval_term(Call("CONTAINS", (c("IBM Corp"), c("IBM"))), env) == 1
    assert eval_term(Call("contains", (c("IBM"), c("Dell"))), env) == 0
    assert eval_term(Call("SIMILARITY", (c("kitten"), c("sitting"))), env) == 1 - 3 / 7
    assert eval_term(Call("SIMILARITY", (c(""), c(""))), env) == 1.0


def test_registered_function_is_callable_without_touching_the_default():
    registry = DEFAULT_FUNCTIONS.with_function(
        Function("TWICE", (AttrType.FLOAT,), AttrType.FLOAT, lambda x: 2 * x)
    )
    assert eval_term(Call("TWICE", (c(1.5),)), Env({}, 1), registry) == 3.0
    assert DEFAULT_FUNCTIONS.get("TWICE") is None
