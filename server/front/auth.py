"""Clients, bearer tokens, scopes and per-client limits.

A tokens file has one client per line — ``TOKEN CLIENT [key=value ...]`` —
with optional limits overriding the server's defaults: ``max_subscriptions``
(live subscriptions), ``max_query_bytes`` (query and name size),
``max_listens`` (concurrent Listen streams), ``max_streams`` (input
streams defined), ``max_client_steps_per_epoch`` (the work its subscriptions may
take together in one epoch of an engine lane, 0: no bound) and
``max_open_epoch_events`` (its events waiting in open epochs, 0: no bound); and
``scope=`` with a comma-separated list of what the token may do:

* ``client`` (the default): define, list and delete its streams, subscribe,
  listen, publish events the front routes, share its published streams;
* ``feed``: what the Spark feed needs — the routing table (GetRouting) and
  publishing batches it routed to one shard;
* ``admin``: everything, and every client's streams are visible to it.

Blank lines and ``#`` comments are ignored.  Tokens are compared in constant
time.  Without a tokens file every caller is ``anonymous``, with every scope.

>>> text = "# ops\\nsecret-a alice max_subscriptions=2\\nsecret-f spark scope=feed\\n"
>>> clients = parse_tokens(text, Limits(100, 1000, 4, 10, 50_000))
>>> clients.authenticate("secret-a").limits.max_subscriptions
2
>>> bulk = parse_tokens("secret-b bulk max_client_steps_per_epoch=0\\n", Limits(100, 1000, 4, 10))
>>> bulk.limits_of("bulk").max_client_steps_per_epoch, bulk.limits_of("bob") == bulk.defaults
(0, True)
>>> sorted(clients.authenticate("secret-f").scopes)
['feed']
>>> clients.authenticate("nope") is None
True
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace

ANONYMOUS = "anonymous"
SCOPES = ("client", "feed", "admin")
_LIMITS = (
    "max_subscriptions",
    "max_query_bytes",
    "max_listens",
    "max_streams",
    "max_client_steps_per_epoch",
    "max_open_epoch_events",
)


class TokensError(ValueError):
    """A tokens file that cannot be used; the message names the line."""


@dataclass(frozen=True)
class Limits:
    """What one client may hold at once."""

    max_subscriptions: int
    max_query_bytes: int
    max_listens: int
    max_streams: int
    max_client_steps_per_epoch: int = 0
    """Steps its subscriptions may take together in one epoch of a lane (0: no bound)."""
    max_open_epoch_events: int = 0
    """Its events waiting in open epochs, once for each shard they wait for (0: no bound)."""


@dataclass(frozen=True)
class Client:
    """An authenticated caller and what its token may do (a subset of :data:`SCOPES`)."""

    name: str
    limits: Limits
    scopes: frozenset[str] = frozenset({"client"})

    def may(self, scope: str) -> bool:
        """Whether the token carries ``scope`` (an admin carries every scope)."""
        return scope in self.scopes or "admin" in self.scopes


class Clients:
    """The token table; with no tokens every caller is the client ``anonymous``."""

    def __init__(self, defaults: Limits, tokens: dict[str, Client] | None = None) -> None:
        self.defaults = defaults
        self.tokens = tokens
        self._by_name = {client.name: client for client in (tokens or {}).values()}
        self.anonymous = Client(ANONYMOUS, defaults, frozenset(SCOPES))

    @property
    def required(self) -> bool:
        """Whether callers must present a token."""
        return self.tokens is not None

    def limits_of(self, name: str) -> Limits:
        """The limits of the client called ``name`` (the defaults for one the tokens do not
        name).  O(1)."""
        client = self._by_name.get(name)
        return self.defaults if client is None else client.limits

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
        scopes = frozenset({"client"})
        for option in options:
            key, _, value = option.partition("=")
            if key == "scope":
                scopes = frozenset(value.split(","))
                if not scopes <= set(SCOPES):
                    raise TokensError(f"line {number}: scopes are {', '.join(SCOPES)}")
                continue
            if key not in _LIMITS:
                raise TokensError(f"line {number}: unknown option {key!r}")
            if not value.isdigit():
                raise TokensError(f"line {number}: {key} needs a non-negative integer")
            limits = replace(limits, **{key: int(value)})
        tokens[token] = Client(name, limits, scopes)
        names.add(name)
    return Clients(defaults, tokens)
