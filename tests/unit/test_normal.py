import pytest

from cesar.automata.normal import Canonical, DnfLimitError, canonical, dnf, dnf_size, split
from cesar.automata.schema import AttrType
from cesar.automata.terms import (
    FALSE,
    TRUE,
    And,
    Arith,
    Attr,
    Cmp,
    Const,
    Neg,
    Not,
    Or,
    Scope,
    to_cel,
)

x, y = Attr(Scope.EVENT, "x"), Attr(Scope.EVENT, "y")
r_price, l_price = Attr(Scope.RIGHT, "Price"), Attr(Scope.LEFT, "Price")


def i(v):
    return Const(v, AttrType.INT)


def test_constant_goes_right_and_operator_flips():
    assert canonical(Cmp("<", i(3), x)) == Cmp(">", x, i(3))
    assert canonical(Cmp(">=", i(3), x)) == Cmp("<=", x, i(3))


def test_commutative_operands_and_symmetric_comparisons_are_ordered():
    assert canonical(Cmp("=", Arith("+", y, x), i(1))) == canonical(
        Cmp("=", Arith("+", x, y), i(1))
    )
    assert canonical(Cmp("=", y, x)) == canonical(Cmp("=", x, y))
    assert canonical(Cmp("<", y, x)) == canonical(Cmp(">", x, y))


def test_constants_fold_but_faulting_ones_stay():
    assert canonical(Cmp(">", x, Arith("*", i(2), i(3)))) == Cmp(">", x, i(6))
    assert canonical(Cmp(">", x, Neg(i(2)))) == Cmp(">", x, i(-2))
    assert canonical(Cmp("<", i(1), i(2))) == TRUE
    faulting = Arith("/", i(1), i(0))
    kept = canonical(Cmp(">", x, faulting))
    assert isinstance(kept, Cmp) and faulting in (kept.left, kept.right)


def test_not_is_pushed_to_atoms():
    p = Not(And((Cmp("=", x, i(1)), Not(Cmp("<", y, i(2))))))
    assert to_cel(canonical(p)) == "x != 1 OR y < 2"


def test_and_or_flatten_dedupe_and_absorb_constants():
    a, b = Cmp("=", x, i(1)), Cmp("=", y, i(2))
    assert canonical(And((a, And((b, a)), TRUE))) == canonical(And((b, a)))
    assert canonical(And((a, FALSE))) == FALSE
    assert canonical(Or((a, TRUE))) == TRUE
    assert canonical(Or((a, a))) == a


def test_dnf_distributes_and_dedupes():
    a, b, c = Cmp("=", x, i(1)), Cmp("=", x, i(2)), Cmp(">", y, i(0))
    conjuncts = dnf(And((Or((a, b)), Or((c, a)))))
    texts = [to_cel(conj.pred()) for conj in conjuncts]
    assert texts == ["x = 1", "x = 1 AND x = 2", "x = 1 AND y > 0", "x = 2 AND y > 0"]
    assert dnf(FALSE) == ()
    assert [conj.atoms for conj in dnf(TRUE)] == [()]


def test_dnf_limit_is_enforced_before_expansion():
    pairs = [Or((Cmp("=", Attr(Scope.EVENT, f"a{k}"), i(0)), Cmp("=", x, i(k)))) for k in range(9)]
    big = And(tuple(pairs))
    assert dnf_size(big) == 512
    with pytest.raises(DnfLimitError, match=r"512 conjuncts.*limit of 256"):
        dnf(big)
    assert len(dnf(big, limit=512)) == 512


def test_split_separates_static_from_dynamic():
    p = And(
        (
            Cmp("=", Attr(Scope.RIGHT, "Name"), Const("IBM", AttrType.STRING)),
            Cmp(">", r_price, Arith("*", Const(1.05, AttrType.FLOAT), l_price)),
            Cmp("<", i(10), r_price),
            Cmp(">", Arith("+", r_price, i(1)), i(3)),
        )
    )
    (conj,) = dnf(p)
    static, dynamic = split(conj, Scope.RIGHT)
    assert [to_cel(a) for a in static.atoms] == ["$2.Name = 'IBM'", "$2.Price > 10"]
    assert [to_cel(a) for a in dynamic.atoms] == [
        "$1.Price * 1.05 < $2.Price",
        "$2.Price + 1 > 3",
    ]
    left_static, _ = split(conj, Scope.LEFT)
    assert left_static.atoms == ()


def test_a_compiles_memo_gives_equal_atoms_one_form_whatever_their_positions():
    """Atoms equal but for their source positions (one condition reaching two edges)
    share one canonical form: the second is a look-up, not a second printing."""
    price = Attr(Scope.EVENT, "Price")
    first = Cmp("<", Const(10, AttrType.INT, (1, 5)), Attr(Scope.EVENT, "Price", (1, 10)))
    again = Cmp("<", Const(10, AttrType.INT, (3, 1)), Attr(Scope.EVENT, "Price", (3, 6)))
    forms = Canonical()
    form = forms.pred(first)
    assert form == Cmp(">", price, Const(10, AttrType.INT))
    assert forms.pred(again) is form
    assert forms.pred(And((again, first))) is form
    assert Canonical().pred(again) is not form
