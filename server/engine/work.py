"""Work budgets: the steps each subscription causes in one epoch, and the cut past them.

Section 4.3's loop does, per event, work in proportion to the instances it tests and the
instances and matches it makes.  In a merged DAG that work is shared: an instance stands for
every subscription among its *members* (its slots).  :class:`Work` charges each step to the
subscriptions it is done for:

* an instance tested against an event (the AI probe's candidates, verified or not) is one
  step for each of its members the event's group concerns;
* an edge fired (an instance made, or a match) is one step for each slot it moves.

A shared step is charged whole to every subscription sharing it: what each would pay alone.
A subscription whose steps in one epoch pass ``limit`` is *cut* for the rest of that epoch:
its slots are taken out of every test and every firing, so the events after the cut do not
move its instances (they stay as they were) and make it no match, while the other members of
a shared instance go on as before.  One notice per *episode*: it ends after
:data:`CALM_EPOCHS` epochs without a cut.

Many subscriptions, each within its limit, are bounded together by *pools*: a client's
subscriptions (:meth:`Work.join`, its budget), and the whole engine (``lane``); a pool counts
a step shared by several of its members once.  Past its budget, a pool cuts each member that
spent its *share* (the budget over the members charged in the epoch, at most
1/:data:`LANE_SHARE` of it) or more; the members below their share go on, and are cut once
they reach it.  A pool so takes at most about twice its budget in an epoch, and a client
with a thousand subscriptions is held to its own budget before the engine's is reached: the
other clients' epochs are untouched.

The charge is deterministic: the same epochs in the same order on the same state cut at the
same step, whatever the machine does, and a restart that replays the log cuts alike (the
episodes are saved in snapshots).  Steps are added up per (space, members) pair as they come
and spread over the subscriptions every :data:`CHECK_EVERY` steps once one of them (or a
client, or the engine) could be past its budget, so a shared instance costs one dictionary
update per step however many subscriptions share it, and its members are counted out only in
an epoch that comes near a budget.

>>> work = Work(limit=3, owners=lambda: {(0, 0): "s1", (0, 1): "s2"})
>>> for _ in range(4):
...     work.charge(0, 0b01)  # four steps for s1 (slot 0) alone
>>> work.charge(0, 0b11)      # one shared by s1 and s2
>>> work.check()
>>> work.allowed(0) == ~0b01, sorted(work.spent.items())
(True, [('s1', 5), ('s2', 1)])
>>> [subscription for subscription, _ in work.finish()], work.allowed(0)
(['s1'], -1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from cesar.index.masks import slots_of, without

CHECK_EVERY: Final = 1024
"""Steps charged between two spreads of the charges over subscriptions (and cuts)."""
LANE_SHARE: Final = 100
"""A pool's share for a member is at most 1/100 of its budget: with fewer members, past the
budget only the ones that spent a hundredth of it are cut."""
CALM_EPOCHS: Final = 64
"""Epochs without a cut that end a subscription's episode (its next cut is told again)."""

Owners = Callable[[], Mapping[tuple[int, int], str]]
"""The subscription of each (space, slot) of the program, worked out when asked."""


class Work:
    """One engine's work budget per subscription and epoch; see the module docstring.

    ``limit`` and ``lane`` None charge nothing.  ``owners`` is called at the first spread of
    an epoch after :meth:`forget_owners` (the program changed).
    """

    def __init__(self, limit: int | None, owners: Owners, lane: int | None = None) -> None:
        self.limit = limit
        self.charging = limit is not None or lane is not None
        """Whether anything is charged (a budget is set)."""
        self.lane = lane
        """Steps the whole engine may take in one epoch (None: no bound); past it each
        subscription that took its share is cut (:meth:`_share`)."""
        self.done = 0
        """Steps taken in this epoch, each once however many subscriptions share it."""
        self._owners_of = owners
        self._owners: Mapping[tuple[int, int], str] | None = None
        self._slots: dict[str, list[tuple[int, int]]] = {}
        self.pending: dict[tuple[int, int], int] = {}
        """Steps per (space, members) not yet spread over subscriptions."""
        self.unchecked = 0
        self.unspread = 0
        """Steps charged since the last spread (each once): how far any subscription's or
        client's spending may have grown since."""
        self.most = 0
        """The most steps any subscription spent in this epoch (as of the last spread)."""
        self.most_account = 0
        """The most steps any client spent in this epoch (as of the last spread)."""
        self.spent: Counter[str] = Counter()
        """Steps per subscription in this epoch (as of the last spread)."""
        self.last_spent: Counter[str] = Counter()
        self.last_pending: dict[tuple[int, int], int] = {}
        """The latest finished epoch's ``spent`` and the charges it left unspread
        (:meth:`steps_of`)."""
        self.cut: dict[int, int] = {}
        """Per space, the slots cut for the rest of this epoch."""
        self.cut_now: dict[str, str] = {}
        """The subscriptions cut in this epoch, each with the budget it went past."""
        self.episodes: dict[str, int] = {}
        """Subscriptions cut since their notice, with the calm epochs since their last cut."""
        self.accounts: dict[str, str] = {}
        """Per subscription with a client budget: its client."""
        self.budgets: dict[str, int] = {}
        """Per client with a budget: the steps its subscriptions may take in one epoch."""
        self.members: Counter[str] = Counter()
        """Per client with a budget: its subscriptions here."""
        self.by_account: Counter[str] = Counter()
        """Steps per client in this epoch (as of the last spread)."""

    def forget_owners(self, left: Iterable[tuple[int, int]] = ()) -> None:
        """The program's slots changed, the (space, slot) pairs ``left`` freed: work out the
        owners again when next needed, and take the freed slots out of the latest epoch's
        unspread charges, so a subscription given a freed slot is not charged its steps.
        O(unspread charges of the latest epoch) when a slot left."""
        self._owners = None
        gone = _masks(left)
        if gone and self.last_pending:
            kept: dict[tuple[int, int], int] = {}
            for (space, members), steps in self.last_pending.items():
                members = without(members, gone.get(space, 0))
                if members:
                    kept[space, members] = kept.get((space, members), 0) + steps
            self.last_pending = kept

    def owners(self) -> Mapping[tuple[int, int], str]:
        """The subscription of each (space, slot), worked out once per program change."""
        if self._owners is None:
            self._owners = self._owners_of()
            self._slots = {}
            for place, subscription in self._owners.items():
                self._slots.setdefault(subscription, []).append(place)
        return self._owners

    def owner(self, space: int, slot: int) -> str:
        """The subscription holding ``slot`` of ``space``."""
        return self.owners()[space, slot]

    def places(self, subscription: str) -> list[tuple[int, int]]:
        """The (space, slot) pairs ``subscription`` holds."""
        self.owners()
        return self._slots.get(subscription, [])

    def charge(self, space: int, members: int, steps: int = 1) -> None:
        """Charge ``steps`` to each slot of ``members`` in ``space``.  O(1); every
        :data:`CHECK_EVERY` steps, O(distinct members charged × their slots)."""
        key = space, members  # a dict's look-ups compile direct, a Counter's do not
        self.pending[key] = self.pending.get(key, 0) + steps
        self.unchecked += steps
        self.unspread += steps
        self.done += steps
        if self.unchecked >= CHECK_EVERY:
            self.check()

    def check(self) -> None:
        """:meth:`spread` the pending charges if some subscription, client or the engine could
        be past its budget.

        While none can be (the most any subscription or client spent at the last spread, plus
        every step charged since, is within the smallest budget, and the engine within its
        lane), the charges wait, added up per (space, members): a spread costs the slots of
        every members set, and a set shared by thousands of subscriptions is not counted out
        at all in an epoch that stays within every budget.  The cuts are the same: only a
        spread that could cut no one is left out.
        """
        self.unchecked = 0
        if not self.charging or not self.pending:
            self.pending.clear()
            return
        if not self._within():
            self.spread()

    def spread(self) -> None:
        """Spread every pending charge over its subscriptions (and their clients) now; cut
        those past their limit, then the heavy members of each pool past its budget.
        O(distinct members charged × their slots)."""
        owners, spent, limit, accounts = self.owners(), self.spent, self.limit, self.accounts
        by_account = self.by_account
        over = []
        most, most_account = self.most, self.most_account
        for (space, members), steps in self.pending.items():
            clients = set()
            for slot in slots_of(members):
                subscription = owners.get((space, slot))
                if subscription is None:
                    continue
                spent[subscription] += steps
                most = max(most, spent[subscription])
                if limit is not None and spent[subscription] > limit:
                    over.append(subscription)
                clients.add(accounts.get(subscription))
            for client in clients:
                if client is not None:
                    by_account[client] += steps
                    most_account = max(most_account, by_account[client])
        self.most, self.most_account = most, most_account
        self.pending.clear()
        self.unspread = 0
        for subscription in over:
            if subscription not in self.cut_now:
                self._cut(subscription, f"more than {limit} steps (max_steps_per_epoch)")
        for name, steps in by_account.items():
            budget = self.budgets[name]
            if steps > budget:
                self._share(
                    [s for s in spent if accounts.get(s) == name],
                    budget,
                    f"its client {name} took more than {budget} steps (max_client_steps_per_epoch)",
                )
        if self.lane is not None and self.done > self.lane:
            self._share(
                list(spent),
                self.lane,
                f"the engine took more than {self.lane} (max_engine_steps_per_epoch)",
            )

    def _within(self) -> bool:
        """Whether no subscription or client can be past its budget, nor the engine past its
        lane, with the steps charged since the last spread.  O(clients with a budget)."""
        if self.limit is not None and self.most + self.unspread > self.limit:
            return False
        if self.budgets and self.most_account + self.unspread > min(self.budgets.values()):
            return False
        return self.lane is None or self.done <= self.lane

    def _share(self, members: list[str], budget: int, why: str) -> None:
        """A pool past its ``budget``: cut each of its ``members`` that spent its share or
        more (the budget over the members charged, at most 1/:data:`LANE_SHARE` of it);
        those below go on, so a pool takes at most about twice its budget in an epoch."""
        spent = self.spent
        share = max(1, budget // max(LANE_SHARE, len(members)))
        for subscription in sorted(members):
            steps = spent[subscription]
            if steps >= share and subscription not in self.cut_now:
                self._cut(
                    subscription, f"{steps} steps, its share ({share}) of an epoch in which {why}"
                )

    def _cut(self, subscription: str, why: str) -> None:
        """Cut ``subscription`` for the rest of the epoch, for ``why``."""
        self.cut_now[subscription] = why
        for space, slots in _masks(self._slots.get(subscription, ())).items():
            self.cut[space] = self.cut.get(space, 0) | slots

    def allowed(self, space: int) -> int:
        """The slots of ``space`` not cut in this epoch, as a mask (-1: all).  O(1)."""
        cut = self.cut.get(space)
        return -1 if cut is None else ~cut

    def steps_of(self, subscription: str) -> int:
        """The steps charged to ``subscription`` in the latest finished epoch.  O(charges
        the epoch left unspread).

        >>> work = Work(limit=100, owners=lambda: {(0, 0): "s1", (0, 1): "s2"})
        >>> work.charge(0, 0b11, 3)
        >>> _ = work.finish()
        >>> work.steps_of("s1"), work.steps_of("s2"), work.spent["s1"]
        (3, 3, 0)
        """
        mine = _masks(self.places(subscription))
        unspread = sum(
            steps
            for (space, members), steps in self.last_pending.items()
            if members & mine.get(space, 0)
        )
        return self.last_spent[subscription] + unspread

    def finish(self) -> list[tuple[str, str]]:
        """End the epoch (nothing spent or cut any more): the notices owed (subscription,
        reason), one per episode; the subscriptions cut in it are ``cut_now`` until the next
        epoch ends, and its steps are :meth:`steps_of`."""
        self.last_pending, self.pending = self.pending, {}
        self.last_spent, self.spent = self.spent, self.last_spent
        self.spent.clear()  # the last epoch's, emptied: Counter() runs interpreted __init__
        self.by_account.clear()
        self.cut.clear()
        self.unchecked = self.unspread = self.done = self.most = self.most_account = 0
        notices = []
        for subscription, why in sorted(self.cut_now.items()):
            if subscription not in self.episodes:
                notices.append(
                    (
                        subscription,
                        f"cut for the rest of an epoch: {why}, counting partial matches tested "
                        "and made and matches; its partial matches were not moved by the rest "
                        "of the epoch, so matches may be missed (one notice until "
                        f"{CALM_EPOCHS} epochs pass without a cut)",
                    )
                )
            self.episodes[subscription] = 0
        for subscription in [s for s in self.episodes if s not in self.cut_now]:
            self.episodes[subscription] += 1
            if self.episodes[subscription] >= CALM_EPOCHS:
                del self.episodes[subscription]
        return notices

    def begin(self) -> None:
        """Begin an epoch: no subscription cut yet.  O(1)."""
        if self.cut_now:
            self.cut_now = {}

    def join(self, subscription: str, client: str, budget: int) -> None:
        """Bound ``subscription``'s steps together with its ``client``'s other subscriptions'
        to ``budget`` in each epoch (the client's latest budget holds for all of them)."""
        self.charging = True
        self.accounts[subscription] = client
        self.budgets[client] = budget
        self.members[client] += 1

    def remove(self, subscription: str) -> None:
        """Forget a subscription that left."""
        self.episodes.pop(subscription, None)
        client = self.accounts.pop(subscription, None)
        if client is not None:
            self.members[client] -= 1
            if not self.members[client]:
                del self.members[client], self.budgets[client]

    def check_valid(self, subscriptions: set[str]) -> None:
        """Assert: between epochs nothing is pending or cut; episodes name live subscriptions
        and count fewer than :data:`CALM_EPOCHS` calm epochs."""
        assert not self.pending and not self.unchecked and not self.cut and not self.by_account
        assert not self.unspread and not self.most and not self.most_account
        assert set(self.accounts) <= subscriptions, set(self.accounts) - subscriptions
        assert self.members == Counter(self.accounts.values())
        assert self.budgets.keys() == self.members.keys()
        assert all(0 <= calm < CALM_EPOCHS for calm in self.episodes.values())
        assert set(self.episodes) <= subscriptions, set(self.episodes) - subscriptions


def _masks(places: Iterable[tuple[int, int]]) -> dict[int, int]:
    """The (space, slot) pairs ``places`` as a mask of slots per space.  O(places).

    >>> _masks([(0, 1), (2, 0), (0, 3)])
    {0: 10, 2: 1}
    """
    out: dict[int, int] = {}
    for space, slot in places:
        out[space] = out.get(space, 0) | 1 << slot
    return out
