"""cesar against OpenCEP on compositebench's forms, K subscriptions differing in a constant.

OpenCEP (Kolchinsky and Schuster's Python CEP library, github.com/ilya-kolchinsky/OpenCEP) is
not a dependency: give a checkout with ``--opencep PATH`` (its modules are imported from
there).  Both get the same generated stream as ``perf/compositebench.py`` (one event per tick,
a tick a minute for OpenCEP's timestamps), and the same K patterns: the form of
:data:`cesar.perf.compositebench.FORMS` with ``[k]`` spelled as OpenCEP's ``EqCondition``
between every pair of components (negated ones included) and ``a.Price > c_i`` as a
``GreaterThanCondition``, within the window (a ``timedelta`` of as many minutes).  All K
patterns go into one ``CEP`` object (its multi-pattern support, default parameters, its
rules pushing an OR to the top and splitting it on).
Reported per form and K: each side's process CPU, their ratio, and the matches each found
beside the brute-force count.

    python -m cesar.perf.opencepcmp --opencep /path/to/OpenCEP --ks 10 100 --json out.json
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from cesar.automata.schema import Event, parse_stream_spec
from cesar.perf.compositebench import (
    FORMS,
    STREAMS,
    brute,
    constant,
    expected,
    measure,
    stream,
    text,
)
from cesar.perf.report import machine, now, print_report

SHAPES = {
    "seq": ("SEQ", [("A", "a"), ("B", "b"), ("C", "c")]),
    "or": ("SEQ", [("A", "a"), ("OR", [("SEQ", [("B", "b"), ("C", "c")]), ("D", "d")])]),
    "and_seq": ("AND", [("SEQ", [("A", "a"), ("B", "b")]), ("SEQ", [("C", "c"), ("D", "d")])]),
    "and_seq_not": ("AND", [("SEQ", [("A", "a"), ("!C", "c"), ("B", "b")]), ("D", "d")]),
    "and_not": ("AND", [("A", "a"), ("B", "b"), ("!C", "c")]),
}
"""Each form of compositebench as OpenCEP's operators: (operator, parts); a part is a nested
(operator, parts) or (type, variable), a type ``!X`` negated."""
START = datetime(2020, 1, 1)


class OpenCep:
    """OpenCEP's classes, imported from a checkout."""

    def __init__(self, path: Path) -> None:
        sys.path.insert(0, str(path))
        for name in ("Callable", "Iterable", "Mapping", "MutableMapping", "Sequence"):
            # OpenCEP was written for Python before 3.10, which took these out of collections
            if not hasattr(collections, name):
                setattr(collections, name, getattr(collections.abc, name))

        def get(module: str, name: str) -> Any:
            return getattr(importlib.import_module(module), name)

        self.CEP = get("CEP", "CEP")
        self.Pattern = get("base.Pattern", "Pattern")
        structure = "base.PatternStructure"
        self.ops = {
            "SEQ": get(structure, "SeqOperator"),
            "AND": get(structure, "AndOperator"),
            "OR": get(structure, "OrOperator"),
        }
        self.Primitive = get(structure, "PrimitiveEventStructure")
        self.Negation = get(structure, "NegationOperator")
        self.Variable = get("condition.Condition", "Variable")
        self.And = get("condition.CompositeCondition", "AndCondition")
        self.Eq = get("condition.BaseRelationCondition", "EqCondition")
        self.Greater = get("condition.BaseRelationCondition", "GreaterThanCondition")
        self.Stream = get("stream.Stream", "Stream")
        self.Formatter = get("base.DataFormatter", "DataFormatter")
        rules = get("transformation.PatternTransformationRules", "PatternTransformationRules")
        self.preprocessing = get(
            "transformation.PatternPreprocessingParameters", "PatternPreprocessingParameters"
        )([rules.TOPMOST_OR_PATTERN, rules.INNER_OR_PATTERN])
        """An OR nested in a SEQ pushed to the top and split into patterns (off by default:
        OpenCEP's tree plans take no OR inside a SEQ)."""
        self.Classifier = get("base.DataFormatter", "EventTypeClassifier")

    def structure(self, node: tuple[str, Any], names: list[str]) -> Any:
        """OpenCEP's structure for ``node``; every variable's name goes into ``names``."""
        head, rest = node
        if head in self.ops:
            return self.ops[head](*(self.structure(part, names) for part in rest))
        names.append(rest)
        if head.startswith("!"):
            return self.Negation(self.Primitive(head[1:], rest))
        return self.Primitive(head, rest)

    def pattern(self, form: str, c: float, window: int) -> Any:
        """Pattern ``form`` with its constant ``c``."""
        names: list[str] = []
        structure = self.structure(SHAPES[form], names)
        key: Callable[[dict[str, Any]], Any] = lambda x: x["k"]  # noqa: E731
        price: Callable[[dict[str, Any]], Any] = lambda x: x["Price"]  # noqa: E731
        conditions = [
            self.Eq(self.Variable(names[0], key), self.Variable(other, key))
            for other in dict.fromkeys(names[1:])
            if other != names[0]
        ]
        conditions.append(self.Greater(self.Variable("a", price), c))
        return self.Pattern(structure, self.And(*conditions), timedelta(minutes=window))

    def run(self, patterns: Sequence[Any], events: Sequence[Event]) -> tuple[float, int]:
        """Process CPU seconds and matches of one CEP object for ``patterns`` over ``events``."""
        formatter = _formatter(self)
        cep = self.CEP(list(patterns), pattern_preprocessing_params=self.preprocessing)
        source, sink = self.Stream(), self.Stream()
        for e in events:
            source.add_item({"type": e.stream, "ts": START + timedelta(minutes=e.t1), **e.attrs()})
        source.close()
        clock = time.process_time()
        cep.run(source, sink, formatter)
        seconds = time.process_time() - clock
        return seconds, sum(1 for _ in sink)  # the sink ends where OpenCEP closed it


def _formatter(lib: OpenCep) -> Any:
    """A DataFormatter for events given as dicts (``type``, ``ts``, attributes)."""

    class Classifier(lib.Classifier):  # type: ignore[name-defined, misc]
        def get_event_type(self, payload: dict[str, Any]) -> str:
            return str(payload["type"])

    class Formatter(lib.Formatter):  # type: ignore[name-defined, misc]
        def __init__(self) -> None:
            super().__init__(Classifier())

        def parse_event(self, raw: dict[str, Any]) -> dict[str, Any]:
            return raw

        def get_event_timestamp(self, payload: dict[str, Any]) -> datetime:
            value = payload["ts"]
            assert isinstance(value, datetime)
            return value

    return Formatter()


def run(
    lib: OpenCep, forms: Sequence[str], ks: Sequence[int], events: int, window: int, seed: int
) -> dict[str, Any]:
    """Every form at every K on both engines; the report."""
    schemas = {s: parse_stream_spec(s + "(k:int,Price:float)") for s in STREAMS}
    data = stream(events, 5, seed)
    report: dict[str, Any] = {
        "benchmark": "opencepcmp",
        "machine": machine(),
        "date": now(),
        "events": events,
        "window": window,
        "forms": {},
    }
    for form in forms:
        per_a = brute(form, data, window)
        rows: dict[str, Any] = {}
        for k in ks:
            constants = [constant(i, k) for i in range(k)]
            texts = [text(FORMS[form], c, window, f"P{i}") for i, c in enumerate(constants)]
            ours = measure(texts, data, schemas)
            seconds, matches = lib.run([lib.pattern(form, c, window) for c in constants], data)
            rows[str(k)] = {
                "brute_force": expected(per_a, data, constants),
                "cesar_alerts": ours["alerts"],
                "cesar_seconds": ours["seconds"],
                "opencep_matches": matches,
                "opencep_seconds": round(seconds, 3),
                "cesar_vs_opencep": round(seconds / max(ours["seconds"], 1e-9), 1),
            }
            print(f"{form:>12} K={k:<5} {rows[str(k)]}", file=sys.stderr)
        report["forms"][form] = rows
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opencep", type=Path, required=True, help="a checkout of OpenCEP")
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=list(FORMS))
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--window", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    lib = OpenCep(args.opencep)
    print_report(run(lib, args.forms, args.ks, args.events, args.window, args.seed), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
