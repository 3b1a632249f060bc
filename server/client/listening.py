"""What the blocking and the asyncio listener share: where each subscription stands, the
request that resumes them, what a broken stream means, and the alerts' schemas.

Each listener runs its own loop (a thread's or an event loop's) around these: ask
:meth:`Following.request`, read the stream, hand each message's alerts on, and on a
broken stream ask :meth:`Following.broke` whether to reconnect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc

from cesar.automata.schema import StreamSchema
from cesar.client.calls import stream_schema
from cesar.client.errors import Unavailable, from_rpc
from cesar.client.model import Alert
from cesar.client.resume import Positions, Reconnect
from cesar.v1 import cesar_pb2 as pb

log = logging.getLogger("cesar.client")


class Following:
    """One listener's state: :attr:`positions`, how long it reconnects, its deadline, its
    call (to cancel), and ``on_lost``, told once when the server goes away."""

    def __init__(
        self,
        subscriptions: Sequence[str] | None,
        positions: Positions,
        reconnect_for: float,
        timeout: float | None,
    ) -> None:
        self.subscriptions = list(subscriptions or ())
        self.positions = positions
        self.reconnect = Reconnect(reconnect_for)
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.on_lost: Callable[[str], None] = lambda said: None
        self._call: Any = None
        self._closed = False
        self._schemas: dict[str, StreamSchema | None] = {}

    def ack(self, alerts: Iterable[Alert]) -> None:
        """Count ``alerts`` as done now."""
        self.positions.done((a.subscription, a.seq) for a in alerts)

    def close(self) -> None:
        """Stop: cancel the stream and save the checkpoint file."""
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        self.positions.save()

    def request(self) -> tuple[pb.ListenRequest, float | None]:
        """The Listen request resuming every subscription, and the seconds left to run."""
        request = pb.ListenRequest(subscriptions=self.subscriptions, after_seq=self.positions.seqs)
        left = None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)
        return request, left

    def broke(self, error: grpc.RpcError | None) -> bool:
        """The stream ended (``error`` None: the server shut it) or failed: True to reconnect
        (said once a run of failures), False to stop (the deadline, or :meth:`close`).

        Raises the error itself when reconnecting cannot mend it, and
        :class:`~cesar.client.errors.Unavailable` once no server answered for the
        reconnecting time.
        """
        why = "it ended the stream"
        if error is not None:
            code = error.code()
            if code is grpc.StatusCode.DEADLINE_EXCEEDED or self._closed:
                return False
            if code is not grpc.StatusCode.UNAVAILABLE:
                raise from_rpc(error) from None
            why = error.details() or "unavailable"
        try:
            first = self.reconnect.lost()
        except TimeoutError as exc:
            raise Unavailable(str(exc)) from None
        if first:
            said = (
                f"the server went away ({why}); reconnecting for up to "
                f"{self.reconnect.seconds:g} s, each subscription resuming after its last seq"
            )
            log.warning(said)
            self.on_lost(said)
        return not self._closed

    def knows(self, subscription: str) -> bool:
        """Whether the output schema of ``subscription`` is known (or known to be missing)."""
        return subscription in self._schemas

    def learn(self, specs: Mapping[str, str], subscription: str) -> None:
        """Keep the output specs of the caller's subscriptions (``subscription``'s too)."""
        self._schemas.update({sub: stream_schema(spec) for sub, spec in specs.items()})
        self._schemas.setdefault(subscription, None)

    def alert(self, message: pb.Alert) -> Alert:
        """The alert ``message`` carries, with its stream's schema when known."""
        return Alert.of(message, self._schemas.get(message.subscription))
