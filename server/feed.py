"""``cesar feed``: the Structured Streaming job between event sources and the server.

ARCHITECTURE.md, "Feed".  Each micro-batch (:meth:`Feed.process`, a
``foreachBatch`` function on the driver):

1. fetches the front's routing table and streams (GetRouting, ListStreams),
   so new subscriptions and streams count from the next micro-batch;
2. validates and routes the rows on executors (:func:`server.feedrows.prepare`,
   Arrow, through ``mapInArrow``);
3. advances the watermark to ``max(t1) - lateness - 1`` over the valid rows
   seen (so with lateness 0 the newest epoch stays open for rows to come);
   rows at or before the previous watermark are late;
4. writes rejected and late rows to the dead letter (JSON files, one
   directory per micro-batch, with field and reason);
5. releases the rows the watermark passed — this batch's and those held from
   earlier ones — to their shards, partitioned by shard and sorted by
   ``(t1, arrival)`` (:func:`server.feedsend.send`, on executors);
6. keeps the rest as held rows (Parquet) and the watermark and counters as a
   small state file, both under the checkpoint directory, named by batch id.

Spark's checkpoint (offsets and commits) decides which input rows a batch
has; a batch Spark runs again after a crash reads the same rows and the same
state of the previous batch and sends the same idempotency keys, so the
server applies nothing twice and nothing is lost.  All paths go through
Spark or the Hadoop FileSystem API, never the driver's local disk, so the job
runs unchanged on a cluster (``--master spark://...``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from cesar.v1 import cesar_pb2 as pb
from server.client import Connection
from server.feedrows import NOWHERE, REJECTED, Plan, prepare
from server.feedsend import ACKS, Target, send
from server.synthetic import SyntheticSource

log = logging.getLogger("cesar.feed")

COUNTERS = ("rows", "accepted", "rejected", "late", "sent", "duplicate_messages", "unrouted")


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


def session(master: str | None, app: str = "cesar-feed") -> SparkSession:
    """The Spark session; ``master`` None leaves it to spark-submit (default ``local[2]``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    elif "SPARK_MASTER" not in os.environ and "spark.master" not in os.environ.get(
        "PYSPARK_SUBMIT_ARGS", ""
    ):
        builder = builder.master("local[2]")
    spark = (
        builder.config("spark.driver.extraJavaOptions", "-Xss32m")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SyntheticSource)
    return spark


def source_frame(spark: SparkSession, options: Options) -> DataFrame:
    """The streaming rows as ``m`` (``map<string, string>``) and ``raw`` (the input text)."""
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
    return lines.select(
        F.from_json("value", "map<string,string>").alias("m"), F.col("value").alias("raw")
    )


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
    """What a micro-batch leaves for the next: the watermark, held rows and counters."""

    watermark: int | None = None
    held_max: int | None = None
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))

    def dump(self) -> bytes:
        return json.dumps(
            {"watermark": self.watermark, "held_max": self.held_max, "totals": self.totals}
        ).encode()

    @staticmethod
    def load(data: bytes | None) -> State:
        if data is None:
            return State()
        raw = json.loads(data)
        totals = dict.fromkeys(COUNTERS, 0) | raw["totals"]
        return State(raw["watermark"], raw["held_max"], totals)


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

    def start(self) -> StreamingQuery:
        """Start the streaming query."""
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
        """The front's routing table and input streams, now."""
        stub, metadata = self.connection.stub, self.connection.metadata
        table = stub.GetRouting(pb.GetRoutingRequest(), metadata=metadata, timeout=60)
        streams = stub.ListStreams(pb.ListStreamsRequest(), metadata=metadata, timeout=60)
        return Plan.of(table, list(streams.streams))

    def previous(self, batch: int) -> tuple[int, State]:
        """The number of the last batch before ``batch`` and the state it left."""
        earlier = [n for n in self.store.numbers("feed/state") if n < batch]
        if not earlier:
            return -1, State()
        return earlier[-1], State.load(self.store.read(f"feed/state/{earlier[-1]}.json"))

    def process(self, frame: DataFrame, batch: int) -> None:
        """One micro-batch: validate, route, order, deliver, remember (module docstring)."""
        plan = self.plan()
        before, state = self.previous(batch)
        lateness = self.options.lateness
        routed = (
            frame.withColumn("arrival", F.monotonically_increasing_id())
            .mapInArrow(partial(prepare, plan=plan, batch=batch), plan.spark_schema())
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        try:
            valid = F.col("shard") != REJECTED
            late = valid & (F.col("t1") <= state.watermark) if state.watermark is not None else None
            on_time = valid if late is None else valid & ~late
            first = F.col("first")
            summary = routed.agg(
                F.count(F.when(first, 1)).alias("rows"),
                F.count(F.when(first & ~valid, 1)).alias("rejected"),
                (F.count(F.when(first & late, 1)) if late is not None else F.lit(0)).alias("late"),
                F.count(F.when(first & on_time, 1)).alias("accepted"),
                F.count(F.when(first & (F.col("shard") == NOWHERE) & on_time, 1)).alias("unrouted"),
                F.max(F.when(on_time, F.col("t1"))).alias("max_t1"),
            ).first()
            assert summary is not None
            counts = summary.asDict()
            watermark = state.watermark
            if counts["max_t1"] is not None:
                candidate = counts["max_t1"] - lateness - 1
                watermark = candidate if watermark is None else max(watermark, candidate)
            if counts["rejected"] or counts["late"]:
                self.dead_letter(routed, late, state.watermark, batch)
            fresh = routed.where(on_time & (F.col("shard") >= 0)).drop("field", "reason", "raw")
            if state.held_max is not None:
                held = self.spark.read.schema(fresh.schema).parquet(
                    self.store.uri(f"feed/held/{before}")
                )
                fresh = fresh.unionByName(held)
            acks = self.deliver(fresh, plan, str(batch), watermark)
            top = max(
                (t for t in (counts["max_t1"], state.held_max) if t is not None), default=None
            )
            held_max = None
            if top is not None and watermark is not None and top > watermark:
                fresh.where(F.col("t1") > watermark).write.mode("overwrite").parquet(
                    self.store.uri(f"feed/held/{batch}")
                )
                held_max = top
            totals = dict(state.totals)
            for name in ("rows", "rejected", "late", "accepted", "unrouted"):
                totals[name] += counts[name]
            totals["sent"] += sum(a["accepted"] for a in acks if a["reason"] is None)
            totals["duplicate_messages"] += sum(1 for a in acks if a["duplicate"])
            totals["rejected"] += sum(1 for a in acks if a["reason"] is not None)
            self.store.write(f"feed/state/{batch}.json", State(watermark, held_max, totals).dump())
            self.forget(batch)
            log.info(
                "micro-batch",
                extra={
                    "batch": batch,
                    "watermark": watermark,
                    "routing_version": plan.version,
                    **{f"batch_{k}": v for k, v in counts.items() if k != "max_t1"},
                    **totals,
                },
            )
        finally:
            routed.unpersist()

    def dead_letter(self, routed: DataFrame, late: Any, watermark: int | None, batch: int) -> None:
        """Write the batch's rejected and late rows, once each, with field and reason."""
        reason = F.col("reason")
        field_ = F.col("field")
        if late is not None:
            message = F.format_string(
                "late: t1 = %d is not after the watermark %d (allowed lateness %d)",
                F.col("t1"),
                F.lit(watermark),
                F.lit(self.options.lateness),
            )
            reason = F.when(late, message).otherwise(reason)
            field_ = F.when(late, F.lit("t1")).otherwise(field_)
        bad = F.col("shard") == REJECTED
        wanted = bad if late is None else bad | late
        rows = routed.where(F.col("first") & wanted).select(
            "batch", "arrival", field_.alias("field"), reason.alias("reason"), "raw"
        )
        rows.write.mode("overwrite").json(f"{self.options.dead_letter}/batch={batch}")

    def deliver(
        self, rows: DataFrame, plan: Plan, label: str, watermark: int | None
    ) -> list[dict[str, Any]]:
        """Send the rows the watermark passed (keys named by ``label``); the acknowledgements."""
        if watermark is None:
            return []
        target = Target(
            address=self.options.server,
            token=self.options.token,
            tls_ca=self.options.tls_ca,
            shards=plan.shards,
            feed=self.id,
            max_rows=self.options.max_rows,
        )
        released = (
            rows.where(F.col("t1") <= watermark)
            .repartition(plan.shards, "shard")
            .sortWithinPartitions("shard", "t1", "batch", "arrival")
        )
        acks = released.mapInArrow(
            partial(send, target=target, label=label, watermark=watermark), ACKS
        ).collect()
        rejected = [a for a in acks if a["reason"] is not None]
        if rejected:
            frame = self.spark.createDataFrame(
                [(label, a["field"], a["reason"], a["raw"]) for a in rejected],
                "batch string, field string, reason string, raw string",
            )
            frame.write.mode("overwrite").json(f"{self.options.dead_letter}/server-batch={label}")
        return [a.asDict() for a in acks]

    def finish(self) -> None:
        """The source is complete: release every held row and close every epoch.

        ``--available-now`` calls this after the last micro-batch; a later run
        on the same checkpoint treats rows at or before the closing watermark
        as late.
        """
        numbers = self.store.numbers("feed/state")
        if not numbers:
            return
        last = numbers[-1]
        state = State.load(self.store.read(f"feed/state/{last}.json"))
        if state.held_max is None:
            return
        plan = self.plan()
        held = self.spark.read.parquet(self.store.uri(f"feed/held/{last}"))
        acks = self.deliver(held, plan, f"{last}.close", state.held_max)
        state.totals["sent"] += sum(a["accepted"] for a in acks if a["reason"] is None)
        state.totals["rejected"] += sum(1 for a in acks if a["reason"] is not None)
        closed = State(state.held_max, None, state.totals)
        self.store.write(f"feed/state/{last}.json", closed.dump())
        log.info("closed", extra={"batch": last, "watermark": closed.watermark, **closed.totals})

    def close(self) -> None:
        """Close the driver's connection to the front."""
        self.connection.close()

    def forget(self, batch: int) -> None:
        """Drop state and held rows older than the previous batch's."""
        for directory, suffix in (("feed/state", ".json"), ("feed/held", "")):
            for number in self.store.numbers(directory):
                if number < batch - 1:
                    self.store.delete(f"{directory}/{number}{suffix}")
