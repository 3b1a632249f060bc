"""Remembered (server/engine/remembered.py) against a model: per stream a list of events.

A Hypothesis state machine remembers events of two streams (their ``t0`` not
always in arrival order, names repeating), adds past events as a plan that looked
back does, forgets by time and by limit, and asks for the events of a value,
first before any bucket exists and then with the buckets kept up to date; every
answer must equal the model's, and ``check_valid()`` runs after every step.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cesar.automata.schema import Event
from cesar.server.engine.remembered import Remembered

STREAMS = st.sampled_from(["S", "T"])
NAMES = st.sampled_from(["IBM", "SUN", "HP"])
EVENTS = st.builds(
    lambda stream, t0, span, name: Event(stream, t0, t0 + span, (("Name", name),)),
    STREAMS,
    st.integers(0, 40),
    st.integers(0, 3),
    NAMES,
)


class RememberedMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.memory = Remembered()
        self.model: dict[str, list[Event]] = {}

    @rule(event=EVENTS)
    def remember(self, event):
        self.memory.remember(event)
        self.model.setdefault(event.stream, []).append(event)

    @rule(events=st.lists(EVENTS, max_size=4))
    def remember_past(self, events):
        self.memory.remember_past(events)
        for stream in {e.stream for e in events}:
            mine = [e for e in events if e.stream == stream]
            self.model[stream] = sorted({*self.model.get(stream, ()), *mine}, key=lambda e: e.t1)

    @rule(stream=STREAMS, t0=st.integers(0, 45))
    def forget_before(self, stream, t0):
        self.memory.forget_before(stream, t0)
        kept = self.model.get(stream, [])
        while kept and kept[0].t0 < t0:
            kept.pop(0)

    @rule(stream=STREAMS, limit=st.integers(0, 6))
    def forget_beyond(self, stream, limit):
        kept = self.model.get(stream, [])
        over = max(len(kept) - limit, 0)
        assert self.memory.forget_beyond(stream, limit) == over
        del kept[:over]

    @rule(stream=STREAMS, name=NAMES)
    def recalled(self, stream, name):
        found = list(self.memory.recalled(stream, "Name", name))
        assert found == [e for e in self.model.get(stream, []) if e.attrs()["Name"] == name]

    @invariant()
    def agrees(self):
        self.memory.check_valid()
        streams = {s: list(events) for s, events in self.model.items() if events}
        assert dict((s, list(events)) for s, events in self.memory.items()) == streams
        for stream in ("S", "T"):
            assert list(self.memory.events(stream)) == streams.get(stream, [])


TestRememberedMachine = RememberedMachine.TestCase
