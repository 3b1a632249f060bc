"""``cesar feed``: the Structured Streaming job between event sources and the server.

docs/design.md, "Feed".  Each micro-batch (:meth:`Feed.process`, a
``foreachBatch`` function on the driver) is one Spark job:

1. the driver fetches the front's routing table and streams (GetRouting,
   ListStreams), so new subscriptions and streams count from the next batch;
2. executors validate their partition's rows, set aside rows at or before the
   previous watermark (late), route the rest and publish each shard its events
   (:func:`cesar.server.feed.send.publish_partition`, Arrow throughout);
3. the driver advances the watermark to ``max(t1) - lateness - 1`` over the
   valid rows seen (with lateness 0 the newest epoch stays open for rows to
   come) and closes the batch on every shard with it: the front applies a
   shard's pending events in ``(t1, arrival)`` order once the watermark passes.
   The close is sent from a thread of its own, and the micro-batch ends
   without waiting for it: the front applies batch N's epochs while Spark
   routes and publishes batch N+1 (whose rows are all after N's watermark:
   the rest are late; the front acknowledges such a piece once logged, not
   after N's apply), and N+1's close may follow N's before N's is applied,
   so the shard goes from one apply to the next without waiting for Spark.
   At most ``CLOSES_IN_FLIGHT`` (2) are in flight: batch N+2's close waits for
   N's, which bounds how far the feed runs ahead of the shards.  Closes only
   raise a shard's watermark (the front keeps the largest), so two in flight
   mean the same whatever order they arrive in.  :meth:`Feed.start` sends the
   newest batch's close again (same idempotency key: a duplicate if it was
   applied; its watermark covers any older close in flight), so a close lost
   in a crash is not lost for good;
4. rejected and late rows go to the dead letter (JSON files, one directory
   per micro-batch, with field and reason); the watermark and counters go to a
   small state file under the checkpoint, named by batch id.

Spark's checkpoint decides which input rows a batch has; a batch Spark runs
again after a crash reads the same rows into the same partitions, starts from
the same state and sends the same idempotency keys, so the server applies
nothing twice and nothing is lost.  Paths go through Spark or the Hadoop
FileSystem API, never the driver's local disk, and executors publish
directly, so the job runs unchanged on a cluster (``--master spark://...``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from cesar.server.feed.rows import Plan
from cesar.server.feed.send import OUTPUT, Target, close_epochs, publish_partition, retrying
from cesar.server.feed.synthetic import SyntheticSource
from cesar.server.host.metrics import Histogram
from cesar.server.wire.client import Connection, list_streams
from cesar.server.wire.eventfile import Ingest
from cesar.v1 import cesar_pb2 as pb

log = logging.getLogger("cesar.feed")

CLOSES_IN_FLIGHT = 2
"""How many micro-batches' closes may be in flight at once (module docstring, step 3)."""
COUNTERS = ("rows", "accepted", "rejected", "late", "unrouted", "sent", "duplicates")
"""The feed's running totals, kept in its state under the checkpoint (so they survive restarts)."""

BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds in seconds of the micro-batch duration histogram."""


@dataclass(frozen=True)
class Options:
    """What ``cesar feed`` was asked to do (its command-line options)."""

    server: str
    source: str
    checkpoint: str
    dead_letter: str
    token: str | None = None
    tls_ca: str | None = None
    master: str | None = None
    lateness: int = 0
    trigger_seconds: float = 1.0
    available_now: bool = False
    format: str = "json"
    csv_columns: tuple[str, ...] = ()
    max_files_per_trigger: int | None = None
    max_rows: int = 50_000
    ingest: Ingest | None = None
    """How CSV rows not written for cesar become events (``run``'s ``--time-column``,
    ``--time-format``, ``--columns``, ``--stream-name``)."""


def under_spark_submit() -> bool:
    """Whether this driver was started by spark-submit (its JVM runs already, with its options)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session(
    master: str | None, app: str = "cesar-feed", spark_log: Path | None = None
) -> SparkSession:
    """The Spark session; ``master`` None leaves it to spark-submit (default ``local[2]``).

    ``spark_log``: the file that takes everything the driver's JVM writes (its
    log at Spark's default level, WARN, and the JVM's own warnings; in local
    mode also the executors' Python workers' standard error), so the feed's
    standard error holds only its JSON log.  None: Spark's errors go to standard
    error.  Under spark-submit the JVM is already running: its options decide.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    submitted = under_spark_submit()
    conf = SparkConf().setAppName(app)
    if master is not None:
        conf.setMaster(master)
    elif not submitted:
        conf.setMaster("local[2]")
    conf.setAll(
        [
            ("spark.driver.extraJavaOptions", "-Xss32m"),
            ("spark.sql.shuffle.partitions", "4"),
            ("spark.ui.showConsoleProgress", "false"),
            ("spark.sql.execution.arrow.maxRecordsPerBatch", "100000"),
            ("spark.sql.files.maxPartitionBytes", str(4 << 20)),
        ]
    )
    if spark_log is not None and not submitted and SparkContext._active_spark_context is None:
        spark_log.parent.mkdir(parents=True, exist_ok=True)
        with open(spark_log, "ab") as sink:  # the JVM keeps its own copy of the descriptor
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                conf, popen_kwargs={"stdout": sink, "stderr": sink}
            )
        SparkContext(conf=conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    if spark_log is None:
        spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SyntheticSource)
    return spark


def source_frame(spark: SparkSession, options: Options) -> DataFrame:
    """The streaming rows: JSON lines as ``raw``; CSV rows as ``m`` (header → cell) and ``raw``."""
    kind, _, rest = options.source.partition(":")
    if kind == "synthetic":
        lines = spark.readStream.format("cesar_synthetic").option("rate", rest or "1000").load()
        return _json(lines)
    if kind == "socket":
        host, _, port = rest.removeprefix("//").rpartition(":")
        lines = spark.readStream.format("socket").option("host", host).option("port", port).load()
        return _json(lines)
    reader = spark.readStream
    if options.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", options.max_files_per_trigger)
    if options.format == "csv":
        columns = options.csv_columns or tuple(
            spark.read.option("header", True).csv(options.source).columns
        )
        schema = ", ".join(f"`{c}` string" for c in columns)
        rows = reader.option("header", True).schema(schema).csv(options.source)
        names = F.array(*[F.lit(c) for c in columns])
        values = F.array(*[F.col(f"`{c}`") for c in columns])
        return rows.select(
            F.map_from_arrays(names, values).alias("m"),
            F.concat_ws(",", *[F.coalesce(F.col(f"`{c}`"), F.lit("")) for c in columns]).alias(
                "raw"
            ),
        )
    return _json(reader.text(options.source))


def _json(lines: DataFrame) -> DataFrame:
    return lines.select(F.col("value").alias("raw"))


class Store:
    """Small files under the checkpoint directory, through Hadoop's FileSystem (any cluster FS)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.jvm: Any = spark._jvm
        self.root = root.rstrip("/")
        conf = spark._jsc.hadoopConfiguration()
        self.fs = self._path("").getFileSystem(conf)

    def _path(self, name: str) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(f"{self.root}/{name}" if name else self.root)

    def read(self, name: str) -> bytes | None:
        """The bytes of ``name``, or None if absent."""
        path = self._path(name)
        if not self.fs.exists(path):
            return None
        stream = self.fs.open(path)
        try:
            return bytes(self.jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` with ``data`` (written aside, then renamed)."""
        final, temporary = self._path(name), self._path(f"{name}.tmp")
        out = self.fs.create(temporary, True)
        out.write(bytearray(data))
        out.close()
        if self.fs.exists(final):
            self.fs.delete(final, True)
        self.fs.rename(temporary, final)

    def numbers(self, directory: str) -> list[int]:
        """The batch numbers named in ``directory`` (``N.json`` or ``N``), ascending."""
        path = self._path(directory)
        if not self.fs.exists(path):
            return []
        names = [status.getPath().getName() for status in self.fs.listStatus(path)]
        return sorted(int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit())

    def delete(self, name: str) -> None:
        self.fs.delete(self._path(name), True)

    def uri(self, name: str) -> str:
        return str(self._path(name).toString())


@dataclass
class State:
    """What a micro-batch leaves for the next: the watermark, the newest t1 seen, counters."""

    watermark: int | None = None
    seen: int | None = None
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))

    def dump(self) -> bytes:
        return json.dumps(
            {"watermark": self.watermark, "seen": self.seen, "totals": self.totals}
        ).encode()

    @staticmethod
    def load(data: bytes | None) -> State:
        if data is None:
            return State()
        raw = json.loads(data)
        totals = dict.fromkeys(COUNTERS, 0) | raw["totals"]
        return State(raw["watermark"], raw["seen"], totals)


class _Phases:
    """Wall seconds of a micro-batch's phases, for the log (the feed is not the core)."""

    def __init__(self) -> None:
        self.start = self.began = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[f"seconds_{phase}"] = round(now - self.start, 3)
        self.start = now

    def total(self) -> float:
        """Seconds since the batch began."""
        return time.perf_counter() - self.began


class Feed:
    """The job: source → :meth:`process` per micro-batch (see the module docstring)."""

    def __init__(self, spark: SparkSession, options: Options) -> None:
        self.spark = spark
        self.options = options
        self.store = Store(spark, options.checkpoint)
        tls_ca = Path(options.tls_ca) if options.tls_ca else None
        self.connection = Connection.open(options.server, options.token, tls_ca)
        known = self.store.read("feed/id")
        if known is None:
            known = uuid.uuid4().hex[:12].encode()
            self.store.write("feed/id", known)
        self.id = known.decode()
        self.last = self.previous()[1]
        """The state the newest micro-batch left (what the metrics show)."""
        self.micro_batches = 0
        """Micro-batches this process ran."""
        self.batch_seconds = Histogram(BATCH_BUCKETS)
        """Wall seconds of each micro-batch this process ran, from its rows to its state."""
        self.routing_version = 0
        self.figures = threading.Lock()
        """Held while a micro-batch's figures above change, and while they are read."""
        self._closer = ThreadPoolExecutor(CLOSES_IN_FLIGHT, thread_name_prefix="feed-close")
        self._closing: deque[Future[int]] = deque()
        """The newest micro-batches' closes, oldest first, while they may be in flight."""

    def start(self) -> StreamingQuery:
        """Send the newest micro-batch's close again (it may have been in flight when the
        feed stopped), then start the streaming query."""
        number, state = self.previous()
        if state.watermark is not None:
            close_epochs(self.target(), self.plan(), str(number), state.watermark)
        writer = (
            source_frame(self.spark, self.options)
            .writeStream.foreachBatch(self.process)
            .option("checkpointLocation", self.store.uri("spark"))
        )
        if self.options.available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self.options.trigger_seconds} seconds")
        return writer.start()

    def plan(self) -> Plan:
        """The front's routing table and input streams, now (waiting out a server restart)."""
        stub, metadata = self.connection.stub, self.connection.metadata
        table = retrying(
            lambda: stub.GetRouting(pb.GetRoutingRequest(), metadata=metadata, timeout=60)
        )
        streams = retrying(lambda: list_streams(stub, metadata, timeout=60))
        return Plan.of(table, streams)

    def previous(self, batch: int | None = None) -> tuple[int, State]:
        """The number of the last batch before ``batch`` (None: of all) and the state it left."""
        earlier = [n for n in self.store.numbers("feed/state") if batch is None or n < batch]
        if not earlier:
            return -1, State()
        return earlier[-1], State.load(self.store.read(f"feed/state/{earlier[-1]}.json"))

    def target(self) -> Target:
        """What executors need to reach the front."""
        return Target(
            address=self.options.server,
            token=self.options.token,
            tls_ca=self.options.tls_ca,
            feed=self.id,
            max_rows=self.options.max_rows,
            lateness=self.options.lateness,
        )

    def process(self, frame: DataFrame, batch: int) -> None:
        """One micro-batch: validate, route, publish, close its epochs, remember."""
        clock = _Phases()
        plan = self.plan()
        _, state = self.previous(batch)
        target = self.target()
        rows = (
            frame.withColumn("arrival", F.monotonically_increasing_id())
            .mapInArrow(
                partial(
                    publish_partition,
                    plan=plan,
                    target=target,
                    batch=batch,
                    watermark=state.watermark,
                    ingest=self.options.ingest,
                ),
                OUTPUT,
            )
            .collect()
        )
        clock.mark("publish")
        summaries = [r for r in rows if r["kind"] == "summary"]
        counts = {name: sum(r[name] for r in summaries) for name in COUNTERS}
        waited = sum(r["waited_us"] for r in summaries) / 1e6
        tops = [r["max_t1"] for r in summaries if r["max_t1"] is not None]
        seen = max([*tops, *([state.seen] if state.seen is not None else [])], default=None)
        watermark = state.watermark
        if tops:
            candidate = max(tops) - self.options.lateness - 1
            watermark = candidate if watermark is None else max(watermark, candidate)
        if watermark is not None and watermark != state.watermark:
            self._closed(keep=CLOSES_IN_FLIGHT - 1)
            self._closing.append(
                self._closer.submit(close_epochs, target, plan, str(batch), watermark)
            )
        clock.mark("close")
        dead = [r for r in rows if r["kind"] == "dead"]
        if dead:
            self.dead_letter(dead, str(batch))
        totals = {name: state.totals[name] + counts[name] for name in COUNTERS}
        last = State(watermark, seen, totals)
        self.store.write(f"feed/state/{batch}.json", last.dump())
        self.forget(batch)
        with self.figures:  # a scrape sees all of a batch's figures or none
            self.last = last
            self.micro_batches += 1
            self.batch_seconds.observe(clock.total())
            self.routing_version = plan.version
        log.info(
            "micro-batch",
            extra={
                "batch": batch,
                "watermark": watermark,
                "routing_version": plan.version,
                **{f"batch_{name}": value for name, value in counts.items()},
                **totals,
                **clock.seconds,
                "seconds_acknowledged": round(waited, 6),
            },
        )

    def dead_letter(self, rows: list[Row], label: str) -> None:
        """Write rejected and late rows, with field and reason, as JSON files of this batch."""
        frame = self.spark.createDataFrame(
            [(label, r["field"], r["reason"], r["raw"]) for r in rows],
            "batch string, field string, reason string, raw string",
        )
        frame.coalesce(1).write.mode("overwrite").json(f"{self.options.dead_letter}/batch={label}")

    def finish(self) -> None:
        """The source is complete: close every epoch up to the newest event seen.

        ``--available-now`` calls this after the last micro-batch; a later run
        on the same checkpoint treats rows at or before that time as late.
        """
        self._closed()
        numbers = self.store.numbers("feed/state")
        if not numbers:
            return
        last = numbers[-1]
        state = State.load(self.store.read(f"feed/state/{last}.json"))
        if state.seen is None or state.seen == state.watermark:
            return
        close_epochs(self.target(), self.plan(), f"{last}.end", state.seen)
        closed = State(state.seen, state.seen, state.totals)
        with self.figures:
            self.last = closed
        self.store.write(f"feed/state/{last}.json", closed.dump())
        log.info("closed", extra={"batch": last, "watermark": closed.watermark, **closed.totals})

    def _closed(self, keep: int = 0) -> None:
        """Wait for the closes in flight but the newest ``keep``, oldest first; raise what
        one raised."""
        while len(self._closing) > keep:
            self._closing.popleft().result()

    def close(self) -> None:
        """Wait for the closes in flight (a failed one is logged: the next start sends the
        newest again), then close the driver's connection to the front."""
        try:
            self._closed()
        except Exception as exc:  # reported, not raised: the feed is stopping either way
            log.warning("the newest close failed; the next start sends it again: %s", exc)
        finally:
            self._closer.shutdown()
            self.connection.close()

    def forget(self, batch: int) -> None:
        """Drop the state files older than the previous batch's."""
        for number in self.store.numbers("feed/state"):
            if number < batch - 1:
                self.store.delete(f"feed/state/{number}.json")
