"""The client subcommands (define-stream, subscribe, list, publish, listen) against a server."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cesar.perf.serverproc import (
    CESAR,
    QUERIES,
    SAMPLE,
    Server,
    expected_lines,
    sample_events,
)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Server]:
    server = Server(tmp_path / "data").start()
    yield server
    server.stop()


def cesar(
    server: Server, *args: str | Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CESAR), *map(str, args), "--server", server.address],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def test_subscribing_many_queries_draws_a_bar_on_a_terminal(served: Server, tmp_path: Path) -> None:
    """Standard error a terminal: ``subscribe`` of 1,200 queries counts them as its
    SubscribeBatch calls (500 a call) return; standard output holds the ids."""
    from tests.e2e.test_cli import _stderr_on_a_terminal

    queries = [f"FILTER{{Price > {n}}}(Stock)" for n in range(1200)]
    command = [str(CESAR), "subscribe", *queries, "--server", served.address]
    status, drawn, out = _stderr_on_a_terminal(command)
    assert status == 0
    assert out.split() == [f"s{n}" for n in range(1, 1201)]
    assert b"subscribing" in drawn and b"1200/1200" in drawn


def test_subscribe_publish_listen_as_a_user(served: Server) -> None:
    ids = cesar(served, "subscribe", *QUERIES).stdout.split()  # one SubscribeBatch
    assert ids == ["s1", "s2", "s3"]
    listing = cesar(served, "list").stdout.splitlines()
    assert [line.split("\t")[:3] for line in listing] == [
        ["s1", "Rising", "key:Name"],
        ["s2", "Drops", "key:Name"],
        ["s3", "DropAfterRise", "key:Name"],
    ]
    table = json.loads(cesar(served, "routing").stdout)
    assert table["shards"] == 2 and table["version"] >= 1
    routes = {r["stream"]: r["key_attributes"] for r in table["streams"]}
    assert routes["Stock"] == ["Name"]  # the queries all pair quotes of one Name
    published = cesar(served, "publish", "--quiet", SAMPLE)
    assert published.returncode == 0, published.stderr
    assert (
        "published 2340 event(s), 0 rejected; time closed through t1 = 26729040"
        " (2020-10-26T20:00Z)" in published.stderr
    )
    run_lines = expected_lines([(q.stem, q.read_text()) for q in QUERIES], sample_events())
    # what cesar run prints, ISO times included (listen knows each output stream's unit)
    expected = Counter(
        {json.dumps(json.loads(line), sort_keys=True): n for line, n in run_lines.items()}
    )
    total = sum(expected.values())
    listened = cesar(served, "listen", "--after-seq", "0", "--count", str(total), "--timeout", "60")
    records = [json.loads(line) for line in listened.stdout.splitlines()]
    assert len(records) == total
    plain = [
        json.dumps({k: v for k, v in r.items() if k not in ("subscription", "seq")}, sort_keys=True)
        for r in records
    ]
    assert sorted(plain) == sorted(expected.elements())
    assert {r["subscription"] for r in records} == {"s1", "s2", "s3"}
    only = cesar(served, "listen", "--subscription", "s2", "--after-seq", "2", "--count", "1")
    assert json.loads(only.stdout)["seq"] == 3
    assert cesar(served, "unsubscribe", "s3").returncode == 0
    assert [line.split("\t")[0] for line in cesar(served, "list").stdout.splitlines()] == [
        "s1",
        "s2",
    ]
    rows = [json.loads(line) for line in cesar(served, "list", "--json").stdout.splitlines()]
    assert [(r["id"], r["stream"], r["placement"]["key_attribute"]) for r in rows] == [
        ("s1", "Rising", "Name"),
        ("s2", "Drops", "Name"),
    ]
    assert rows[1]["last_seq"] >= 3 and isinstance(rows[0]["created_unix_ms"], int)
    stats = json.loads(cesar(served, "stats").stdout)
    assert stats["front"]["events_accepted"] == 2340  # a number, not protobuf's JSON string
    assert len(stats["shards"]) == 2
    assert stats["front"]["rss_bytes"] > 2**20
    assert all(shard["counters"]["rss_bytes"] > 2**20 for shard in stats["shards"])


def test_errors_print_the_status_and_exit_1(served: Server, tmp_path: Path) -> None:
    bad = tmp_path / "bad.cel"
    bad.write_text("FILTER{Price >} Stock")
    result = cesar(served, "subscribe", bad)
    assert result.returncode == 1
    assert result.stderr.startswith("cesar: INVALID_ARGUMENT: line 1, column 15")
    result = cesar(served, "subscribe", "FILTER{Price > 1} Stock PUBLISH Fine", bad)
    assert result.returncode == 1 and result.stdout.startswith("s")
    assert result.stderr.startswith(f"{bad}: INVALID_ARGUMENT: line 1, column 15")
    result = cesar(served, "unsubscribe", "s42")
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "cesar: NOT_FOUND: no subscription s42",
    )
    events = tmp_path / "events.jsonl"
    events.write_text('{"t": 5, "Name": "A", "Price": 1.5, "Volume": 3}\n')
    assert cesar(served, "publish", "--quiet", events).returncode == 0
    again = cesar(served, "publish", "--quiet", events)
    assert again.returncode == 1
    assert "event 1: t1: late: t1 = 5 (1970-01-01T00:05Z), but events up to t1 = 5" in again.stderr


def test_publish_reads_standard_input_and_sums_up_what_it_could_not_publish(
    served: Server,
) -> None:
    rows = "".join(f"AAPL,2020-10-26T09:{m:02}:00Z,{100 + m}.5,7\n" for m in range(8))
    csv = "symbol,ts,close,volume\n" + rows
    options = ["--time-column", "ts", "--columns", "symbol,close,volume"]
    # Stock(Name, Price, Volume) is the server's stream: these columns are not its attributes
    wrong = cesar(served, "publish", "--quiet", *options, "--skip-bad", "-", stdin=csv)
    assert wrong.returncode == 1, wrong.stderr
    assert "cesar: skipped 8: 8 Name: missing" in wrong.stderr
    assert "published 0 event(s)" in wrong.stderr
    quote = "Quote(symbol:string,close:float,volume:int)[min]"
    assert cesar(served, "define-stream", quote).returncode == 0
    options += ["--stream-name", "Quote"]
    first = cesar(served, "publish", "--quiet", *options, "-", stdin=csv)
    assert first.returncode == 0, first.stderr
    assert "published 8 event(s), 0 rejected" in first.stderr
    again = cesar(served, "publish", "--quiet", *options, "-", stdin=csv)
    assert again.returncode == 1
    lines = again.stderr.splitlines()
    assert sum(": t1: late: " in line for line in lines) == 5  # the first few, then counts
    assert "cesar: ... and 3 more" in lines
    assert "cesar: rejected 8: 8 t1: late" in lines


def test_define_stream_and_streams(served: Server) -> None:
    assert cesar(served, "define-stream", "News(Name:string,Score:int)").stdout.strip() == (
        "News(Name:string,Score:int)"
    )
    assert cesar(served, "subscribe", "FILTER{Score > 3} News PUBLISH Hot").returncode == 0
    lines = cesar(served, "streams").stdout.splitlines()
    assert lines[0].startswith("Hot(Name:string,Score:int)\tsubscription s1")
    assert lines[1].startswith("News(Name:string,Score:int)\tinput")
    assert lines[2].startswith("Stock(")
    records = [json.loads(line) for line in cesar(served, "streams", "--json").stdout.splitlines()]
    assert [(r["name"], r["subscription"]) for r in records] == [
        ("Hot", "s1"),
        ("News", ""),
        ("Stock", ""),
    ]


def test_share_and_delete_stream_as_a_user(served: Server) -> None:
    assert cesar(served, "define-stream", "Scratch(x:int)").returncode == 0
    assert cesar(served, "subscribe", "FILTER{x > 1} Scratch PUBLISH Big").stdout.split() == ["s1"]
    shared = cesar(served, "share", "Big", "bob", "carol")
    assert shared.returncode == 0 and shared.stdout.split() == ["bob", "carol"]
    assert cesar(served, "share", "Big").stdout.strip() == "(private)"
    refused = cesar(served, "delete-stream", "Scratch")
    assert refused.returncode == 1 and "FAILED_PRECONDITION" in refused.stderr
    assert cesar(served, "unsubscribe", "s1").returncode == 0
    assert cesar(served, "delete-stream", "Scratch").returncode == 0
    assert "Scratch" not in cesar(served, "streams").stdout


def test_list_leaves_comments_out_and_stats_shows_every_counter_from_the_start(
    served: Server, tmp_path: Path
) -> None:
    """The TSV's query is one line without its ``--`` comments (a comment folded into the
    line would hide the query after it); a fresh server's stats hold every front counter,
    at 0, so a script can read ``["alerts"]`` before the first alert."""
    stats = json.loads(cesar(served, "stats").stdout)
    counted = ("events_accepted", "events_rejected", "alerts", "batches", "subscribes")
    assert {name: stats["front"][name] for name in counted} == dict.fromkeys(counted, 0)
    query = tmp_path / "commented.cel"
    query.write_text(
        "-- quotes over 100, said 'twice'\nFILTER{Price > 100 -- a level\n  AND Name = 'a--b'}\n"
        "Stock PUBLISH Dear\n"
    )
    assert cesar(served, "subscribe", query).stdout.split() == ["s1"]
    (line,) = cesar(served, "list").stdout.splitlines()
    assert line.split("\t")[4] == "FILTER{Price > 100 AND Name = 'a--b'} Stock PUBLISH Dear"


def test_listen_resumes_each_subscription_through_a_server_restart(tmp_path: Path) -> None:
    """``listen`` started before a restart prints every alert of two subscriptions once, in
    order: it reconnects and resumes each after its last seq; its checkpoint holds the last
    seqs, and a second ``listen`` from it prints what came after, per subscription."""
    server = Server(tmp_path / "data").start().keep_address()
    address = server.address
    try:
        assert cesar(server, "subscribe", *QUERIES[1:2]).returncode == 0  # Drops: s1
        lines = SAMPLE.read_text().splitlines()
        half = len(lines) // 2
        while lines[half].split(",")[0] == lines[half - 1].split(",")[0]:
            half += 1  # a whole minute on each side: the first publish closes its last one
        first, second = tmp_path / "first.csv", tmp_path / "second.csv"
        first.write_text("\n".join(lines[:half]) + "\n")
        second.write_text("\n".join([lines[0], *lines[half:]]) + "\n")
        assert cesar(server, "publish", "--quiet", first).returncode == 0
        run_lines = expected_lines([(QUERIES[1].stem, QUERIES[1].read_text())], sample_events())
        total = sum(run_lines.values())
        checkpoint = tmp_path / "seqs.json"
        listening = subprocess.Popen(
            [
                *(str(CESAR), "listen", "--after-seq", "0", "--count", str(total)),
                *("--timeout", "120", "--checkpoint", str(checkpoint)),
                *("--server", server.address, "--wait", "60"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        first_line = listening.stdout.readline() if listening.stdout else ""
        assert json.loads(first_line)["seq"] == 1
        assert server.stop() == 0
        server.start()
        assert server.address == address
        assert cesar(server, "publish", "--quiet", second).returncode == 0
        assert listening.stdout is not None and listening.stderr is not None
        out = listening.stdout.read()  # not communicate(): it would skip what readline buffered
        err = listening.stderr.read()
        listening.wait(30)
        seqs = [json.loads(line)["seq"] for line in [first_line, *out.splitlines()]]
        assert seqs == list(range(1, total + 1)), err
        assert "the server went away" in err and listening.returncode == 0
        assert json.loads(checkpoint.read_text()) == {"s1": total}
        checkpoint.write_text(json.dumps({"s1": total - 3}))
        again = cesar(server, "listen", "--checkpoint", checkpoint, "--count", "3")
        assert [json.loads(line)["seq"] for line in again.stdout.splitlines()] == [
            total - 2,
            total - 1,
            total,
        ]
    finally:
        server.stop()


def test_listen_posts_every_alert_to_a_webhook_through_a_restart_of_each(tmp_path: Path) -> None:
    """``listen --to URL`` POSTs each batch; the endpoint fails its first POST (503, retried)
    and the server restarts between the two halves of the sample: the endpoint gets every
    alert once, in seq order, and the checkpoint holds the last seq it acknowledged."""
    import threading
    import time

    from tests.unit.test_client_delivery import Receiver

    receiver = Receiver([503])
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    server = Server(tmp_path / "data").start().keep_address()
    try:
        assert cesar(server, "subscribe", *QUERIES[1:2]).returncode == 0
        lines = SAMPLE.read_text().splitlines()
        half = len(lines) // 2
        while lines[half].split(",")[0] == lines[half - 1].split(",")[0]:
            half += 1
        first, second = tmp_path / "first.csv", tmp_path / "second.csv"
        first.write_text("\n".join(lines[:half]) + "\n")
        second.write_text("\n".join([lines[0], *lines[half:]]) + "\n")
        assert cesar(server, "publish", "--quiet", first).returncode == 0
        total = sum(
            expected_lines([(QUERIES[1].stem, QUERIES[1].read_text())], sample_events()).values()
        )
        checkpoint = tmp_path / "seqs.json"
        listening = subprocess.Popen(
            [
                *(str(CESAR), "listen", "--to", receiver.url, "--after-seq", "0"),
                *("--count", str(total), "--timeout", "120", "--checkpoint", str(checkpoint)),
                *("--header", "Authorization: Bearer hook", "--server", server.address),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not receiver.bodies and time.monotonic() < deadline:
            time.sleep(0.1)
        assert receiver.bodies, "nothing delivered before the restart"
        assert server.stop() == 0
        server.start()
        assert cesar(server, "publish", "--quiet", second).returncode == 0
        out, err = listening.communicate(timeout=150)
        assert listening.returncode == 0, err
        assert out == ""  # delivered to the endpoint, not printed
        seqs = [alert["seq"] for _, body in receiver.bodies for alert in body]  # type: ignore[attr-defined]
        assert seqs == list(range(1, total + 1))
        assert all(token == "Bearer hook" for token, _ in receiver.bodies)
        assert receiver.posts == len(receiver.bodies) + 1  # the 503, retried
        assert "HTTP 503; retrying" in err and "the server went away" in err
        assert json.loads(checkpoint.read_text()) == {"s1": total}
    finally:
        server.stop()
        receiver.shutdown()


def test_listen_to_a_dead_webhook_stops_at_its_timeout_and_bad_targets_are_one_line(
    served: Server, tmp_path: Path
) -> None:
    """A webhook nobody answers is retried only until ``--timeout``: the command ends there,
    saying how many alerts were not delivered; a directory, an unknown scheme or a missing
    directory is a one-line error before anything is read."""
    import socket
    import time

    assert cesar(served, "subscribe", *QUERIES[1:2]).returncode == 0
    assert cesar(served, "publish", "--quiet", SAMPLE).returncode == 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    started = time.monotonic()
    dead = cesar(
        served, "listen", "--to", f"http://127.0.0.1:{port}/alerts", "--after-seq", "0",
        "--timeout", "5",
    )  # fmt: skip
    assert time.monotonic() - started < 30  # before: retried for good, past any --timeout
    assert dead.returncode == 1 and "retrying in 0.5 s" in dead.stderr
    assert "the deadline passed while retrying" in dead.stderr.splitlines()[-1]
    for target, said in [
        (str(tmp_path), "a directory"),
        ("ftp://example.com/alerts", "ftp:// is not a target"),
        (str(tmp_path / "missing" / "alerts.jsonl"), "no directory"),
    ]:
        bad = cesar(served, "listen", "--to", target, "--timeout", "5")
        assert bad.returncode == 1
        assert bad.stderr.count("\n") == 1 and said in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


def test_a_client_command_says_it_waits_for_a_server_before_giving_up(tmp_path: Path) -> None:
    """Nothing answers at the address: after 2 s the command says it is waiting (a restarting
    server replays its log first), and at --wait it gives up with the reason, exit 1."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    result = subprocess.run(
        [str(CESAR), "streams", "--server", f"127.0.0.1:{port}", "--wait", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    waiting, gave_up = result.stderr.splitlines()
    assert waiting.startswith(f"cesar: waiting up to 3 s for the server at 127.0.0.1:{port}")
    assert gave_up == f"cesar: UNAVAILABLE: no server answered at 127.0.0.1:{port} within 3 s"
