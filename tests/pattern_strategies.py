"""Hypothesis strategies for the pattern language: random pattern texts and their streams.

``compiled_patterns`` draws what the engine runs (docs/patterns.md, "What the
engine runs"): SEQ of singletons and Kleene closures of S, T or ANY(S, T)
under every strategy, equivalence tests, every aggregate, negation of any
stream between any two components or after the last, and windows.  Streams are
``S(k:string, v:int)`` and ``T(k:string, v:int)`` in abstract ticks, with
durations and simultaneous events (tests/strategies.py).  ``conjunctions`` draws
AND patterns: up to four components of S, T, ANY(S, T) or ANY(S, U), conditions
across them, equivalence tests and windows.
"""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import dataclass

from hypothesis import reject
from hypothesis import strategies as st

from cesar.automata.errors import CelSemanticError
from cesar.automata.normal import DnfLimitError
from cesar.automata.pattern.construct import build_pattern_automata
from cesar.automata.pattern.join import MAX_COMPONENTS
from cesar.automata.pattern.nesting import alternatives
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.engine import Engine
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from tests.strategies import streams

SCHEMAS = {
    s.name: s
    for s in map(parse_stream_spec, ["S(k:string,v:int)", "T(k:string,v:int)", "U(k:string)"])
}
STRATEGIES = [
    "skip_till_any_match",
    "skip_till_next_match",
    "partition_contiguity",
    "strict_contiguity",
]


@dataclass
class _Step:
    var: str
    stream: str
    kleene: bool


def _value(draw: st.DrawFn, steps: list[_Step], var: str) -> str:
    """A term of an earlier step (or a constant) to compare with ``var``'s ``v``."""
    choices = ["const"]
    if steps:
        choices += ["earlier"]
    kind = draw(st.sampled_from(choices))
    if kind == "const":
        return str(draw(st.integers(0, 4)))
    step = draw(st.sampled_from(steps))
    if not step.kleene:
        return f"{step.var}.v"
    return draw(
        st.sampled_from(
            [
                f"{step.var}[1].v",
                f"{step.var}[{step.var}.LEN].v",
                f"avg({step.var}[].v)",
                f"sum({step.var}[].v)",
                f"{step.var}.LEN",
                f"count({step.var}[].v)",
                f"max({step.var}[].v)",
            ]
        )
    )


def _atoms(draw: st.DrawFn, atoms: list[str]) -> list[str]:
    return draw(st.lists(st.sampled_from(atoms), max_size=2, unique=True)) if atoms else []


@st.composite
def compiled_patterns(
    draw: st.DrawFn, name: str = "P", strategies: tuple[str, ...] = (), windowed: bool = False
) -> str:
    """A random pattern the engine runs, as text; ``strategies`` limits the strategy and
    ``windowed`` draws a window always and no negation after the last component (what
    the lazy plans run)."""
    strategy = draw(st.sampled_from(strategies or STRATEGIES))
    count = draw(st.integers(1, 3))
    steps: list[_Step] = []
    components: list[str] = []
    conditions: list[str] = []
    for n in range(count):
        var = "abc"[n]
        kleene = draw(st.integers(0, 9)) < 3
        streams = ["S", "S", "S", "T", "ANY(S, T)", "ANY(S, U)"]
        stream = draw(st.sampled_from(streams))
        if n and draw(st.booleans()):
            neg = f"n{n}"
            negated_stream = draw(st.sampled_from(["S", "T", "ANY(S, T)", "ANY(T, U)"]))
            components.append(f"!({negated_stream} {neg})")
            negated = [
                f"{neg}.v = {_value(draw, steps, neg)}",
                f"{neg}.v > {draw(st.integers(0, 4))}",
            ]
            conditions += _atoms(draw, negated)
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]))
        if kleene:
            components.append(f"{stream}+ {var}[]")
            conditions += _atoms(draw, [f"{var}[1].v {op} {_value(draw, steps, var)}"])
            take = [
                f"{var}[i].v > {var}[i-1].v",
                f"{var}[i].v >= avg({var}[..i-1].v)",
                f"{var}[i].v {op} {draw(st.integers(0, 4))}",
                f"{var}[i].v != {var}[1].v",
                f"sum({var}[..i-1].v) < {draw(st.integers(0, 8))}",
                f"{var}[i].v > max({var}[..i-1].v)",
                f"{var}[i].v >= min({var}[..i-1].v)",
            ]
            conditions += _atoms(draw, take)[:1]
            close = [
                f"{var}.LEN >= {draw(st.integers(1, 3))}",
                f"count({var}[].v) <= {draw(st.integers(1, 3))}",
                f"{var}[{var}.LEN].v > {draw(st.integers(0, 4))}",
                f"min({var}[].v) >= {draw(st.integers(0, 3))}",
                f"max({var}[].k) = 'b'",
            ]
            conditions += _atoms(draw, close)[:1]
        else:
            components.append(f"{stream} {var}")
            atoms = [f"{var}.v {op} {_value(draw, steps, var)}", f"{var}.k = 'a'"]
            conditions += _atoms(draw, atoms)
        steps.append(_Step(var, stream, kleene))
    window = draw(st.integers(0, 6) if windowed else st.none() | st.integers(0, 6))
    if window is not None and not windowed and draw(st.integers(0, 3)) == 0:
        components.append(f"!({draw(st.sampled_from(['S', 'T', 'ANY(S, T)', 'ANY(U, T)']))} z)")
        conditions += _atoms(draw, [f"z.v = {_value(draw, steps, 'z')}", "z.k = 'b'"])
    if window is not None:  # negations that look back: before the first, or naming a later one
        if draw(st.integers(0, 3)) == 0:
            components.insert(0, f"!({draw(st.sampled_from(['S', 'T', 'ANY(S, U)']))} y)")
            conditions += _atoms(draw, [f"y.v = {_value(draw, steps, 'y')}", "y.k = 'a'"])
        negated = [c.split()[-1].rstrip(")") for c in components if c.startswith("!(")]
        later = [n for n in negated if n.startswith("n")]
        if later and draw(st.booleans()):
            conditions.append(f"{draw(st.sampled_from(later))}.v > {_value(draw, steps[-1:], 'x')}")
    if draw(st.booleans()):
        conditions.append("[k]")
    where = " AND ".join(conditions)
    variables = ", ".join(f"{s.var}[]" if s.kleene else s.var for s in steps)
    text = f"PATTERN SEQ({', '.join(components)}) WHERE {strategy}({variables}) {{ {where} }}"
    if window is not None:
        text += f" WITHIN {window}"
    return f"{text} PUBLISH {name}"


@st.composite
def pattern_streams(draw: st.DrawFn) -> dict[str, list[Event]]:
    """Events of S and T with durations and simultaneous events, and a last epoch of both
    (at 20, after every window): every match waiting out a trailing negation is known."""
    out = {"S": draw(streams("S", max_events=10)), "T": draw(streams("T", max_events=5))}
    for name in out:
        out[name].append(Event.of(name, 20, 20, {"k": "b", "v": 9}))
    out["U"] = [
        Event.of("U", t, t, {"k": k})
        for t, k in draw(st.lists(st.tuples(st.integers(0, 8), st.sampled_from("ab")), max_size=4))
    ]
    out["U"].sort(key=lambda e: e.t1)
    return out


@st.composite
def negated_patterns(draw: st.DrawFn, name: str = "P") -> str:
    """SEQ(X a, !(Y n), Z b), SEQ(X a, Z b, !(Y n)) or SEQ(!(Y n), X a, Z b) with a window,
    with random streams, strategy and conditions (some naming a later component)."""
    strategy = draw(st.sampled_from(STRATEGIES))
    x, y, z = (draw(st.sampled_from(["S", "T", "ANY(S, T)", "ANY(S, U)"])) for _ in range(3))
    shape = draw(st.sampled_from(["between", "after", "before"]))
    if shape == "before":
        window = draw(st.integers(0, 6))
        single = draw(st.booleans())
        condition = draw(
            st.sampled_from(
                ["n.v = a.v", "n.k = a.k", "n.v < 2", "TRUE"] + ["n.v > b.v"] * (1 - single)
            )
        )
        rest = f"{x} a" if single else f"{x} a, {z} b"
        variables = "a" if single else "a, b"
        return (
            f"PATTERN SEQ(!({y} n), {rest}) WHERE {strategy}({variables}) {{ {condition} }} "
            f"WITHIN {window} PUBLISH {name}"
        )
    if shape == "after":
        window = draw(st.integers(0, 6))
        return (
            f"PATTERN SEQ({x} a, {z} b, !({y} n)) WHERE {strategy}(a, b) "
            f"{{ n.k = a.k AND {draw(st.sampled_from(['n.v > b.v', 'n.v = 1', 'TRUE']))} }} "
            f"WITHIN {window} PUBLISH {name}"
        )
    window = draw(st.none() | st.integers(1, 6))
    later = [] if window is None else ["n.v = b.v", "n.v > b.v AND n.k = a.k", "n.k != b.k"]
    conditions = [
        draw(st.sampled_from(["n.v = a.v", "n.v > a.v", "n.k = a.k", "n.v < 2", "TRUE", *later])),
        draw(st.sampled_from(["b.v >= a.v", "b.k != a.k", "b.v > 1", "TRUE"])),
    ]
    if draw(st.booleans()):
        conditions.append("[k]")
    text = (
        f"PATTERN SEQ({x} a, !({y} n), {z} b) WHERE {strategy}(a, b) "
        f"{{ {' AND '.join(conditions)} }}"
    )
    return text + ("" if window is None else f" WITHIN {window}") + f" PUBLISH {name}"


@st.composite
def conjunctions(draw: st.DrawFn, name: str = "P", windowed: bool = False) -> str:
    """A random AND pattern, as text: up to three components, four with a window
    (``windowed``: always), and with a window sometimes a negation anywhere among them."""
    window = draw(st.integers(0, 6) if windowed else st.none() | st.integers(0, 6))
    count = draw(st.integers(1, 3 if window is None else 4))
    variables = "abcd"[:count]
    streams = [draw(st.sampled_from(["S", "S", "T", "ANY(S, T)", "ANY(S, U)"])) for _ in variables]
    conditions = []
    for n, var in enumerate(variables):
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]))
        atoms = [f"{var}.v {op} {draw(st.integers(0, 4))}", f"{var}.k = 'a'"]
        if n:
            other = draw(st.sampled_from(variables[:n]))
            atoms += [f"{var}.v {op} {other}.v", f"{other}.v + {var}.v > 3"]
            atoms.append(f"{var}.k != {other}.k")
        conditions += _atoms(draw, atoms)
    if count > 1 and draw(st.integers(0, 3)) == 0:
        conditions.append("[k]")
    pairs = zip(streams, variables, strict=True)
    parts = [f"{stream} {var}" for stream, var in pairs]
    if window is not None and count > 1 and draw(st.integers(0, 2)) == 0:
        negated = draw(st.sampled_from(["S", "T", "ANY(S, T)", "ANY(T, U)"]))
        parts.insert(draw(st.integers(0, count)), f"!({negated} n)")
        other = draw(st.sampled_from(variables))
        conditions += _atoms(
            draw, ["n.v > 2", f"n.v = {other}.v", f"n.k = {other}.k", "n.k = 'a'", "n.v < 3"]
        )
    text = f"PATTERN AND({', '.join(parts)})"
    if conditions:
        where = " AND ".join(conditions)
        text += f" WHERE skip_till_any_match({', '.join(variables)}) {{ {where} }}"
    if window is not None:
        text += f" WITHIN {window}"
    return f"{text} PUBLISH {name}"


def automata_of(pattern):
    """The pattern's automata; an example whose automaton exceeds the DNF limit is rejected:
    the server refuses such a pattern (INVALID_ARGUMENT naming the limit), so it has no fast
    path to compare (a closure over ANY with conditions can draw 576 conjuncts)."""
    try:
        return build_pattern_automata(pattern, SCHEMAS)
    except DnfLimitError:
        reject()


@st.composite
def skipping_patterns(draw: st.DrawFn, name: str = "P") -> str:
    """A random SEQ pattern with an after-match policy, as text: one of
    :func:`compiled_patterns` with a window, or of :func:`negated_patterns` with one, under a
    random ``AFTER MATCH SKIP`` (a variable that is not the match's own first event)."""
    text = draw(compiled_patterns(name, windowed=True) | negated_patterns(name))
    if " WITHIN " not in text:
        text = text.replace(" PUBLISH ", f" WITHIN {draw(st.integers(0, 6))} PUBLISH ")
    components = [c for c in parse_pattern(text).components if not c.negated]
    policies = ["PAST LAST ROW", "TO NEXT ROW", "PAST LAST EVENT"]
    for n, component in enumerate(components):
        if n:
            policies.append(f"TO FIRST {component.var}")
        if n or component.kleene:
            policies.append(f"TO LAST {component.var}")
    clause = f" AFTER MATCH SKIP {draw(st.sampled_from(policies))}"
    return text.replace(" PUBLISH ", f"{clause} PUBLISH ")


def through_a_restart(builds, parts, cut):
    """(steady, restarted): the alerts after epoch ``cut`` of ``parts`` from an engine that
    never stopped and from one captured there, its subscriptions ``q0 …`` built again
    (``builds``: number → automata; a subscription's automata are built afresh, as a server
    compiles its texts again), and restored.  Both engines pass check_valid."""
    names = [f"q{number}" for number in range(len(builds))]
    steady, stopped = Engine(), Engine()
    for name, build in zip(names, builds, strict=True):
        steady.subscribe(name, build())
        stopped.subscribe(name, build())
    for epoch in parts[:cut]:
        steady.process(epoch)
        stopped.process(epoch)
    saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(stopped).to_data())))
    restarted = Engine()
    prepare(restarted, saved)
    for name, build in zip(names, builds, strict=True):
        restarted.subscribe(name, build(), since=saved.since[name])
    restore(restarted, saved)
    restarted.check_valid()
    expected, got = Counter(), Counter()
    for epoch in parts[cut:]:
        expected.update(steady.process(epoch))
        got.update(restarted.process(epoch))
    return expected, got


WINDOW_FUNCTIONS = [
    f"{aggregate}_{kind}"
    for aggregate in ("AVG", "SUM", "MIN", "MAX")
    for kind in ("OVER", "TUMBLING")
]


@st.composite
def window_terms(draw: st.DrawFn, event: str, attr: str = "v", key: str = "k") -> str:
    """A random time-window aggregate of ``event``'s stream (``event`` prefixes the
    attributes: ``b.``, ``a[i].``, ``$1.`` or nothing), keyed or not."""
    ticks = draw(st.integers(1, 6))
    keys = f", {event}{key}" if draw(st.booleans()) else ""
    if draw(st.integers(0, 4)) == 0:
        count = draw(st.sampled_from(["COUNT_OVER", "COUNT_TUMBLING"]))
        length = f"{ticks}{_offset(draw, count, ticks)}"
        return f"{count}({length}{keys})" if keys else f"{count}({length}, {event}{key})"
    function = draw(st.sampled_from(WINDOW_FUNCTIONS))
    return f"{function}({event}{attr}, {ticks}{_offset(draw, function, ticks)}{keys})"


def _offset(draw: st.DrawFn, function: str, ticks: int) -> str:
    """A tumbling window's offset argument, maybe (``, 2``): buckets start there."""
    if not function.endswith("_TUMBLING") or not draw(st.booleans()):
        return ""
    return f", {draw(st.integers(0, ticks - 1))}"


@st.composite
def window_patterns(draw: st.DrawFn, name: str = "P") -> str:
    """One of :func:`compiled_patterns` with a condition on a time-window aggregate of one of
    its events, and maybe a RETURN of one."""
    text = draw(compiled_patterns(name))
    components = [c for c in parse_pattern(text).components if not c.negated]
    chosen = draw(st.sampled_from(components))
    event = f"{chosen.var}[i]." if chosen.kleene else f"{chosen.var}."
    if chosen.kleene and draw(st.booleans()):
        event = f"{chosen.var}[1]."
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]))
    other = draw(st.sampled_from([f"{event}v", str(draw(st.integers(0, 4)))]))
    condition = f"{other} {op} {draw(window_terms(event))}"
    head, tail = text.rsplit(" }", 1)
    joint = " " if head.endswith("{ ") else " AND "
    return f"{head.rstrip()}{joint}{condition} }}{tail}"


@st.composite
def window_queries(draw: st.DrawFn) -> str:
    """A random CEL query over S reading a time-window aggregate."""
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "="]))
    shape = draw(st.integers(0, 2))
    if shape == 0:
        return f"FILTER{{v {op} {draw(window_terms(''))}}} S PUBLISH W"
    if shape == 1:
        side = draw(st.sampled_from(["$1.", "$2."]))
        return f"S NEXT{{$1.k = $2.k AND $2.v {op} {draw(window_terms(side))}}} S PUBLISH W"
    return f"SELECT k, v, {draw(window_terms(''))} AS m FROM S PUBLISH W"


@st.composite
def nested_patterns(draw: st.DrawFn, name: str = "P", shape: str = "flat") -> str:
    """A random pattern with OR and nested groups that the engine runs, as text.

    ``shape="ordered"`` draws SEQ and AND nested in one another instead (OpenCEP's
    ``AND(SEQ(a, b), SEQ(c, d))``; :mod:`cesar.automata.pattern.poset`), with negations
    between a SEQ's parts or in an AND, naming a component too.  Otherwise (``"flat"``):

    SEQ nests SEQ and OR; OR holds components, SEQs and ANDs; an AND holds components,
    ORs of them and a negation (every alternative is then flat: a SEQ or an AND of
    components).
    Components of S, T or ANY(S, T) and ANY(S, U), Kleene closures in a SEQ, negations
    between a SEQ's parts or at its ends, a variable in two alternatives of an OR
    (``OR(SEQ(S a, T b), SEQ(T b, S a))``), conditions on one or two variables (kept if
    some alternative binds them together), and windows (always, with a closure or a
    negation).
    """
    names = iter(f"{c}{n}" for n in range(9) for c in "abcdefgh")
    negations = iter(f"n{n}" for n in range(20))
    streams = ["S", "S", "T", "ANY(S, T)", "ANY(S, U)"]
    positive: list[tuple[str, bool]] = []
    negated: list[str] = []
    closures = [False]

    def component(kleene_ok: bool) -> str:
        var = next(names)
        kleene = kleene_ok and draw(st.integers(0, 9)) < 2
        closures[0] = closures[0] or kleene
        positive.append((var, kleene))
        stream = draw(st.sampled_from(streams))
        return f"{stream}+ {var}[]" if kleene else f"{stream} {var}"

    def conj(depth: int) -> str:
        parts = []
        for _ in range(draw(st.integers(2, 3))):
            if depth and draw(st.integers(0, 3)) == 0:
                parts.append(f"OR({component(False)}, {component(False)})")
            else:
                parts.append(component(False))
        if draw(st.integers(0, 3)) == 0:
            var = next(negations)
            negated.append(var)
            parts.insert(
                draw(st.integers(0, len(parts))), f"!({draw(st.sampled_from(streams))} {var})"
            )
        return f"AND({', '.join(parts)})"

    def seq(depth: int) -> str:
        parts: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["c", "c", "c", "neg", "seq", "or"] if depth else ["c"]))
            if kind == "neg":
                var = next(negations)
                negated.append(var)
                parts.append(f"!({draw(st.sampled_from(['S', 'T', 'ANY(S, T)']))} {var})")
                kind = "c"
            if kind == "seq":
                parts.append(seq(depth - 1))
            elif kind == "or":
                parts.append(disj(depth - 1, seq_only=True))
            else:
                parts.append(component(True))
        return f"SEQ({', '.join(parts)})"

    def disj(depth: int, seq_only: bool = False) -> str:
        if draw(st.integers(0, 4)) == 0:
            a, b = next(names), next(names)
            positive.extend([(a, False), (b, False)])
            x, y = draw(st.sampled_from(streams)), draw(st.sampled_from(streams))
            return f"OR(SEQ({x} {a}, {y} {b}), SEQ({y} {b}, {x} {a}))"
        kinds = ["c", "seq"] + ([] if seq_only else ["and"])
        parts = []
        for _ in range(draw(st.integers(2, 3))):
            kind = draw(st.sampled_from(kinds if depth else ["c"]))
            if kind == "seq":
                parts.append(seq(depth - 1))
            elif kind == "and":
                parts.append(conj(depth - 1))
            else:
                parts.append(component(True))
        return f"OR({', '.join(parts)})"

    def ordered(depth: int, operator: str) -> str:
        """SEQ and AND nested in one another, a negation between a SEQ's parts or in an AND."""
        parts = []
        for _ in range(draw(st.integers(2, 3))):
            inner = "AND" if operator == "SEQ" else "SEQ"
            nest = depth and draw(st.integers(0, 2)) == 0
            parts.append(ordered(depth - 1, inner) if nest else component(False))
        if draw(st.integers(0, 2)) == 0:
            var = next(negations)
            negated.append(var)
            low = 1 if operator == "SEQ" else 0
            where = draw(st.integers(low, len(parts) - low))
            parts.insert(where, f"!({draw(st.sampled_from(streams))} {var})")
        return f"{operator}({', '.join(parts)})"

    if shape == "ordered":
        operator = draw(st.sampled_from(["SEQ", "AND"]))
        inner = "AND" if operator == "SEQ" else "SEQ"
        structure = f"{operator}({ordered(1, inner)}, {component(False)})"
        if len(positive) > MAX_COMPONENTS:
            reject()  # the engine refuses it, naming the limit (a join's node per set)
    else:
        structure = seq(2) if draw(st.booleans()) else disj(2)
    conditions = []
    for var, kleene in positive:
        one = f"{var}[1]" if kleene else var
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!="]))
        atoms = [f"{one}.v {op} {draw(st.integers(0, 4))}", f"{one}.k = 'a'"]
        others = [v for v, k in positive if v != var and not k]
        if others:
            atoms.append(f"{one}.v {op} {draw(st.sampled_from(others))}.v")
        if kleene:
            atoms += [f"{var}[i].v > {var}[i-1].v", f"{var}.LEN >= 2", f"sum({var}[].v) < 6"]
        conditions += _atoms(draw, atoms)
    for var in negated:
        atoms = [f"{var}.v > {draw(st.integers(0, 4))}", f"{var}.k = 'b'"]
        if shape == "ordered":
            other = draw(st.sampled_from([v for v, _ in positive]))
            atoms += [f"{var}.v = {other}.v", f"{var}.k != {other}.k"]
        conditions += _atoms(draw, atoms)
    if draw(st.integers(0, 4)) == 0:
        conditions.append("[k]")
    window = draw(st.none() | st.integers(0, 6))
    if window is None and (negated or closures[0]):
        window = draw(st.integers(0, 6))
    text = f"PATTERN {structure}"
    bound = _bound_together(text + f" PUBLISH {name}")
    kept = [c for c in conditions if any(_vars_of(c) <= names for names in bound)]
    if kept:
        text += f" WHERE {' AND '.join(kept)}"
    if window is not None:
        text += f" WITHIN {window}"
    return f"{text} PUBLISH {name}"


def _bound_together(text: str) -> list[set[str]]:
    """The variables each alternative of the pattern ``text`` binds (a draw the language
    refuses, as a negation alone in a SEQ of an AND, is rejected)."""
    pattern = parse_pattern(text)
    if pattern.nested is None:
        return [{c.var for c in pattern.components}]
    try:
        return [{c.var for c in alt.pattern.components} for alt in alternatives(pattern)]
    except CelSemanticError:
        reject()


def _vars_of(condition: str) -> set[str]:
    return {
        word.split(".")[0].split("[")[0].split("(")[-1] for word in condition.split() if "." in word
    }
