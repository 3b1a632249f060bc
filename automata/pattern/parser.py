"""Pattern text → syntax tree (SASE / SASE+ papers; docs/patterns.md, "Grammar").

The papers' examples parse as printed: ``EVENT`` or ``PATTERN``, ``!`` or
``∼`` for negation, ``∧ ∨ ¬ ≠ ≤ ≥`` beside ``AND OR NOT != <= >=``, strings in
``'…'`` or ``‘…’``, ``/* … */`` and ``--`` comments, ``80%`` as 0.8 before
``*``, and event types with hyphens (``SHELF-READING`` reads the stream
``SHELF_READING``: a stream name cannot hold ``-``).  A hand-written
tokenizer feeds a recursive-descent parser that builds the trees lark's LALR(1)
parser of ``pattern.lark`` builds (:mod:`~cesar.automata.pattern.descent`), and
lark's parser where it gives up; errors are lark's, as
:class:`~cesar.automata.errors.CelSyntaxError` with line, column, a caret
excerpt and what could have come next, as CEL's.

>>> p = parse_pattern("PATTERN SEQ(Stock+ a[], Stock b) "
...                   "WHERE [symbol] AND b.volume < 80% * a[a.LEN].volume")
>>> [c.var for c in p.components], [key for key, _ in p.refs]
(['a', 'b'], ['b.volume', 'a[a.LEN].volume'])
>>> parse_pattern("EVENT SEQ(A a) WITHIN soon")  # doctest: +ELLIPSIS
Traceback (most recent call last):
cesar.automata.errors.CelSyntaxError: line 1, column 23: unexpected name 'soon'; expected a dur...
  EVENT SEQ(A a) WITHIN soon
                        ^
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import NoReturn

import lark
from lark.lexer import Token

from cesar.automata.errors import CelSyntaxError
from cesar.automata.parser import (
    _UNIT_ALT,
    MAX_NESTING,
    PUNCT,
    ParseTree,
    TermBuilder,
    Vocabulary,
    lalr,
    literal_value,
    pos_of,
    rung,
    text_position,
)
from cesar.automata.pattern.ast import (
    AGGREGATES,
    Component,
    Equivalence,
    Group,
    Index,
    Pattern,
    Ref,
    ReturnItem,
    Strategy,
)
from cesar.automata.pattern.descent import descend
from cesar.automata.schema import AttrType
from cesar.automata.skipping import Skip, SkipKind
from cesar.automata.terms import Attr, Const, Neg, Pos, Pred, Scope, Term

KEYWORDS = {
    "PATTERN": "PATTERN",
    "EVENT": "PATTERN",
    "SEQ": "SEQ",
    "AND": "AND",
    "ANY": "ANY",
    "OR": "OR",
    "NOT": "NOT",
    "WHERE": "WHERE",
    "WITHIN": "WITHIN",
    "PLAN": "PLAN",
    "RETURN": "RETURN",
    "PUBLISH": "PUBLISH",
    "AS": "AS",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
}
"""The pattern language's reserved words (any case) and the token each gives."""
STRATEGIES = {strategy.value.upper(): strategy for strategy in Strategy}
_CLAUSE_ENDS = frozenset({"WHERE", "WITHIN", "AFTER_MATCH_SKIP", "PLAN", "RETURN", "PUBLISH"})
_TOKEN = re.compile(
    rf"""
    (?P<SPACE>\s+|--[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)
  | (?P<AFTER_MATCH_SKIP>(?i:AFTER)\s+(?i:MATCH)\s+(?i:SKIP)(?![A-Za-z0-9_]))
  | (?P<NAME>[A-Za-z_][A-Za-z0-9_]*+(?!-[A-Za-z_]))
  | (?P<HNAME>[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z_][A-Za-z0-9_]*)+)
  | (?P<DURATION>\d+(?:\.\d+)?[ \t]*(?i:{_UNIT_ALT})(?![A-Za-z0-9_]))
  | (?P<PERCENT_LIT>\d+(?:\.\d+)?%(?=\s*\*))
  | (?P<FLOAT>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<INT>\d+)
  | (?P<STRING>'(?:[^']|'')*'|‘[^’]*’)
  | (?P<CMP>!=|<=|>=|=|<|>|≠|≤|≥)
  | (?P<PUNCT>\.\.|[-+*/%^(){{}}\[\],.!~∼∧∨¬])
    """,
    re.VERBOSE,
)
_NAME = re.compile(r"(?P<NAME>[A-Za-z_][A-Za-z0-9_]*)")
"""A name without hyphens: after the pattern clause, ``a-b`` is a subtraction."""
_PUNCT = {
    **PUNCT,
    "[": "LBRACK",
    "]": "RBRACK",
    ".": "DOT",
    "..": "DOTDOT",
    "!": "BANG",
    "~": "BANG",
    "∼": "BANG",
    "∧": "AND",
    "∨": "OR",
    "¬": "NOT",
}
_ASCII_CMP = {"≠": "!=", "≤": "<=", "≥": ">="}
_TERM_START = frozenset(
    {"INT", "FLOAT", "PERCENT_LIT", "STRING", "TRUE", "FALSE", "NAME", "MINUS", "LPAR"}
)
_VOCABULARY = Vocabulary(
    {
        "NAME": "a name",
        "INT": "a number",
        "FLOAT": "a number",
        "PERCENT_LIT": "a percentage",
        "STRING": "a string",
        "DURATION": "a duration",
        "CMP": "a comparison operator",
        "STRATEGY": "a selection strategy",
        "AFTER_MATCH_SKIP": "AFTER MATCH SKIP",
        "$END": "end of query",
        **{name: f"'{char}'" for char, name in _PUNCT.items() if char.isascii()},
        "BANG": "'!'",
        **{token: token for token in KEYWORDS.values()},
    },
    frozenset({"NAME", "INT", "FLOAT", "PERCENT_LIT", "STRING", "DURATION", "CMP", "STRATEGY"}),
    _TERM_START,
)


class _Token(Token):
    """lark's :class:`~lark.lexer.Token`, made in one call: lark's constructor goes through a
    second (``_future_new``) to take a deprecated keyword, a tenth of tokenizing a pattern."""

    __slots__ = ()

    def __new__(cls, kind: str, value: str, start: int, line: int, column: int) -> _Token:
        token = str.__new__(cls, value)
        token.type, token.value, token.start_pos = kind, value, start
        token.line, token.column = line, column
        token.end_line = token.end_column = token.end_pos = None
        return token


def tokenize(text: str) -> Iterator[Token]:
    """The tokens of a pattern as lark Tokens with line and column; spaces and comments dropped.

    A hyphenated name is one name (an event type) only before the first
    WHERE / WITHIN / RETURN / PUBLISH; after it, ``a-b`` is a subtraction.
    Raises :class:`CelSyntaxError` on a character no token starts with, an
    unterminated string or comment, and brackets nested deeper than
    :data:`~cesar.automata.parser.MAX_NESTING`.  O(len(text)).
    """
    depth, in_structure = 0, True
    line, line_start = 1, 0  # the line at offset, and where it starts
    offset = 0
    matches = _TOKEN.finditer(text)
    while (match := next(matches, None)) is not None:
        start, kind = match.start(), match.lastgroup
        if start != offset or (kind == "PUNCT" and text.startswith("/*", start)):
            _refuse(text, offset)
        if kind == "HNAME" and not in_structure:  # a-b after the pattern clause: a, -, b
            match = _NAME.match(text, start)
            assert match is not None
            kind = "NAME"
            matches = _TOKEN.finditer(text, match.end())
        value, offset = match.group(), match.end()
        token_line, column = line, start - line_start + 1
        if "\n" in value:
            line += value.count("\n")
            line_start = start + value.rfind("\n") + 1
        if kind == "SPACE":
            continue
        if kind == "PUNCT":
            kind = _PUNCT[value]
        elif kind == "HNAME":
            kind = "NAME"
        elif kind == "CMP":
            value = _ASCII_CMP.get(value, value)
        elif kind == "AFTER_MATCH_SKIP":
            in_structure = False
        elif kind == "NAME":
            upper = value.upper()
            if upper in KEYWORDS:
                kind = KEYWORDS[upper]
                in_structure = in_structure and kind not in _CLAUSE_ENDS
            elif upper in STRATEGIES:
                kind = "STRATEGY"
        if kind in ("LPAR", "LBRACE", "LBRACK"):
            depth += 1
            if depth > MAX_NESTING:
                raise CelSyntaxError(
                    f"brackets nest deeper than {MAX_NESTING} levels",
                    (token_line, column),
                    source=text,
                )
        elif kind in ("RPAR", "RBRACE", "RBRACK"):
            depth -= 1
        assert kind is not None
        yield _Token(kind, value, start, token_line, column)
    if offset != len(text):
        _refuse(text, offset)


def _refuse(text: str, offset: int) -> NoReturn:
    """The error at ``offset``, where no token starts: an unterminated comment or string, or a
    character no token starts with."""
    pos = text_position(text, offset)
    if text.startswith("/*", offset):
        raise CelSyntaxError("unterminated comment", pos, source=text)
    if text[offset] in "'‘":
        raise CelSyntaxError("unterminated string", pos, source=text)
    raise CelSyntaxError(f"unexpected character {text[offset]!r}", pos, source=text)


@cache
def _parser() -> lark.Lark:
    return lalr(__package__, "pattern.lark", tokenize)


def is_pattern(text: str) -> bool:
    """True if ``text`` is written in the pattern language: its first word is PATTERN or EVENT.

    >>> is_pattern("-- shoplifting\\nEVENT SEQ(Shelf a, Exit c)"), is_pattern("FILTER{x > 1} S")
    (True, False)
    """
    for token in _TOKEN.finditer(text):
        if token.lastgroup != "SPACE":
            return token.group().upper() in ("PATTERN", "EVENT")
    return False


def parse_pattern(text: str) -> Pattern:
    """Parse one pattern query; raises :class:`CelSyntaxError`."""
    try:
        return _Builder().pattern(_tree(text).children[0])
    except RecursionError:
        raise CelSyntaxError("the query nests too deeply", (1, 1), source=text) from None
    except CelSyntaxError as exc:
        raise exc.with_source(text) from None


def _tree(text: str) -> ParseTree:
    """lark's parse tree of ``text``: by recursive descent (:mod:`.descent`) where it can, by
    lark itself where it gives up, so every error is lark's, with what was expected."""
    try:
        tree = descend(list(tokenize(text)))
    except CelSyntaxError:  # lark meets the same token, unless its parse fails before
        tree = None
    if tree is not None:
        return tree
    try:
        return _parser().parse(text)
    except lark.exceptions.UnexpectedToken as exc:
        raise _VOCABULARY.error(exc, text) from None


class _Builder(TermBuilder):
    """Turns lark's parse tree of a pattern into :class:`Pattern`, collecting the references."""

    def __init__(self) -> None:
        self.refs: dict[str, Ref] = {}
        self.equivalences: list[Equivalence] = []
        self.lone: str | None = None
        self.guarded = 0
        """Above 0 while building under OR, NOT or in RETURN: no equivalence test there."""

    def pattern(self, tree: ParseTree) -> Pattern:
        operator, components, nested = self.structure(tree.children[1])
        positive = [c for c in components if not c.negated]
        if len(components) == 1 and positive:
            self.lone = positive[0].var
        clauses = {child.data: child for child in tree.children[2:]}
        strategy, given, where = Strategy.ANY, False, None
        if "where" in clauses:
            strategy, given, where = self.where(clauses["where"], components)
        window: Term | None = None
        for kind in ("duration_window", "int_window"):
            if kind in clauses:
                window = self.term(lark.Tree(kind.split("_")[0], [clauses[kind].children[1]]))
        returns = None
        if "returns" in clauses:
            returns = tuple(
                self.return_item(item)
                for item in clauses["returns"].children
                if isinstance(item, lark.Tree)
            )
        publish = str(clauses["publish"].children[1]) if "publish" in clauses else None
        skip = self.skip(clauses["skip"]) if "skip" in clauses else None
        plan = None
        if "plan" in clauses:
            names = [str(t) for t in clauses["plan"].children if t.type == "NAME"]
            plan = names[0] + (f"({', '.join(names[1:])})" if len(names) > 1 else "")
        return Pattern(
            operator,
            components,
            strategy,
            given,
            tuple(self.equivalences),
            where,
            tuple(self.refs.items()),
            window,
            returns,
            publish,
            plan,
            pos_of(tree),
            skip,
            nested,
        )

    def skip(self, tree: ParseTree) -> Skip:
        """``AFTER MATCH SKIP`` and its strategy, spelled as Flink SQL spells it (``ROW`` or
        ``EVENT``)."""
        words = [str(token) for token in tree.children[1:]]
        spelled = " ".join(words[:2]).upper()
        last = words[2] if len(words) == 3 else None
        for kind in (SkipKind.PAST_LAST, SkipKind.TO_NEXT):
            if spelled == kind.value.rsplit(" ", 1)[0] and (last or "").upper() in ("ROW", "EVENT"):
                return Skip(kind, pos=pos_of(tree))
        for kind in (SkipKind.TO_FIRST, SkipKind.TO_LAST):
            if spelled == kind.value and last is not None and last.upper() != "EVENT":
                return Skip(kind, last, pos=pos_of(tree))
        raise CelSyntaxError(
            f"unexpected 'AFTER MATCH SKIP {' '.join(words)}'; expected AFTER MATCH SKIP followed "
            "by PAST LAST ROW, TO NEXT ROW, TO FIRST variable or TO LAST variable",
            pos_of(tree),
        )

    def structure(self, tree: ParseTree) -> tuple[str, tuple[Component, ...], Group | None]:
        """The root's operator, every component in the order of the text, and the structure
        if it is nested (an OR, or a group inside a group)."""
        if tree.data == "single":
            only = self.component(tree.children[0])
            if only.var is None:
                only = Component(only.types, only.types[0], False, False, only.pos)
            return "SEQ", (only,), None
        root = self.group(tree.children[0])
        flat = root.operator != "OR" and all(isinstance(p, Component) for p in root.parts)
        return root.operator, root.components(), None if flat else root

    def group(self, tree: ParseTree) -> Group:
        operator = {"seq": "SEQ", "conj": "AND", "disj": "OR"}[tree.data]
        parts: list[Component | Group] = []
        for part in tree.children:
            if isinstance(part, lark.Tree):
                inner = part.children[0]
                is_group = inner.data in ("seq", "conj", "disj")
                parts.append(self.group(inner) if is_group else self.component(inner))
        return Group(operator, tuple(parts), pos_of(tree))

    def component(self, tree: ParseTree) -> Component:
        children = tree.children
        if tree.data == "negated":
            types = self.event_type(children[2])
            var = str(children[3]) if len(children) == 5 else None
            return Component(types, var, False, True, pos_of(tree))
        types = self.event_type(children[0])
        if tree.data == "kleene":
            return Component(types, str(children[2]), True, False, pos_of(tree))
        var = str(children[1]) if len(children) == 2 else None
        return Component(types, var, False, False, pos_of(tree))

    @staticmethod
    def event_type(tree: ParseTree) -> tuple[str, ...]:
        names = [c for c in tree.children if isinstance(c, Token) and c.type == "NAME"]
        return tuple(str(name).replace("-", "_") for name in names)

    def where(
        self, tree: ParseTree, components: tuple[Component, ...]
    ) -> tuple[Strategy, bool, Pred | None]:
        """The strategy (ANY when not given), whether it was given, and the predicate."""
        children = tree.children
        if len(children) == 2:
            return Strategy.ANY, False, self.pred(children[1])
        strategy = STRATEGIES[str(children[1]).upper()]
        variables = {c.var for c in components}
        for child in children:
            if isinstance(child, lark.Tree) and child.data == "strategy_var":
                name = str(child.children[0])
                if name not in variables:
                    raise CelSyntaxError(
                        f"{strategy.value} names {name}, which is no variable of the pattern",
                        pos_of(child),
                    )
        body = [c for c in children if isinstance(c, lark.Tree) and c.data == "expr"]
        return strategy, True, self.pred(body[0]) if body else None

    def return_item(self, tree: ParseTree) -> ReturnItem:
        alias = str(tree.children[2]) if len(tree.children) == 3 else None
        self.guarded += 1
        term = self.term(tree.children[0])
        self.guarded -= 1
        return ReturnItem(term, alias, pos_of(tree))

    # ----------------------------------------------------- leaves and tests

    def node(self, tree: ParseTree) -> Term | Pred:
        tree = rung(tree)
        kind = str(tree.data)
        if kind == "equivalences":
            if self.guarded:
                raise CelSyntaxError(
                    "an equivalence test [attr] belongs in WHERE, joined to the rest by AND",
                    pos_of(tree),
                )
            for child in tree.children:
                if isinstance(child, lark.Tree):
                    self.equivalences.append(self.equivalence(child))
            return Const(True, AttrType.BOOL, pos_of(tree))
        guards = kind == "not_" or (
            kind == "expr" and sum(isinstance(c, lark.Tree) for c in tree.children) > 1
        )
        self.guarded += guards
        try:
            return super().node(tree)
        finally:
            self.guarded -= guards

    def equivalence(self, tree: ParseTree) -> Equivalence:
        name = tree.children[0]
        if len(tree.children) == 1:
            return Equivalence(str(name), None, pos_of(tree))
        op = tree.children[1]
        if str(op) != "=":
            raise CelSyntaxError(
                f"an equivalence test fixes its value with '=', not {str(op)!r}",
                pos_of(op),
                ("'='",),
            )
        literal = tree.children[2]
        kind = literal.data
        if kind in ("neg_int", "neg_float"):
            value = literal_value(kind[4:].upper(), str(literal.children[1]))
            typ = AttrType.INT if kind == "neg_int" else AttrType.FLOAT
            term: Term = Neg(Const(value, typ), pos_of(literal))
        else:
            term = self.term(literal)
        return Equivalence(str(name), term, pos_of(tree))

    def primary(self, tree: ParseTree, pos: Pos) -> Term | Pred:
        kind = str(tree.data)
        children = tree.children
        if kind == "percent":
            amount = str(children[0])[:-1]
            number = float(literal_value("FLOAT" if "." in amount else "INT", amount))
            return Const(number / 100, AttrType.FLOAT, pos)
        if kind == "name":
            if self.lone is None:
                raise CelSyntaxError(
                    f"attribute {children[0]} needs its variable (write x.{children[0]})",
                    pos,
                    ("'.'",),
                )
            return self.leaf(Ref(self.lone, Index.ONLY, str(children[0])), pos)
        if kind == "dotted":
            var, attr = str(children[0]), str(children[2])
            index = Index.LEN if attr.upper() == "LEN" else Index.ONLY
            return self.leaf(Ref(var, index, None if index is Index.LEN else attr), pos)
        if kind == "indexed":
            return self.leaf(self.indexed(children), pos)
        if kind in ("upto", "every"):
            raise CelSyntaxError(
                f"{''.join(map(str, children))} names several events; "
                f"take one of {', '.join(a.lower() for a in AGGREGATES)} of it",
                pos,
            )
        if kind == "call" and len(children) == 4 and str(children[0]).upper() in AGGREGATES:
            arg = children[2]
            inner = _sole_primary(arg)
            if inner is not None and inner.data in ("upto", "every"):
                return self.leaf(self.aggregate(str(children[0]).upper(), inner), pos)
        return super().primary(tree, pos)

    def indexed(self, children: list[ParseTree]) -> Ref:
        var, index, attr = str(children[0]), children[2], str(children[5])
        if index.data == "at":
            if str(index.children[0]) != "1":
                raise CelSyntaxError(
                    f"a Kleene variable is read at [1], [i], [i-1] or [{var}.LEN], "
                    f"not [{index.children[0]}]",
                    pos_of(index),
                )
            return Ref(var, Index.FIRST, attr)
        if index.data == "current":
            _check_i(index.children[0])
            return Ref(var, Index.CURRENT, attr)
        if index.data == "previous":
            _check_i(index.children[0])
            if str(index.children[2]) != "1":
                raise CelSyntaxError("only a[i-1] reaches back", pos_of(index))
            return Ref(var, Index.PREVIOUS, attr)
        owner, length = str(index.children[0]), str(index.children[2])
        if owner != var or length.upper() != "LEN":
            raise CelSyntaxError(
                f"the last event of {var} is {var}[{var}.LEN]", pos_of(index), (f"{var}.LEN",)
            )
        return Ref(var, Index.LAST, attr)

    @staticmethod
    def aggregate(function: str, tree: ParseTree) -> Ref:
        children = tree.children
        if tree.data == "every":
            return Ref(str(children[0]), Index.ALL, str(children[4]), function)
        _check_i(children[3])
        if str(children[5]) != "1":
            raise CelSyntaxError("an aggregate runs over a[..i-1] or a[]", pos_of(children[5]))
        return Ref(str(children[0]), Index.UPTO_PREVIOUS, str(children[8]), function)

    def leaf(self, ref: Ref, pos: Pos) -> Attr:
        self.refs.setdefault(ref.key, ref)
        return Attr(Scope.EVENT, ref.key, pos)


def _check_i(token: ParseTree) -> None:
    if str(token) != "i":
        raise CelSyntaxError(f"the running index is i, not {token}", pos_of(token), ("i",))


def _sole_primary(tree: ParseTree) -> ParseTree | None:
    """The primary an expression consists of alone, if so (``avg(a[..i-1].x)``'s argument)."""
    while isinstance(tree, lark.Tree) and tree.data not in ("upto", "every"):
        parts = [c for c in tree.children if isinstance(c, lark.Tree)]
        tokens = [c for c in tree.children if isinstance(c, Token)]
        if len(parts) != 1 or tokens:
            return None
        tree = parts[0]
    return tree if isinstance(tree, lark.Tree) else None
