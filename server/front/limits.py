"""Every limit the server enforces, with its default (docs/operations.md, "Limits").

One client must not be able to hurt the others: each limit bounds what one
request, one client, one subscription or one engine may take.  All are
overridable on ``cesar serve`` (per client also in the tokens file); 0 turns a
limit off where the flag says so.
"""

MAX_SUBSCRIPTIONS = 100_000
"""Live subscriptions one client may hold."""
MAX_QUERY_BYTES = 65_536
"""Bytes of one query (CEL text or Algebra message) plus its name."""
MAX_LISTENS = 64
"""Listen streams one client may hold open."""
MAX_STREAMS = 1_000
"""Input streams one client may define."""
MAX_READERS = 100
"""Clients one published stream may be shared with."""

MAX_INSTANCES_PER_SUBSCRIPTION = 50_000
"""Live partial matches one subscription may hold (one shared with others counted whole for
each), before its oldest are dropped (from it alone): high enough for an ordinary query over a
busy stream (thousands of open partial matches), low enough that a runaway one
(``PATTERN AND(Stock a, Stock b, Stock c, Stock d, Stock e)``, whose partial matches grow
with every event) holds a bounded share of a shard's memory and of its epochs' work."""
MAX_INSTANCES = 1_000_000
"""Live partial matches one engine (a lane of a shard) may hold."""
MAX_STEPS_PER_EPOCH = 50_000
"""The work one subscription may cause in one epoch, in steps: on the DAG, instances tested
and made and matches (a shared one charged whole to each subscription sharing it), past which
the subscription is cut for the rest of the epoch; for a planned pattern, the candidates and
matches its recomputing searches look at, past which the search stops.  One notice per
episode.  About 0.4 s of one core at most (the five-way AND above, measured): no
subscription's query is everyone's latency."""
MAX_CLIENT_STEPS_PER_EPOCH = 50_000
"""The work one client's subscriptions may take together in one epoch of an engine lane, in
steps, each shared one counted once: past it, each of them that took its share (the budget
over the client's subscriptions at work, at most 1/100 of it) is cut for the rest of the
epoch, so a client cannot hold everyone's epoch with a thousand subscriptions, each within
its own budget (at most about twice this, about 1 s of one core).  Per client in the tokens
file."""
MAX_ENGINE_STEPS_PER_EPOCH = 200_000
"""The work of one engine (a shard's lane) in one epoch, in steps, each shared one counted
once: past it, as a client's budget does, each subscription that took its share is cut for
the rest of the epoch, so that many clients, each within its budget, do not hold an epoch
for everyone either (at most about twice this)."""
MAX_ALERTS_PER_EPOCH = 1_000
"""Alerts one subscription may make from one epoch; the rest are dropped, with a notice."""
MAX_ALERT_BYTES_PER_EPOCH = 16 << 20
"""Bytes of the alerts one subscription may make from one epoch; the rest are dropped, with a
notice (so no epoch's answer from a shard, nor its log entry, grows without bound)."""

MAX_OPEN_EPOCH_EVENTS = 1_000_000
"""Events of one client's batches waiting in open epochs at the front, counted once for each
shard they wait for: events of a ``t1`` nothing later has closed yet, or the feed's routed
pieces before their watermark.  A request with events is refused while its client holds this
many (it may take the count past it by its own events, at most ``MAX_PUBLISH_EVENTS`` a
shard), so one client sending one ``t1`` forever, or pieces without a watermark, holds a
bounded share of the front's memory.  Well above a feed micro-batch's rows; per client in the
tokens file (the feed's token above its largest micro-batch)."""
MAX_PUBLISH_EVENTS = 100_000
"""Events plus Arrow rows in one Publish or PublishBatch request."""
BATCHES_IN_FLIGHT = 4
"""Batches sent to the shards and not yet logged: the front runs this far ahead of them."""
EVENTS_PER_TURN = 1_000
"""Events of one request taken under the front's lock at a time (cut between epochs), each
turn logged as its own batch: another client's small batch waits for one turn, not for a
whole 100,000-event request."""
MAX_REQUEST_BYTES = 64 << 20
"""Bytes of one request as the server reads it: a gRPC message after gRPC's decompression,
and an Arrow piece's buffers after Arrow's (counted from its headers, before decompressing)."""

MAX_TIME_JUMP_SECONDS = 86_400
"""How far ahead an event's t1 may be of its stream's newest event."""
MAX_CLOCK_SKEW_SECONDS = 300
"""How far ahead of the wall clock an event's t1 may be, on a stream in a real time unit."""
MAX_BATCH_COMPILE_SECONDS = 60
"""Seconds one SubscribeBatch may spend compiling before it is stopped, nothing registered."""
COMPILE_WORKERS = 2
"""Processes the front compiles queries in (Subscribe, SubscribeBatch, Explain), off its event
path; a batch takes one for a chunk of queries at a time."""
MAX_KEY_BYTES = 200
"""Bytes of one idempotency key (of a Publish or a Subscribe request)."""
MAX_SUBSCRIBE_BATCH = 10_000
"""Subscriptions in one SubscribeBatch request."""
