"""The epoch gate keeps its promise: each shard gets every epoch, whole, in order per clock group.

Events of three streams; a rule joins clock groups as a subscription reading
streams together would.  Each shard must see every stream's epochs once and in
increasing ``t1``, and, within a clock group, the events accepted after its
last join in ``t1`` order after everything the group released before them.
A batch goes as events or, as a table's rows do, in blocks of one stream and one t1 per
destination.  A restart rule replaces the gate by one restored from its checkpoint data.
Each batch is one of three clients'; the gate counts each one's events waiting, per shard.
"""

from collections import Counter

import numpy as np
import pyarrow as pa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cesar.automata.schema import Event
from cesar.server.engine.clocks import StreamGroups
from cesar.server.front.epochs import Arrival, EpochGate
from cesar.server.front.pieces import blocks, events_in
from cesar.server.host import snapshots

SHARDS = 3
STREAMS = ("S", "T", "U")
UNITS = {"S": "MIN", "T": "MIN", "U": "SEC"}.get
"""S and T count time in one unit, U in another: a watermark in one says nothing of the other."""
destinations = st.lists(st.integers(0, SHARDS - 1), unique=True, max_size=SHARDS)
batches = st.lists(
    st.tuples(st.integers(0, 20), destinations, st.sampled_from(STREAMS)), max_size=5
)
Batch = list[tuple[int, list[int], str]]
owners = st.sampled_from(("alice", "bob", ""))


class EpochGateMachine(RuleBasedStateMachine):
    """Front-routed batches, feed-routed batches, watermarks and joins, as the front passes them."""

    def __init__(self) -> None:
        super().__init__()
        self.groups = StreamGroups()
        self.gate = EpochGate(SHARDS, self.groups, UNITS)
        self.serial = 0
        self.joined_at = 0
        self.sent: list[Counter[tuple[int, int]]] = [Counter() for _ in range(SHARDS)]
        self.got: list[Counter[tuple[int, int]]] = [Counter() for _ in range(SHARDS)]
        self.last: list[dict[str, int]] = [{} for _ in range(SHARDS)]
        self.owner_of: dict[int, str] = {}

    def _accept(
        self,
        batch: Batch,
        watermark: int | None,
        shard: int | None,
        rows: bool = False,
        owner: str = "",
    ) -> set[str]:
        """Pass ``owner``'s ``batch`` on as the front would (``rows``: as a table's rows, in
        blocks); the streams of its accepted events."""
        accepted = []
        for t1, targets, stream in sorted(batch, key=lambda item: item[0]):
            if self.gate.settled(t1, stream, shard) is not None:
                continue  # the front rejects it as late
            self.serial += 1
            self.owner_of[self.serial] = owner
            event = Event.of(stream, t1, t1, {"n": self.serial})
            pairs = [(k, "global") for k in targets if shard is None or k == shard]
            for k, _ in pairs:
                self.sent[k][(t1, self.serial)] += 1
            accepted.append((event, pairs))
        arrivals: list[Arrival] = _blocks(accepted) if rows else list(accepted)
        for k, ready in enumerate(self.gate.advance(arrivals, watermark, shard, owner)):
            epochs = [item.t1 for item in ready]
            assert epochs == sorted(epochs), "released out of order"
            last = self.last[k]
            events = [event for item in ready for event in events_in(item.event)]
            for stream in STREAMS:
                mine = [event.t1 for event in events if event.stream == stream]
                if mine:
                    seen = last.get(stream)
                    assert seen is None or mine[0] > seen, f"shard {k} saw {stream}@{mine[0]} again"
            for event in events:
                n = dict(event.values)["n"]
                if n > self.joined_at:
                    before = [t for s, t in last.items() if self.groups.same(s, event.stream)]
                    assert not before or event.t1 >= max(before), "a clock group went back in time"
                last[event.stream] = event.t1
                self.got[k][(event.t1, n)] += 1
        return {event.stream for event, _ in accepted}

    @invariant()
    def the_bounds_say_what_settled_says_of_every_t1(self) -> None:
        """front_bounds and routed_bound, the admission's bounds for a whole batch at once,
        refuse exactly the t1s settled refuses, with the same mark."""
        for stream in STREAMS:
            settled, horizon = self.gate.front_bounds(stream)
            for t1 in range(22):
                marks = []
                if settled is not None and t1 <= settled:
                    marks.append(settled)
                if horizon is not None and t1 < horizon:
                    marks.append(horizon)
                assert self.gate.settled(t1, stream, None) == max(marks, default=None)
                for k in range(SHARDS):
                    bound = self.gate.routed_bound(stream, k)
                    want = bound if bound is not None and t1 <= bound else None
                    assert self.gate.settled(t1, stream, k) == want

    @rule(batch=batches, rows=st.booleans(), owner=owners)
    def publish(self, batch: Batch, rows: bool, owner: str) -> None:
        self._accept(batch, None, None, rows, owner)

    @rule(batch=batches.filter(bool), watermark=st.integers(0, 20), owner=owners)
    def publish_closing(self, batch: Batch, watermark: int, owner: str) -> None:
        """A front-routed batch's watermark closes the streams of its accepted events' units
        only: a stream counting time in another unit stays as it was, unless its clock group
        holds a stream of a closed unit (the group then applies that stream's epochs, which
        settles the group's other streams at those times too)."""
        before = {s: [self.gate.settled(t, s, None) for t in range(22)] for s in STREAMS}
        named = self._accept(batch, watermark, None, owner=owner)
        if not named:
            return  # none accepted: the watermark is every stream's, as a bare one is
        units = {UNITS(other) for other in named}
        closed = [other for other in STREAMS if UNITS(other) in units]
        for stream in STREAMS:
            other_unit = UNITS(stream) not in units
            if other_unit and not any(self.groups.same(stream, other) for other in closed):
                after = [self.gate.settled(t, stream, None) for t in range(22)]
                assert after == before[stream], f"{stream} was closed by another group's mark"

    @rule(
        shard=st.integers(0, SHARDS - 1),
        batch=batches,
        watermark=st.none() | st.integers(0, 20),
        rows=st.booleans(),
        owner=owners,
    )
    def routed(
        self, shard: int, batch: Batch, watermark: int | None, rows: bool, owner: str
    ) -> None:
        self._accept(batch, watermark, shard, rows, owner)

    @rule(watermark=st.integers(0, 20))
    def watermark(self, watermark: int) -> None:
        self._accept([], watermark, None)

    @rule(streams=st.sets(st.sampled_from(STREAMS), min_size=2))
    def join(self, streams: set[str]) -> None:
        if self.groups.join(streams):
            self.joined_at = self.serial
        self.groups.check_valid()

    @rule()
    def restart(self) -> None:
        """A checkpoint's gate (through a snapshot blob) takes over: nothing changes."""
        saved = snapshots.decode(snapshots.encode(self.gate.to_data(), 1), 1)
        self.gate = EpochGate(SHARDS, self.groups, UNITS)
        self.gate.restore(saved)

    @invariant()
    def valid(self) -> None:
        self.gate.check_valid()
        for k in range(SHARDS):
            pending = Counter(
                (p.t1, dict(e.values)["n"])
                for waiting in self.gate.pending[k].values()
                for p in waiting
                for e in events_in(p.event)
            )
            assert self.got[k] + pending == self.sent[k], f"shard {k} lost or duplicated events"
        held = Counter(
            self.owner_of[dict(e.values)["n"]]
            for shards in self.gate.pending
            for waiting in shards.values()
            for p in waiting
            for e in events_in(p.event)
        )
        for owner in ("alice", "bob", ""):
            assert self.gate.held_by(owner) == held[owner], f"{owner}'s events miscounted"

    def teardown(self) -> None:
        self._accept([], 10**6, None)
        for k in range(SHARDS):
            self._accept([], 10**6, k)
        assert self.got == self.sent and self.gate.pending_events() == 0


def _blocks(accepted: list[tuple[Event, list[tuple[int, str]]]]) -> list[Arrival]:
    """Accepted events (in t1 order) as one table's rows, in blocks per destination."""
    table = pa.table(
        {
            "stream": [e.stream for e, _ in accepted],
            "t0": [e.t0 for e, _ in accepted],
            "t1": [e.t1 for e, _ in accepted],
            **{
                f"{s}/n": pa.array(
                    [e.attrs()["n"] if e.stream == s else None for e, _ in accepted], pa.int64()
                )
                for s in STREAMS
            },
        }
    )
    routes: dict[tuple[int, str], list[int]] = {}
    for i, (_, pairs) in enumerate(accepted):
        for pair in pairs:
            routes.setdefault(pair, []).append(i)
    return list(blocks(table, {p: np.array(rows, np.int64) for p, rows in routes.items()}))


TestEpochGate = EpochGateMachine.TestCase
TestEpochGate.settings = settings(max_examples=300, stateful_step_count=25)


def test_an_epoch_straddling_two_units_leaves_whole_after_one_units_watermark() -> None:
    """Found by the machine: S (minutes) and U (seconds) joined in one group share an epoch at
    t1 = 0; a watermark in minutes closes S's part, and the epoch waits, whole, for U's part
    (routed, so only a watermark for it closes it). The gate stays valid meanwhile."""
    machine = EpochGateMachine()
    machine.join(streams={"S", "U", "T"})
    machine.publish(batch=[(0, [0], "S")], rows=False, owner="alice")
    machine.routed(batch=[(0, [0], "U")], shard=0, watermark=None, rows=True, owner="")
    machine.publish_closing(batch=[(0, [], "S")], watermark=1, owner="bob")
    machine.valid()
    assert machine.got[0] == {}  # neither part left alone
    machine.teardown()
