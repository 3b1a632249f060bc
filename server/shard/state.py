"""A shard's state: its lanes (one engine each), the subscriptions installed on them, the
epochs applied to them and their snapshots (:class:`ShardState`); the process around it is
:mod:`cesar.server.shard.process`, its service :mod:`cesar.server.shard.service`.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from cesar.automata.schema import Event, StreamSchema, epochs, parse_stream_spec
from cesar.automata.shape import QueryCache
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.sharing import placed
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from cesar.server.host import snapshots
from cesar.server.host.rss import rss_bytes
from cesar.server.host.snapshots import SnapshotError
from cesar.server.shard.lanes import Lane, Responses, emit
from cesar.server.wire.alertbytes import notice_body
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.source import Source, compile_source, parse_source
from cesar.v1 import shard_pb2


class ShardState:
    """The lanes of one shard; install / remove subscriptions and apply epochs.

    At most ``max_alerts_per_epoch`` alerts and ``max_alert_bytes_per_epoch``
    bytes of alerts of one subscription leave one epoch (None: no limit); the
    rest are counted (``alerts_dropped``) and the subscription gets one notice,
    and another only after it has recovered (:meth:`Lane.settle`).  The limits
    follow the event log, so a restart that replays it sends the same alerts.
    """

    def __init__(
        self,
        options: EngineOptions,
        max_alerts_per_epoch: int | None = None,
        directory: Path | None = None,
        max_alert_bytes_per_epoch: int | None = None,
    ) -> None:
        self.options = options
        self.max_alerts_per_epoch = max_alerts_per_epoch
        self.max_alert_bytes_per_epoch = max_alert_bytes_per_epoch
        self.directory = directory
        self.alerts_dropped = 0
        self.events_decoded = 0
        """Events made from Apply requests: a lane table sent for several lanes of one request
        (a key-partitioned lane and a global one) is decoded once, its events shared."""
        self.lanes: dict[str, Lane] = {}
        self.output: dict[str, tuple[str, str]] = {}
        self.queries = QueryCache()
        self.loaded: dict[str, tuple[RunSnapshot, dict[str, int]]] | None = None
        self.place = (0, 1)
        """(this shard's index, the shard count) in the front's order, from its last Load."""
        self.server = 0
        """The identity of the server whose front sent the last Load (0: none given)."""
        self.held: dict[str, list[Event]] = {}
        """Per lane, the events of an epoch that came in parts (``continued``), until its last."""
        self._schemas: dict[str, StreamSchema] = {}

    def _schema(self, spec: str) -> StreamSchema:
        """The schema of ``spec``, parsed once per distinct spec."""
        schema = self._schemas.get(spec)
        if schema is None:
            schema = self._schemas[spec] = parse_stream_spec(spec)
        return schema

    def install(self, request: shard_pb2.InstallRequest) -> None:
        """Build and subscribe a query in its lane, from the algebra the front compiled (or,
        for a CEL query of a shape seen before, from its shape's template)."""
        schemas = {s.name: s for s in map(self._schema, request.stream_specs)}
        algebra = request.algebra if request.HasField("algebra") else None
        parsed = parse_source(Source(request.shape_text, algebra))
        query = compile_source(parsed, schemas, request.name, self.queries)
        saved = self.loaded.get(request.lane) if self.loaded is not None else None
        since = None
        if self.loaded is not None:
            if saved is None or request.subscription not in saved[0].since:
                raise SnapshotError(
                    f"subscription {request.subscription} is not in the loaded snapshot's "
                    f"lane {request.lane}"
                )
            since = saved[0].since[request.subscription]
        lane = self.lanes.get(request.lane)
        if lane is None:
            lane = self.lanes[request.lane] = Lane(Engine(self.options))
            if saved is not None:
                prepare(lane.engine, saved[0])
        client = (request.client, request.client_steps) if request.client_steps else None
        lane.engine.subscribe(request.subscription, query.automata, since, query.pattern, client)
        lane.add(query.name, request.subscription)
        self.output[request.subscription] = (request.lane, query.name)

    def remove(self, request: shard_pb2.RemoveRequest) -> None:
        """Unsubscribe a query from its lane."""
        lane_name, stream = self.output.pop(request.subscription)
        lane = self.lanes[lane_name]
        lane.engine.unsubscribe(request.subscription)
        lane.remove(stream)

    def apply(self, request: shard_pb2.ApplyRequest) -> list[bytes]:
        """Process each lane's epochs in order; the alerts made, in order, in serialized
        ApplyResponse messages of at most about :data:`~cesar.server.shard.lanes.RESPONSE_BYTES`
        each.  A lane's last
        epoch marked ``continued`` is held until the message with its last part, then
        processed whole."""
        out = Responses()
        decoded: tuple[bytes, list[Event]] | None = None
        for lane_events in request.lanes:
            lane = self.lanes.get(lane_events.lane)
            if lane is None:
                continue
            engine = lane.engine
            if lane_events.arrow:
                # Only a feed's routed pieces come as Arrow: pyarrow and numpy (0.13 CPU-s, a
                # third of a shard's start) are imported off the start, by the warm-up thread
                from cesar.server.wire.arrowevents import lane_table_events

                data = lane_events.arrow
                if decoded is None or decoded[0] != data:
                    decoded = (data, lane_table_events(data))
                    self.events_decoded += len(decoded[1])
                events = decoded[1]
            else:
                events = [trusted_event(e) for e in lane_events.events]
                self.events_decoded += len(events)
            events = self.held.pop(lane_events.lane, []) + events
            if lane_events.continued and events:
                last = len(events)
                while last and events[last - 1].t1 == events[-1].t1:
                    last -= 1
                events, self.held[lane_events.lane] = events[:last], events[last:]
            for epoch in epochs(events):
                self.alerts_dropped += emit(
                    lane,
                    engine.process_matches(epoch),
                    out,
                    self.max_alerts_per_epoch,
                    self.max_alert_bytes_per_epoch,
                )
                for notice in engine.notices:
                    out.add(notice.subscription, notice_body(notice.reason))
                engine.notices.clear()
        return out.messages()

    def snapshot(self, position: int, keep: set[int]) -> int:
        """Save every lane's run state as the snapshot at ``position``; its size in bytes.

        The snapshot names :attr:`place` and :attr:`server`, so it is never loaded in another
        place nor by another server.  Deletes the
        snapshots at positions not in ``keep``.
        """
        assert not self.held, "a snapshot between the parts of an epoch"
        directory = self._directory()
        data = {
            "place": list(self.place),
            "server": self.server,
            "alerts_dropped": self.alerts_dropped,
            "lanes": {
                name: {"run": capture(lane.engine).to_data(), "capped": dict(lane.capped)}
                for name, lane in self.lanes.items()
            },
        }
        size = snapshots.write(directory, position, data)
        snapshots.prune(directory, keep | {position})
        return size

    def load(self, position: int, place: tuple[int, int] = (0, 1), server: int = 0) -> None:
        """Drop every lane; hold the snapshot at ``position`` (0: none) for the installs that
        follow.  Raises SnapshotError (the shard stays empty) for one that cannot be used:
        damaged, written in another ``place`` (shard index, shard count) — a snapshot
        copied from another shard's directory, or shards given in another order — or by
        another ``server`` (another deployment's snapshot at the same place)."""
        self.lanes.clear()
        self.output.clear()
        self.held.clear()
        self.alerts_dropped = 0
        self.loaded = None
        self.place = place
        self.server = server
        if not position:
            return
        data = snapshots.read(self._directory(), position)
        by = data.get("server") if isinstance(data, dict) else None
        if by is not None and by != server:
            raise SnapshotError(
                f"it was written by another server (identity {by}, this one's {server}): a "
                "snapshot of another deployment, or a data directory shared by two servers?"
            )
        written = data.get("place") if isinstance(data, dict) else None
        if written is not None and written != list(place):
            raise SnapshotError(
                f"it was written in another place (shard, shard count: {written}) than this "
                f"shard's {list(place)}: a snapshot copied from another shard, or shards given "
                "in another order?"
            )
        try:
            loaded = {
                name: (RunSnapshot.from_data(lane["run"]), _capped(lane["capped"]))
                for name, lane in data["lanes"].items()
            }
            dropped = int(data["alerts_dropped"])
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SnapshotError(f"damaged: unexpected content ({exc!r})") from None
        self.loaded, self.alerts_dropped = loaded, dropped

    def resume(self) -> int:
        """Restore the loaded snapshot's run state into the lanes installed since; the number
        of live instances."""
        for name, (saved, capped) in (self.loaded or {}).items():
            lane = self.lanes.get(name)
            if lane is not None:
                restore(lane.engine, saved)
                subscriptions = set(lane.streams.values())
                lane.capped = {s: n for s, n in capped.items() if s in subscriptions}
        self.loaded = None
        return sum(len(lane.engine.state.instances) for lane in self.lanes.values())

    def _directory(self) -> Path:
        if self.directory is None:
            raise SnapshotError("this shard was started without --data-dir")
        return self.directory

    def counters(self) -> dict[str, int]:
        """Engine counters summed over lanes, plus live instances, nodes, subscriptions, lanes,
        the queries installed from their shape's template (bound) or built in full, and the
        planner's figures (planned pattern subscriptions, switches, lazy runs' holdings)."""
        total: dict[str, int] = {
            "lanes": len(self.lanes),
            "instances": 0,
            "nodes": 0,
            "rss_bytes": rss_bytes(),
            "alerts_dropped": self.alerts_dropped,
            "events_decoded": self.events_decoded,
            "subscriptions": 0,
            "queries_bound": self.queries.counters["bound"],
            "queries_compiled": self.queries.counters["compiled"],
        }
        for lane in self.lanes.values():
            engine = lane.engine
            for f in fields(engine.counters):
                total[f.name] = total.get(f.name, 0) + int(getattr(engine.counters, f.name))
            total["instances"] += len(engine.state.instances)
            total["subscriptions"] += len(engine.subscriptions)
            total["nodes"] += len(engine.program.dag.nodes)
            for name, value in engine.planner.figures().items():
                total[name] = total.get(name, 0) + value
            total["arithmetic_faults"] = (
                total.get("arithmetic_faults", 0) + engine.faults.arithmetic
            )
        return total

    def plans(self) -> dict[str, str]:
        """Per planned pattern subscription, the plan it runs now and why."""
        out: dict[str, str] = {}
        for lane in self.lanes.values():
            for subscription in lane.engine.planner.planned:
                described = lane.engine.planner.describe(subscription)
                assert described is not None
                out[subscription] = described
        return out

    def place_of(self, subscription: str) -> shard_pb2.PlaceResponse:
        """Where ``subscription`` sits here: its template edges (:meth:`edges_of`), the
        partial matches it holds, the steps charged to it in the latest epoch, its budgets."""
        engines = [lane.engine for lane in self.lanes.values()]
        mine = [e for e in engines if subscription in e.program]
        return shard_pb2.PlaceResponse(
            edges=self.edges_of(subscription),
            held=sum(e.held(subscription) for e in mine),
            steps=sum(e.work.steps_of(subscription) for e in mine),
            instance_limit=self.options.max_instances_per_subscription or 0,
            step_limit=self.options.max_steps or 0,
        )

    def edges_of(self, subscription: str) -> list[shard_pb2.PlacedEdge]:
        """The template edges ``subscription`` uses in each lane, with their sharers."""
        return [
            shard_pb2.PlacedEdge(
                lane=name,
                edge=edge,
                source=source,
                target=target,
                kind=kind,
                stream=stream,
                template=template,
                sharers=sharers,
            )
            for name, lane in sorted(self.lanes.items())
            for edge, source, target, kind, stream, template, sharers in placed(
                lane.engine, subscription
            )
        ]


def _capped(saved: object) -> dict[str, int]:
    """A snapshot's capped subscriptions: a map to calm epochs (a list in older snapshots)."""
    if isinstance(saved, dict):
        return {str(s): int(n) for s, n in saved.items()}
    if isinstance(saved, list):
        return {str(s): 0 for s in saved}
    raise TypeError(f"capped is a {type(saved).__name__}")
