"""Patterns parsed by recursive descent into the very trees lark's LALR(1) parser builds.

``pattern.lark`` stays the grammar, and lark stays the parser of record: for a text the
grammar accepts, :func:`descend` builds the tree lark would (the same rule and alias names,
the same tokens in the same places), one call per rule, without lark's table-driven loop
(a fifth of a pattern's compile time, perf/RESULTS.md "Where a compile goes"). For anything
else it gives up, and :func:`~cesar.automata.pattern.parser.parse_pattern` parses the text
with lark, whose errors say where and what was expected. The property tests hold the two
to equal trees on generated patterns and on broken ones (tests/property/test_descent.py).

Each rule below is the grammar's rule of the same name; where the grammar has alternatives,
the next one or two tokens choose, as they do for the LALR(1) parser (the grammar has no
conflicts). O(tokens).

>>> from cesar.automata.pattern.parser import tokenize
>>> tree = descend(list(tokenize("PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 5")))
>>> [str(child.data) for child in tree.children[0].children[1:]]
['structure', 'where', 'int_window']
>>> descend(list(tokenize("PATTERN SEQ(A a, B b) WHERE"))) is None  # lark says what is missing
True
"""

from __future__ import annotations

from lark import Token, Tree

ParseTree = Tree[Token]
Children = list[ParseTree | Token]

_GROUPS = {"SEQ": "seq", "AND": "conj", "OR": "disj"}
_CONSTANTS = {
    "INT": "int",
    "FLOAT": "float",
    "PERCENT_LIT": "percent",
    "DURATION": "duration",
    "STRING": "string",
    "TRUE": "true",
    "FALSE": "false",
}
_LITERALS = {"INT": "int", "FLOAT": "float", "STRING": "string"}


class _GaveUp(Exception):
    """Not a text of the grammar (or not one this parser takes): lark parses it."""


def descend(tokens: list[Token]) -> ParseTree | None:
    """lark's parse tree of a pattern's ``tokens`` (the pattern tokenizer's), or None where
    lark must parse it: tokens the grammar rejects, nesting deeper than Python's stack."""
    try:
        return _Descent(tokens).start()
    except (_GaveUp, RecursionError):
        return None


class _Descent:
    """One text's tokens and the position reached."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.kinds = [token.type for token in tokens] + ["$END", "$END"]
        self.at = 0

    def peek(self, ahead: int = 0) -> str:
        return self.kinds[self.at + ahead]

    def take(self, kind: str) -> Token:
        if self.kinds[self.at] != kind:
            raise _GaveUp
        self.at += 1
        return self.tokens[self.at - 1]

    def next(self) -> Token:
        if self.at >= len(self.tokens):
            raise _GaveUp
        self.at += 1
        return self.tokens[self.at - 1]

    def start(self) -> ParseTree:
        tree: ParseTree = Tree("start", [self.pattern()])
        if self.at != len(self.tokens):
            raise _GaveUp
        return tree

    def pattern(self) -> ParseTree:
        children: Children = [self.take("PATTERN"), self.structure()]
        if self.peek() == "WHERE":
            children.append(self.where())
        if self.peek() == "WITHIN":
            children.append(self.within())
        if self.peek() == "AFTER_MATCH_SKIP":
            children.append(self.skip())
        if self.peek() == "PLAN":
            children.append(self.plan())
        if self.peek() == "RETURN":
            children.append(self.returns())
        if self.peek() == "PUBLISH":
            children.append(Tree("publish", [self.next(), self.take("NAME")]))
        return Tree("pattern", children)

    def structure(self) -> ParseTree:
        if self.peek() in _GROUPS:
            return Tree("structure", [self.group()])
        return Tree("single", [self.component()])

    def group(self) -> ParseTree:
        keyword = self.next()
        children: Children = [keyword, self.take("LPAR"), self.part()]
        while self.peek() == "COMMA":
            children += [self.next(), self.part()]
        children.append(self.take("RPAR"))
        return Tree(_GROUPS[keyword.type], children)

    def part(self) -> ParseTree:
        return Tree("part", [self.group() if self.peek() in _GROUPS else self.component()])

    def component(self) -> ParseTree:
        if self.peek() == "BANG":
            children: Children = [self.next(), self.take("LPAR"), self.event_type()]
            if self.peek() == "NAME":
                children.append(self.next())
            children.append(self.take("RPAR"))
            return Tree("negated", children)
        kind = self.event_type()
        if self.peek() == "PLUS":
            plus, name = self.next(), self.take("NAME")
            return Tree("kleene", [kind, plus, name, self.take("LBRACK"), self.take("RBRACK")])
        if self.peek() == "NAME":
            return Tree("positive", [kind, self.next()])
        return Tree("positive", [kind])

    def event_type(self) -> ParseTree:
        if self.peek() != "ANY":
            return Tree("one_type", [self.take("NAME")])
        children: Children = [self.next(), self.take("LPAR"), self.take("NAME")]
        while self.peek() == "COMMA":
            children += [self.next(), self.take("NAME")]
        children.append(self.take("RPAR"))
        return Tree("any_type", children)

    def where(self) -> ParseTree:
        keyword = self.next()
        if self.peek() != "STRATEGY":
            return Tree("where", [keyword, self.expr()])
        children: Children = [keyword, self.next(), self.take("LPAR")]
        if self.peek() == "NAME":
            children.append(self.strategy_var())
            while self.peek() == "COMMA":
                children += [self.next(), self.strategy_var()]
        children += [self.take("RPAR"), self.take("LBRACE")]
        if self.peek() != "RBRACE":
            children.append(self.expr())
        children.append(self.take("RBRACE"))
        return Tree("where", children)

    def strategy_var(self) -> ParseTree:
        name = self.take("NAME")
        if self.peek() == "LBRACK":
            return Tree("strategy_var", [name, self.next(), self.take("RBRACK")])
        return Tree("strategy_var", [name])

    def within(self) -> ParseTree:
        keyword = self.next()
        if self.peek() == "DURATION":
            return Tree("duration_window", [keyword, self.next()])
        return Tree("int_window", [keyword, self.take("INT")])

    def skip(self) -> ParseTree:
        children: Children = [self.next(), self.take("NAME"), self.take("NAME")]
        if self.peek() in ("NAME", "PATTERN"):
            children.append(self.next())
        return Tree("skip", children)

    def plan(self) -> ParseTree:
        children: Children = [self.next(), self.take("NAME")]
        if self.peek() == "LPAR":
            children += [self.next(), self.take("NAME")]
            while self.peek() == "COMMA":
                children += [self.next(), self.take("NAME")]
            children.append(self.take("RPAR"))
        return Tree("plan", children)

    def returns(self) -> ParseTree:
        children: Children = [self.next(), self.return_item()]
        while self.peek() == "COMMA":
            children += [self.next(), self.return_item()]
        return Tree("returns", children)

    def return_item(self) -> ParseTree:
        expr = self.expr()
        if self.peek() == "AS":
            return Tree("return_item", [expr, self.next(), self.take("NAME")])
        return Tree("return_item", [expr])

    def expr(self) -> ParseTree:
        children: Children = [self.and_expr()]
        while self.peek() == "OR":
            children += [self.next(), self.and_expr()]
        return Tree("expr", children)

    def and_expr(self) -> ParseTree:
        children: Children = [self.not_expr()]
        while self.peek() == "AND":
            children += [self.next(), self.not_expr()]
        return Tree("and_expr", children)

    def not_expr(self) -> ParseTree:
        kind = self.peek()
        if kind == "NOT":
            return Tree("not_", [self.next(), self.not_expr()])
        if kind == "LBRACK":
            children: Children = [self.next(), self.equivalence()]
            while self.peek() == "COMMA":
                children += [self.next(), self.equivalence()]
            children.append(self.take("RBRACK"))
            return Tree("equivalences", children)
        left = self.sum()
        if self.peek() == "CMP":
            return Tree("cmp", [left, self.next(), self.sum()])
        return Tree("cmp", [left])

    def equivalence(self) -> ParseTree:
        name = self.take("NAME")
        if self.peek() != "CMP":
            return Tree("equivalence", [name])
        return Tree("equivalence", [name, self.next(), self.literal()])

    def literal(self) -> ParseTree:
        kind = self.peek()
        if kind in _LITERALS:
            return Tree(_LITERALS[kind], [self.next()])
        minus = self.take("MINUS")
        kind = self.peek()
        if kind not in ("INT", "FLOAT"):
            raise _GaveUp
        return Tree(f"neg_{_LITERALS[kind]}", [minus, self.next()])

    def sum(self) -> ParseTree:
        children: Children = [self.product()]
        while self.peek() in ("PLUS", "MINUS"):
            children += [Tree("add_op", [self.next()]), self.product()]
        return Tree("sum", children)

    def product(self) -> ParseTree:
        children: Children = [self.signed()]
        while self.peek() in ("STAR", "SLASH", "PERCENT"):
            children += [Tree("mul_op", [self.next()]), self.signed()]
        return Tree("product", children)

    def signed(self) -> ParseTree:
        if self.peek() == "MINUS":
            return Tree("neg", [self.next(), self.signed()])
        primary = self.primary()
        if self.peek() == "CARET":
            return Tree("power", [primary, self.next(), self.signed()])
        return Tree("power", [primary])

    def primary(self) -> ParseTree:
        kind = self.peek()
        if kind in _CONSTANTS:
            return Tree(_CONSTANTS[kind], [self.next()])
        if kind == "LPAR":
            return Tree("paren", [self.next(), self.expr(), self.take("RPAR")])
        name = self.take("NAME")
        after = self.peek()
        if after == "DOT":
            return Tree("dotted", [name, self.next(), self.take("NAME")])
        if after == "LPAR":
            children: Children = [name, self.next()]
            if self.peek() != "RPAR":
                children.append(self.expr())
                while self.peek() == "COMMA":
                    children += [self.next(), self.expr()]
            children.append(self.take("RPAR"))
            return Tree("call", children)
        if after != "LBRACK":
            return Tree("name", [name])
        bracket = self.next()
        inside = self.peek()
        if inside == "RBRACK":
            children = [name, bracket, self.next()]
            rule = "every"
        elif inside == "DOTDOT":
            children = [name, bracket, self.next(), self.take("NAME"), self.take("MINUS")]
            children += [self.take("INT"), self.take("RBRACK")]
            rule = "upto"
        else:
            children = [name, bracket, self.index(), self.take("RBRACK")]
            rule = "indexed"
        return Tree(rule, [*children, self.take("DOT"), self.take("NAME")])

    def index(self) -> ParseTree:
        if self.peek() == "INT":
            return Tree("at", [self.next()])
        name = self.take("NAME")
        after = self.peek()
        if after == "MINUS":
            return Tree("previous", [name, self.next(), self.take("INT")])
        if after == "DOT":
            return Tree("last", [name, self.next(), self.take("NAME")])
        return Tree("current", [name])
