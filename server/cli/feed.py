"""``cesar feed``: its options and the loop that runs the Spark job until it ends or is stopped."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

from cesar.server.host.logs import configure_logging
from cesar.server.host.stopping import Stopping


def add_feed_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``cesar feed``."""
    feed = sub.add_parser(
        "feed", help="run the Spark Structured Streaming feed: validate, order, route, deliver"
    )
    feed.add_argument("--server", required=True, metavar="HOST:PORT", help="the front")
    feed.add_argument(
        "--source",
        required=True,
        help="a directory of JSON Lines (or CSV, with --format csv) files, "
        "socket://HOST:PORT, or synthetic[:RATE] (stock ticks, RATE rows/s)",
    )
    feed.add_argument("--checkpoint", required=True, help="checkpoint directory (any Hadoop FS)")
    feed.add_argument("--dead-letter", required=True, help="directory for rejected and late rows")
    feed.add_argument("--token", help="bearer token")
    feed.add_argument("--tls-ca", help="PEM roots; readable on the driver and every executor")
    feed.add_argument("--master", help="Spark master (default local[2], or spark-submit's)")
    feed.add_argument(
        "--lateness",
        type=int,
        default=0,
        help="allowed lateness in stream time units: rows with t1 <= max(t1) - LATENESS - 1 "
        "are released, later rows at or before that watermark are late",
    )
    feed.add_argument("--trigger", type=float, default=1.0, help="seconds between micro-batches")
    feed.add_argument(
        "--available-now",
        action="store_true",
        help="process what the source holds now, release every held row, then stop",
    )
    feed.add_argument(
        "--idle-stop",
        type=float,
        metavar="SECONDS",
        help="treat the source as complete once rows have arrived and then none for SECONDS: "
        "release every epoch, then stop",
    )
    feed.add_argument("--format", choices=("json", "csv"), default="json", help="directory files")
    feed.add_argument(
        "--csv-columns", help="CSV header names, comma-separated (default: the first file's)"
    )
    feed.add_argument("--max-files-per-trigger", type=int, help="files per micro-batch")
    feed.add_argument(
        "--max-rows", type=int, default=50_000, help="events per PublishBatch message"
    )
    feed.add_argument(
        "--cpus",
        metavar="LIST",
        help="run the feed and its local Spark on these CPUs only, e.g. 0 or 0-1 (as taskset "
        "-c): off the CPUs given to shards with cesar serve --shard-cpus (default: where started)",
    )
    feed.add_argument("--log-level", default="INFO")
    feed.add_argument(
        "--spark-log",
        metavar="FILE",
        help="the file for Spark's own log (WARN and above), so standard error holds only the "
        "feed's JSON log; - : Spark's errors on standard error (default: spark.log in the "
        "checkpoint directory when it is a local path, else ./cesar-feed-spark.log)",
    )
    feed.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve the feed's counters for Prometheus on this port (0: any free port)",
    )
    feed.add_argument(
        "--metrics-host", default="127.0.0.1", help="the address --metrics-port binds to"
    )
    from cesar.server.cli.ingest import add_ingest_arguments

    add_ingest_arguments(feed)
    feed.set_defaults(handler=cmd_feed)


def spark_log_of(args: argparse.Namespace) -> Path | None:
    """Where Spark's own log goes (None: standard error), by ``--spark-log`` or its default."""
    from cesar.server.feed.job import under_spark_submit

    if args.spark_log == "-" or under_spark_submit():
        return None  # under spark-submit, its --driver-java-options decide
    if args.spark_log is not None:
        return Path(args.spark_log)
    scheme, _, rest = args.checkpoint.partition("://")
    if not rest:
        return Path(args.checkpoint) / "spark.log"
    if scheme == "file":
        return Path(rest) / "spark.log"
    return Path("cesar-feed-spark.log")


def _local_directory(source: str) -> Path | None:
    """The local directory ``--source`` names (a path or ``file://``), else None (a socket, the
    synthetic source, another Hadoop file system).

    >>> _local_directory("/data/in"), _local_directory("file:///data/in")
    (PosixPath('/data/in'), PosixPath('/data/in'))
    >>> _local_directory("socket://h:9"), _local_directory("synthetic:50"), _local_directory("s3a://b/k")
    (None, None, None)
    """
    scheme, colon, rest = source.partition(":")
    if colon and scheme in ("socket", "synthetic"):
        return None
    if "://" not in source:
        return Path(source)
    return Path(rest.removeprefix("//")) if scheme == "file" else None


def cmd_feed(args: argparse.Namespace) -> int:
    """Run the feed until its source is done (--available-now), SIGTERM/SIGINT, or a failure."""
    from cesar.server.cli.ingest import ingest_of

    ingest = ingest_of(args)
    if ingest is not None and args.format != "csv":
        raise SystemExit(
            "cesar feed: --time-column, --columns and --stream-name read CSV files not written "
            "for cesar: give --format csv"
        )
    local = _local_directory(args.source)
    if local is not None and not local.is_dir():
        print(f"cesar feed: --source {args.source}: no such directory", file=sys.stderr)
        return 2
    configure_logging(args.log_level, "feed")
    if args.cpus is not None:  # before Spark's JVM starts: it and its Python workers inherit it
        from cesar.server.host.cpus import PlacementError, parse_cpus, pin

        try:
            pin(parse_cpus(args.cpus))
        except PlacementError as exc:
            print(f"cesar feed: --cpus: {exc}", file=sys.stderr)
            return 2
    from pyspark.errors import AnalysisException, StreamingQueryException

    from cesar.server.feed.job import Feed, Options, session, under_spark_submit

    options = Options(
        server=args.server,
        source=args.source,
        checkpoint=args.checkpoint,
        dead_letter=args.dead_letter,
        token=args.token,
        tls_ca=args.tls_ca,
        master=args.master,
        lateness=args.lateness,
        trigger_seconds=args.trigger,
        available_now=args.available_now,
        format=args.format,
        csv_columns=tuple(args.csv_columns.split(",")) if args.csv_columns else (),
        max_files_per_trigger=args.max_files_per_trigger,
        max_rows=args.max_rows,
        ingest=ingest,
    )
    spark_log = spark_log_of(args)
    log = logging.getLogger("cesar.feed")
    log.info(
        "starting Spark",
        extra={"master": options.master or "local[2]", "note": "its JVM takes up to a minute"},
    )
    spark = session(options.master, spark_log=spark_log)
    log.info("asking the front for its streams and routing table", extra={"server": options.server})
    feed = Feed(spark, options)
    if args.metrics_port is not None:
        from cesar.server.feed.metrics import collect
        from cesar.server.host.metrics import serve_metrics

        bound = serve_metrics(args.metrics_host, args.metrics_port, lambda: collect(feed))
        print(f"metrics http://{args.metrics_host}:{bound}/metrics", flush=True)
    stopping = Stopping().install(signal.SIGTERM, signal.SIGINT)
    try:
        query = feed.start()
    except AnalysisException as exc:  # a Hadoop path that is not there, a bad CSV header, ...
        print(f"cesar feed: --source {args.source}: {exc.getMessage()}", file=sys.stderr)
        feed.close()
        spark.stop()
        return 2
    told: object = spark_log.resolve() if spark_log is not None else "standard error"
    if under_spark_submit():
        told = "as spark-submit's --driver-java-options say"
    print(f"feeding {options.server} from {options.source}; Spark's log: {told}", flush=True)
    last_input: float | None = None
    last_batch = -1
    idle = False
    try:
        while query.isActive and not stopping.signals and not idle:
            query.awaitTermination(0.5)  # type: ignore[arg-type]  # seconds; pyspark takes floats
            progress = query.lastProgress
            fresh = progress is not None and progress["batchId"] != last_batch
            if progress is not None and fresh and progress["numInputRows"]:
                last_batch, last_input = progress["batchId"], time.monotonic()
            idle = (
                args.idle_stop is not None
                and last_input is not None
                and time.monotonic() - last_input > args.idle_stop
            )
        query.stop()
        query.awaitTermination()
        if (options.available_now or idle) and not stopping.signals:
            feed.finish()
    except StreamingQueryException as exc:
        print(f"cesar feed: the streaming query failed: {exc}", file=sys.stderr)
        return 1
    finally:
        feed.close()
        spark.stop()
    totals = feed.last.totals
    if totals["rows"] and not totals["accepted"]:
        print(
            f"cesar feed: no row was accepted ({totals['rejected']} rejected, {totals['late']} "
            f"late): their field and reason are in {options.dead_letter}",
            file=sys.stderr,
        )
        return 1
    return 0
