"""Clients, bearer tokens and per-client limits.

A tokens file has one client per line — ``TOKEN CLIENT [key=value ...]`` —
with optional limits overriding the server's defaults:
``max_subscriptions`` (live subscriptions), ``max_query_bytes`` (CEL text
size) and ``max_listens`` (concurrent Listen streams).  Blank lines and
``#`` comments are ignored.  Tokens are compared in constant time.

>>> clients = parse_tokens("# ops\\nsecret-a alice max_subscriptions=2\\nsecret-b bob\\n",
...                        Limits(100, 1000, 4))
>>> clients.authenticate("secret-a")
Client(name='alice', limits=Limits(max_subscriptions=2, max_query_bytes=1000, max_listens=4))
>>> clients.authenticate("nope") is None
True
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace

ANONYMOUS = "anonymous"


class TokensError(ValueError):
    """A tokens file that cannot be used; the message names the line."""


@dataclass(frozen=True)
class Limits:
    """What one client may hold at once."""

    max_subscriptions: int
    max_query_bytes: int
    max_listens: int


@dataclass(frozen=True)
class Client:
    """An authenticated caller."""

    name: str
    limits: Limits


class Clients:
    """The token table; with no tokens every caller is the client ``anonymous``."""

    def __init__(self, defaults: Limits, tokens: dict[str, Client] | None = None) -> None:
        self.defaults = defaults
        self.tokens = tokens
        self.anonymous = Client(ANONYMOUS, defaults)

    @property
    def required(self) -> bool:
        """Whether callers must present a token."""
        return self.tokens is not None

    def authenticate(self, token: str | None) -> Client | None:
        """The client holding ``token`` (None if unknown); anyone when tokens are off."""
        if self.tokens is None:
            return self.anonymous
        if token is None:
            return None
        found = None
        for known, client in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = client
        return found


def parse_tokens(text: str, defaults: Limits) -> Clients:
    """Parse a tokens file (see the module docstring); raise :class:`TokensError`."""
    tokens: dict[str, Client] = {}
    names: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise TokensError(f"line {number}: expected TOKEN CLIENT [key=value ...]")
        token, name, *options = fields
        if token in tokens:
            raise TokensError(f"line {number}: token given twice")
        if name in names:
            raise TokensError(f"line {number}: client {name} given twice")
        limits = defaults
        for option in options:
            key, _, value = option.partition("=")
            if key not in {"max_subscriptions", "max_query_bytes", "max_listens"}:
                raise TokensError(f"line {number}: unknown option {key!r}")
            if not value.isdigit():
                raise TokensError(f"line {number}: {key} needs a non-negative integer")
            limits = replace(limits, **{key: int(value)})
        tokens[token] = Client(name, limits)
        names.add(name)
    return Clients(defaults, tokens)
