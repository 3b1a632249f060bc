"""The epoch gate keeps its promise: each shard gets every epoch, whole, in increasing t1."""

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from cesar.automata.schema import Event
from cesar.server.front.epochs import EpochGate

SHARDS = 3
destinations = st.lists(st.integers(0, SHARDS - 1), unique=True, max_size=SHARDS)


class EpochGateMachine(RuleBasedStateMachine):
    """Front-routed batches, feed-routed batches and watermarks, as the front passes them."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = EpochGate(SHARDS)
        self.serial = 0
        self.sent: list[Counter[tuple[int, int]]] = [Counter() for _ in range(SHARDS)]
        self.got: list[Counter[tuple[int, int]]] = [Counter() for _ in range(SHARDS)]
        self.last: list[int | None] = [None] * SHARDS

    def _accept(
        self, t1s: list[tuple[int, list[int]]], watermark: int | None, shard: int | None
    ) -> None:
        arrivals = []
        for t1, targets in sorted(t1s, key=lambda item: item[0]):
            if self.gate.settled(t1, shard) is not None:
                continue  # the front rejects it as late
            self.serial += 1
            event = Event.of("S", t1, t1, {"n": self.serial})
            pairs = [(k, "global") for k in targets if shard is None or k == shard]
            for k, _ in pairs:
                self.sent[k][(t1, self.serial)] += 1
            arrivals.append((event, pairs))
        for k, ready in enumerate(self.gate.advance(arrivals, watermark, shard)):
            epochs = [item.t1 for item in ready]
            assert epochs == sorted(epochs), "released out of order"
            if epochs:
                last = self.last[k]
                assert last is None or epochs[0] > last, f"shard {k} saw epoch {epochs[0]} again"
                self.last[k] = epochs[-1]
            for item in ready:
                self.got[k][(item.t1, dict(item.event.values)["n"])] += 1

    @rule(batch=st.lists(st.tuples(st.integers(0, 20), destinations), max_size=5))
    def publish(self, batch: list[tuple[int, list[int]]]) -> None:
        self._accept(batch, None, None)

    @rule(
        shard=st.integers(0, SHARDS - 1),
        batch=st.lists(st.tuples(st.integers(0, 20), destinations), max_size=5),
        watermark=st.none() | st.integers(0, 20),
    )
    def routed(self, shard: int, batch: list[tuple[int, list[int]]], watermark: int | None) -> None:
        self._accept(batch, watermark, shard)

    @rule(watermark=st.integers(0, 20))
    def watermark(self, watermark: int) -> None:
        self._accept([], watermark, None)

    @invariant()
    def valid(self) -> None:
        self.gate.check_valid()
        for k in range(SHARDS):
            pending = Counter((p.t1, dict(p.event.values)["n"]) for p in self.gate.pending[k])
            assert self.got[k] + pending == self.sent[k], f"shard {k} lost or duplicated events"

    def teardown(self) -> None:
        self._accept([], 10**6, None)
        for k in range(SHARDS):
            self._accept([], 10**6, k)
        assert self.got == self.sent and self.gate.pending_events() == 0


TestEpochGate = EpochGateMachine.TestCase
TestEpochGate.settings = settings(max_examples=200, stateful_step_count=25)
