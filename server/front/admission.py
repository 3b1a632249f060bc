"""Admission: which events of a batch the front takes, and why it refuses the others.

An event is refused when it does not fit its stream (invalid), when its
``t1`` jumps too far ahead (ahead: :meth:`Admission.time_limit`), or when its
shard's epochs up to ``t1`` are already being processed (late: the
:class:`~cesar.server.front.epochs.EpochGate` says so).  A watermark beyond
every stream's time bound refuses the whole batch.

The time bound keeps one mistaken timestamp (2^63-1, milliseconds in a
``[min]`` stream) from making every later event of every client late.  An
event of a stream in a real time unit may be at most
:data:`~cesar.server.front.limits.MAX_CLOCK_SKEW_SECONDS` past the wall clock:
a bound no sequence of requests moves.  A stream the operator declared
*replayed* (``cesar serve --replayed NAME``: its times are a recording's, not
the clock's) may instead go ``max_time_jump`` seconds past its newest event,
whichever is later.  A stream in the abstract tick has no clock: its events
may be at most ``max_time_jump`` ticks past its newest event, and its first at
most that past the newest event of any stream in that unit, or past tick 0.

:class:`Admission` owns ``newest`` (per stream, the newest accepted ``t1``),
saved in checkpoints (:meth:`to_data`, :meth:`restore`).  It does no I/O and
holds no lock: the front calls it under its lock.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import TimeUnit
from cesar.server.front import limits
from cesar.server.front.auth import Client
from cesar.server.front.epochs import EpochGate
from cesar.server.front.errors import (
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    ResourceExhausted,
)
from cesar.server.front.registry import Registry
from cesar.server.wire.arrowevents import Checked
from cesar.server.wire.convert import rejection
from cesar.server.wire.eventfile import tick_time
from cesar.v1 import cesar_pb2 as pb

Refused = Counter[tuple[str, str, str]]
"""Rejections by stream, field and kind (late, ahead, invalid); the stream is ``""`` for an
event naming no input stream (labels stay a closed set, whatever a client names)."""


class Admission:
    """The admission checks of one front; see the module docstring."""

    def __init__(
        self,
        registry: Registry,
        gate: EpochGate,
        max_time_jump: int,
        replayed: frozenset[str] = frozenset(),
    ) -> None:
        self.registry = registry
        self.gate = gate
        self.max_time_jump = max_time_jump
        self.replayed = replayed
        """Input streams whose times may run ahead of the wall clock (a recording's)."""
        self.newest: dict[str, int] = {}
        """Per input stream, the newest accepted (or replayed) ``t1``."""

    def to_data(self) -> dict[str, int]:
        """``newest``, for a checkpoint."""
        return dict(self.newest)

    def restore(self, data: Mapping[str, int]) -> None:
        """Take ``newest`` from a checkpoint."""
        self.newest = dict(data)

    def saw(self, stream: str, t1: int) -> None:
        """Note an accepted (or replayed) event's time: its stream's newest ``t1``."""
        self.newest[stream] = max(self.newest.get(stream, t1), t1)

    def accept(
        self, request: pb.PublishRequest, checked: Checked, shard: int | None
    ) -> tuple[pb.PublishResponse, pa.Table, Refused]:
        """Admit a batch's checked rows (its watermark is ``request``'s): the response
        (rejections), the accepted rows in (t1, arrival) order, and the rejections by stream,
        field and kind.  ``shard`` is the shard the feed routed the batch to (None: the
        front routes it), which decides when a row is late (:meth:`_late_bounds`).

        Python runs once per stream and once per rejected row, never per accepted row.
        """
        response = pb.PublishResponse()
        refused: Refused = Counter()
        failed: list[tuple[int, pb.Rejection, str, str]] = [
            (index, rejection(index, error), self._stream_label(error.stream), "invalid")
            for index, error in checked.errors
        ]
        table = in_order(checked.table)
        streams = table.column("stream")
        t1s = table.column("t1").to_numpy()
        index = table.column("index").to_numpy()
        now = time.time()
        keep = np.ones(table.num_rows, bool)
        fine: dict[str, int] = {}
        late: list[tuple[str, np.ndarray]] = []
        names = pc.unique(streams).to_pylist()
        for name in names:
            mine = (
                np.ones(table.num_rows, bool)  # one stream: every row is its
                if len(names) == 1
                else np.asarray(pc.equal(streams, name).to_numpy(zero_copy_only=False), bool)
            )
            limit = self.time_limit(name, now)
            ahead = mine & (t1s > limit)
            for i in np.flatnonzero(ahead).tolist():
                reason = self.ahead_reason(int(t1s[i]), limit)
                failed.append(
                    (int(index[i]), pb.Rejection(field="t1", reason=reason), name, "ahead")
                )
            ok = mine & ~ahead
            if ok.any():
                fine[name] = int(t1s[ok].max())
            late.append((name, ok))
            keep &= ~ahead
        if request.watermark:
            self.check_watermark(request.watermark, fine, now)
        for name, ok in late:
            settled, horizon = self._late_bounds(name, shard)
            behind = np.zeros_like(ok)
            if settled is not None:
                behind |= ok & (t1s <= settled)
            if horizon is not None:
                behind |= ok & (t1s < horizon)
            unit = self.registry.inputs[name].unit
            for i in np.flatnonzero(behind).tolist():
                t1 = int(t1s[i])
                marks = [settled if settled is not None and t1 <= settled else None]
                marks.append(horizon if horizon is not None and t1 < horizon else None)
                mark = max(m for m in marks if m is not None)
                reason = late_reason(t1, mark, shard, unit)
                rejected = pb.Rejection(field="t1", reason=reason)
                failed.append((int(index[i]), rejected, name, "late"))
            keep &= ~behind
            accepted = ok & ~behind
            if accepted.any():
                self.saw(name, int(t1s[accepted].max()))
        for i, message, stream, kind in sorted(failed, key=lambda item: item[0]):
            message.index = i
            response.rejected.append(message)
            refused[stream, _label(message.field), kind] += 1
        return response, table if keep.all() else table.filter(pa.array(keep)), refused

    def _late_bounds(self, stream: str, shard: int | None) -> tuple[int | None, int | None]:
        """(settled, horizon): a row of ``stream`` is late when its ``t1`` is at or before
        ``settled`` or before ``horizon`` (None: no bound).  For the front's own routing
        (``shard`` None) every shard counts, and the newest ``t1`` of the stream's clock
        group (a later epoch is open); a routed batch's row is late on its shard only once a
        watermark closed its epoch or a later epoch of its group was applied there
        (:meth:`~cesar.server.front.epochs.EpochGate.settled`, for every ``t1`` at once)."""
        if shard is None:
            return self.gate.front_bounds(stream)
        return self.gate.routed_bound(stream, shard), None

    def _stream_label(self, stream: str | None) -> str:
        """The stream a rejection is counted under: an input stream's name, else ``""``."""
        return stream if stream is not None and stream in self.registry.inputs else ""

    def check_watermark(self, watermark: int, fine: Mapping[str, int], now: float) -> None:
        """InvalidArgument if ``watermark`` is beyond every stream's time bound.

        A watermark closes epochs of every stream; one far in the future would
        make every later event late, as a wrong timestamp would.  It may be at
        most as far ahead as :meth:`time_limit` lets some input stream's events
        be, this request's events included (``fine``: the newest ``t1`` per
        stream of its events in time).
        """
        latest = [self.time_limit(name, now) for name in self.registry.inputs]
        latest += [
            t1 + self._bound(stream) for stream, t1 in fine.items() if not self._clocked(stream)
        ]
        if latest and watermark > max(latest):
            raise InvalidArgument(
                f"watermark {watermark} is ahead of every stream's time bound (at most "
                f"{max(latest)}: {limits.MAX_CLOCK_SKEW_SECONDS} s past the clock, or "
                f"{self.max_time_jump} s past the newest event of a stream without a clock "
                "or replayed): a wrong timestamp or unit? (cesar serve --max-time-jump, "
                "--replayed)"
            )

    def _clocked(self, stream: str) -> bool:
        """Whether ``stream``'s events are bounded by the wall clock alone."""
        seconds = self.registry.inputs[stream].unit.seconds
        return seconds is not None and stream not in self.replayed

    def _bound(self, stream: str) -> int:
        """``max_time_jump`` in ``stream``'s unit (ticks for the abstract tick)."""
        seconds = self.registry.inputs[stream].unit.seconds
        return self.max_time_jump if seconds is None else int(self.max_time_jump / seconds)

    def time_limit(self, stream: str, now: float) -> int:
        """The latest ``t1`` ``stream`` accepts now (see the module docstring)."""
        unit = self.registry.inputs[stream].unit
        marks = []
        if stream in self.newest and not self._clocked(stream):
            marks.append(self.newest[stream] + self._bound(stream))
        if unit.seconds is not None:
            marks.append(int((now + limits.MAX_CLOCK_SKEW_SECONDS) / unit.seconds))
        elif stream not in self.newest:
            same = [
                t1
                for name, t1 in self.newest.items()
                if name in self.registry.inputs and self.registry.inputs[name].unit == unit
            ]
            marks.append(max(same, default=0) + self._bound(stream))
        return max(marks)

    def ahead_reason(self, t1: int, limit: int) -> str:
        return (
            f"t1 = {t1} is more than {limits.MAX_CLOCK_SKEW_SECONDS} s ahead of the clock (a "
            f"stream with a time unit), or jumps more than {self.max_time_jump} s ahead of "
            f"the stream's newest event (a stream without a unit, or replayed; at most t1 = "
            f"{limit} in its unit): a wrong timestamp or unit? (cesar serve --max-time-jump, "
            "--replayed)"
        )


def in_order(table: pa.Table) -> pa.Table:
    """``table``'s rows in (t1, arrival) order, stably; ``table`` itself when they are (a
    turn cut by :func:`~cesar.server.front.columns.in_turns` is): two numpy passes instead
    of a sort and a copy of every column.

    >>> t = pa.table({"t1": [1, 1, 2], "arrival": [0, 3, 1]})
    >>> in_order(t) is t, in_order(t.take([1, 0, 2])).column("arrival").to_pylist()
    (True, [0, 3, 1])
    """
    t1 = table.column("t1").to_numpy()
    step = np.diff(t1)
    if np.all((step > 0) | ((step == 0) & (np.diff(table.column("arrival").to_numpy()) >= 0))):
        return table
    return table.take(pc.sort_indices(table, [("t1", "ascending"), ("arrival", "ascending")]))


def check_request(
    client: Client, request: pb.PublishRequest, shards: int
) -> tuple[str, int | None]:
    """A publish request's checks before anything is decoded: its size, its idempotency key,
    the scope its routing needs and the shard count it was routed for; (the key scoped to
    ``client``, the shard it was routed to or None)."""
    if len(request.events) > limits.MAX_PUBLISH_EVENTS:
        raise ResourceExhausted(
            f"{len(request.events)} events in one request; the limit is "
            f"{limits.MAX_PUBLISH_EVENTS}: send smaller batches"
        )
    if len(request.idempotency_key.encode()) > limits.MAX_KEY_BYTES:
        raise InvalidArgument(f"idempotency_key is longer than {limits.MAX_KEY_BYTES} bytes")
    shard = request.shard if request.HasField("shard") else None
    if shard is not None and not client.may("feed"):
        raise PermissionDenied("batches routed to a shard come from the feed: scope=feed")
    if shard is None and not client.may("client"):
        raise PermissionDenied(
            "a feed token publishes batches it routed to one shard (GetRouting); "
            "events the front routes need scope=client"
        )
    if shard is not None and (request.shards != shards or shard >= request.shards):
        raise FailedPrecondition(
            f"the batch was routed for shard {shard} of {request.shards}; this server has "
            f"{shards} shards: fetch the routing table again (GetRouting)"
        )
    key = request.idempotency_key
    return (f"{len(client.name)}:{client.name}:{key}" if key else ""), shard


def check_held(client: Client, gate: EpochGate) -> None:
    """Refuse a batch with events while ``client`` has its budget of events waiting in open
    epochs of ``gate`` (``max_open_epoch_events``; checked at a request's first turn, and the
    request may then take the count past it by its own events).  O(1), under the front's
    lock."""
    budget = client.limits.max_open_epoch_events
    held = gate.held_by(client.name)
    if budget and held >= budget:
        raise ResourceExhausted(
            f"{client.name} has {held} events waiting in open epochs (counted once for each "
            f"shard they wait for), the limit (max_open_epoch_events {budget}): close them "
            "first, with a watermark or events of a later t1"
        )


def late_reason(t1: int, settled: int, shard: int | None, unit: TimeUnit) -> str:
    """Why an event at ``t1`` is late: epochs up to ``settled`` are being processed; times in
    ticks, and in ISO 8601 (UTC) for a stream with a calendar unit.  At ``settled`` itself
    the likely cause is a slice of an epoch after a publish that closed it, and it says so.

    >>> print(late_reason(26728651, 26728845, None, TimeUnit.MIN).replace(", ", ",\\n"))
    late: t1 = 26728651 (2020-10-26T13:31Z),
    but events up to t1 = 26728845 (2020-10-26T16:45Z) are already being processed
    """
    where = "" if shard is None else f" on shard {shard}"
    why = (
        " (an earlier publish closed its epoch: publish the slices of one epoch with close=False,"
        " or `cesar publish --keep-open`, and close with the last)"
        if t1 == settled
        else ""
    )
    return (
        f"late: t1 = {tick_time(t1, unit)}, but events up to t1 = {tick_time(settled, unit)} "
        f"are already being processed{where}{why}"
    )


FIELDS = frozenset({"stream", "t0", "t1", "attributes"})
"""The field labels rejections are counted under: a closed set, whatever a client names."""


def _label(field: str) -> str:
    """The counted label of a rejected field: an attribute's name becomes ``attributes``."""
    return field if field in FIELDS else "attributes"
