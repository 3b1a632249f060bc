"""``cesar run`` and ``cesar explain`` as a user meets them: formats, options and errors."""

import json
import os
import pty
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.e2e.conftest import CESAR

STOCK = "Stock(Name:string,Price:float,Volume:int)"
ROOT = Path(__file__).resolve().parents[2]


def test_csv_input_point_events_and_typed_output(cesar):
    out = cesar.query(
        [STOCK], {"big": "FILTER{Volume > 10} Stock"}, "t,Name,Price,Volume\n1,IBM,2,11\n2,X,3,1\n"
    )
    assert out == [
        {"stream": "big", "t0": 1, "t1": 1, "attrs": {"Name": "IBM", "Price": 2.0, "Volume": 11}}
    ]
    record = json.dumps(out[0])
    assert '"Volume": 11' in record and '"Price": 2.0' in record


def test_csv_with_stream_and_interval_columns(cesar):
    csv = "stream,t0,t1,Name,Price,Volume\nStock,1,5,IBM,2.5,11\n"
    out = cesar.query([STOCK, "Other(x:int)"], {"q": "FILTER{DUR = 5} Stock"}, csv)
    assert [(r["t0"], r["t1"]) for r in out] == [(1, 5)]


def test_queries_jsonl_and_unpublished_names(cesar):
    queries = cesar.write(
        "many.jsonl",
        json.dumps({"id": "cheap", "query": "FILTER{Price < 3} Stock"})
        + "\n"
        + json.dumps({"id": "x", "query": "FILTER{Price > 3} Stock PUBLISH Dear"})
        + "\n",
    )
    events = cesar.write(
        "e.jsonl",
        '{"t0": 1, "t1": 1, "Name": "A", "Price": 1, "Volume": 1}\n'
        '{"t0": 2, "t1": 2, "Name": "B", "Price": 5, "Volume": 1}\n',
    )
    result = cesar.run("run", "--stream", STOCK, "--queries", queries, events)
    assert result.returncode == 0, result.stderr
    streams = sorted(json.loads(line)["stream"] for line in result.stdout.splitlines())
    assert streams == ["Dear", "cheap"]


def test_out_of_order_events_exit_2_unless_sorted(cesar):
    query = cesar.write("q.cel", "Stock NEXT{} Stock PUBLISH P")
    events = cesar.write(
        "e.jsonl",
        '{"t": 5, "Name": "A", "Price": 1, "Volume": 1}\n'
        '{"t": 2, "Name": "B", "Price": 2, "Volume": 1}\n',
    )
    result = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert result.returncode == 2
    assert "line 2: t1 = 2 is before the previous event's t1 = 5" in result.stderr
    result = cesar.run("run", "--stream", STOCK, "--query", query, "--sort", events)
    assert result.returncode == 0
    assert [json.loads(x)["t0"] for x in result.stdout.splitlines()] == [2]


def test_malformed_event_names_line_and_field_or_is_skipped_and_counted(cesar):
    query = cesar.write("q.cel", "FILTER{Price > 0} Stock")
    events = cesar.write(
        "e.jsonl",
        '{"t": 1, "Name": "A", "Price": 1, "Volume": 1}\n'
        '{"t": 2, "Name": "B", "Price": "cheap", "Volume": 1}\n'
        "not json\n"
        '{"t": 3, "Name": "C", "Price": 3, "Volume": 1}\n',
    )
    result = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert result.returncode == 2
    assert "line 2: stream Stock, field 'Price': expected a float, got string 'cheap'" in (
        result.stderr
    )
    result = cesar.run("run", "--stream", STOCK, "--query", query, "--skip-bad", events)
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 2
    assert result.stderr.splitlines()[:3] == [
        "cesar: line 2: Price: expected a float, got string 'cheap'",
        "cesar: line 3: not valid JSON: Expecting value at column 1",
        "cesar: skipped 2: 1 Price: expected a float, got string 'cheap', 1 not valid JSON",
    ]
    nothing = cesar.write("bad.jsonl", "not json\n")
    result = cesar.run("run", "--stream", STOCK, "--query", query, "--skip-bad", nothing)
    assert result.returncode == 2 and "no event of" in result.stderr


def test_a_file_made_for_something_else_is_read_as_it_is(cesar):
    """The bundled intraday file's layout: an ISO ``ts`` column, extra columns, no stream."""
    csv = (
        "symbol,ts,open,high,low,close,volume\n"
        "AAPL,2020-10-26T04:01:00-04:00,113.50,113.58,113.30,113.30,12653\n"
        "AMZN,2020-10-26T04:01:00-04:00,3190.14,3190.14,3181.70,3181.70,918\n"
        "AAPL,2020-10-26T04:02:00-04:00,113.30,113.40,113.20,113.40,500\n"
    )
    spec = "Quote(symbol:string,close:float)[min]"
    out = cesar.query(
        [spec, "Other(x:int)"],
        {"up": "Quote NEXT{$1.symbol = $2.symbol AND $2.close > $1.close} Quote"},
        csv,
        "--time-column",
        "ts",
        "--columns",
        "symbol,close",
        "--stream-name",
        "Quote",
    )
    minute = 26728321  # 2020-10-26T08:01:00Z in minutes since the epoch
    assert [(r["t0"], r["t1"], r["attrs"]["close"]) for r in out] == [(minute, minute + 1, 113.4)]
    seconds = "symbol,epoch,close\nAAPL,1603699260.5,113.3\n"
    one = cesar.query(
        [spec], {"all": "Quote"}, seconds, "--time-column", "epoch", "--time-format", "s"
    )
    assert one[0]["t1"] == minute and one[0]["attrs"] == {"symbol": "AAPL", "close": 113.3}
    bad = cesar.write("bad.csv", "symbol,ts,close\nAAPL,yesterday,1.0\n")
    result = cesar.run(
        "run",
        "--stream",
        spec,
        "--query",
        cesar.write("a.cel", "Quote"),
        "--time-column",
        "ts",
        bad,
    )
    assert result.returncode == 2
    assert "expected an ISO 8601 time such as 2020-10-26T09:30:00Z, got 'yesterday'" in (
        result.stderr
    )


def test_bad_query_exits_2_with_position(cesar):
    query = cesar.write("q.cel", "FILTER{Price >} Stock")
    events = cesar.write("e.jsonl", "")
    result = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert result.returncode == 2
    assert "query q: line 1, column 15: unexpected '}'; expected a term" in result.stderr


def test_a_window_over_a_published_stream_is_refused_at_the_call_without_a_traceback(cesar):
    query = cesar.write(
        "regabove.cel",
        "FILTER{MINUTE_OF_DAY(t1) > 570} Stock PUBLISH Regular;\n"
        "FILTER{Price > AVG_OVER(Price, 30 MIN, Name)} Regular PUBLISH RegAbove\n",
    )
    events = cesar.write("e.jsonl", "")
    result = cesar.run("run", "--stream", STOCK + "[min]", "--query", query, events)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "cesar: query regabove_2: line 2, column 16: AVG_OVER(Price, 30, Name) reads Regular, a "
        "stream a query publishes"
    )


def test_bad_stream_spec_exits_2(cesar):
    result = cesar.run("run", "--stream", "Stock(Name)", "--query", "x.cel", "e.jsonl")
    assert result.returncode == 2
    assert "--stream: bad attribute 'Name'" in result.stderr


def test_division_by_zero_is_counted_not_fatal(cesar):
    query = cesar.write("q.cel", "FILTER{Price / Volume > 1} Stock")
    events = cesar.write(
        "e.jsonl",
        '{"t": 1, "Name": "A", "Price": 5, "Volume": 0}\n'
        '{"t": 2, "Name": "B", "Price": 5, "Volume": 2}\n',
    )
    result = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 1
    assert "1 predicate atom(s) were false because of an arithmetic fault" in result.stderr


def test_explain_prints_the_algebra(cesar):
    result = cesar.run(
        "explain", "--stream", STOCK, "SELECT Name FROM Stock NEXT{$1.Name = $2.Name} Stock"
    )
    assert result.returncode == 0, result.stderr
    assert "publishes: query(Name:string)" in result.stdout
    assert ";[$1.Name_1 = $2.Name]" in result.stdout
    assert "ρ[Name→Name_1, Price→Price_1, Volume→Volume_1]" in result.stdout


def test_explain_prints_the_automaton_with_its_edge_labels(cesar):
    query = cesar.write("q.cel", "FILTER{Volume > 100} Stock NEXT{$1.Name = $2.Name} Stock")
    result = cesar.run("explain", "--stream", STOCK, query)
    assert result.returncode == 0, result.stderr
    assert "automaton query (publishes query(" in result.stdout
    assert "q0 → q1  ∃ FORWARD  on Stock" in result.stdout
    assert "θ1: Volume > 100   θ2: TRUE" in result.stdout
    assert "q1 → q1  ∀ FILTER  on Stock" in result.stdout
    assert "θ1: TRUE   θ2: $1.Name_1 = Name" in result.stdout


def test_explain_queries_shows_which_subscriptions_share_a_template(cesar):
    lines = [
        json.dumps({"id": f"r{n}", "query": f"FILTER{{Name = '{name}' AND Price > {c}}} Stock"})
        for n, (name, c) in enumerate([("IBM", 10.0), ("IBM", 12.5), ("MSFT", 12.5)])
    ]
    lines.append(json.dumps({"id": "big", "query": "FILTER{Volume > 100} Stock"}))
    queries = cesar.write("family.jsonl", "\n".join(lines) + "\n")
    result = cesar.run("explain", "--stream", STOCK, "--queries", queries)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("2 template edges for 4 subscriptions (4 automata); 3 DAG nodes")
    assert "FORWARD on Stock  Name = ?0 AND Price > ?1\n  3 subscriptions: r0, r1, r2\n" in out
    assert "  2 groups; ?0 key: 2 distinct; ?1 ordered: 2 distinct" in out
    assert "Volume > ?0\n  1 subscriptions: big\n" in out
    both = cesar.run("explain", "--stream", STOCK, "--queries", queries, "FILTER{x} Stock")
    assert both.returncode != 0 and "not both" in both.stderr


def test_explain_dot_prints_graphviz_for_every_automaton(cesar):
    text = "SELECT Name AS a FROM Stock NEXT{} (Stock NEXT{} (SELECT Name AS b FROM Stock))"
    # Query text longer than any file name is still read as text.
    result = cesar.run("explain", "--dot", "--stream", STOCK, text + "\n" + " " * 300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("digraph cesar {")
    assert result.stdout.count("subgraph cluster_") == 2
    assert 'label="query#1";' in result.stdout


def test_demo_queries_over_the_bundled_sample(cesar):
    """The README's main command: every demo stream produces alerts, consistent with each other.

    The automaton engine and the reference evaluator print the same lines.
    """
    queries = sorted((ROOT / "examples" / "queries").glob("*.cel"))
    args = ["run", "--stream", STOCK + "[min]"]
    for query in queries:
        args += ["--query", str(query)]
    result = cesar.run(*args, ROOT / "examples" / "stocks_sample.csv")
    assert result.returncode == 0, result.stderr
    automaton = cesar.run(*args, "--engine", "automaton", ROOT / "examples" / "stocks_sample.csv")
    assert automaton.returncode == 0, automaton.stderr
    assert automaton.stdout == result.stdout
    records = [json.loads(line) for line in result.stdout.splitlines()]
    by_stream: dict[str, list[dict]] = {}
    for record in records:
        by_stream.setdefault(record["stream"], []).append(record)
    assert set(by_stream) == {"Rising", "Drops", "DropAfterRise"}
    for drop in by_stream["Drops"]:
        assert drop["attrs"]["After"] < 0.998 * drop["attrs"]["Before"]
    for run in by_stream["Rising"]:
        assert run["t1"] - run["t0"] + 1 >= 5 and run["attrs"]["Price"] > run["attrs"]["Price_1"]
    drops = {(d["t0"], d["t1"], d["attrs"]["Name"]) for d in by_stream["Drops"]}
    for alert in by_stream["DropAfterRise"]:
        assert any(t1 == alert["t1"] and name == alert["attrs"]["Name"] for _, t1, name in drops)


def test_bench_prints_throughput_matches_and_counters(cesar):
    queries = cesar.write(
        "q.jsonl",
        '{"id": "pairs", "query": "Stock NEXT{$1.Name = $2.Name} Stock"}\n'
        '{"id": "big", "query": "FILTER{Volume > 5} Stock"}\n',
    )
    events = cesar.write("e.csv", "t,Name,Price,Volume\n1,A,1.0,10\n2,A,2.0,1\n3,B,3.0,7\n")
    result = cesar.run(
        "bench", "--stream", STOCK, "--queries", queries, "--events", events, "--engine", "engine"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["queries"] == 2 and summary["events"] == 3
    assert summary["matches"] == 3
    assert summary["counters"]["fr_hits"] > 0
    assert set(summary) >= {"events_per_s", "peak_rss_mb", "subscribe_ms_p50", "dag_nodes_by_level"}
    naive = cesar.run(
        "bench", "--stream", STOCK, "--queries", queries, "--events", events, "--engine", "naive"
    )
    assert json.loads(naive.stdout)["matches"] == 3


def test_version_and_defaults_in_help(cesar):
    result = cesar.run("--version")
    assert result.returncode == 0 and result.stdout.startswith("cesar 0.")
    run_help = cesar.run("run", "--help").stdout
    assert "(default: engine)" in run_help and "(default: 256)" in run_help
    assert "(default: None)" not in run_help and "(default: False)" not in run_help
    assert "(default: 1000)" in cesar.run("serve", "--help").stdout


def test_ctrl_c_stops_quietly_with_status_130(cesar):
    """``cesar run -`` waiting on standard input, interrupted: no traceback, exit 130."""
    query = cesar.write("q.cel", "FILTER{Price > 1} Stock")
    process = subprocess.Popen(
        [str(CESAR), "run", "--stream", STOCK, "--query", str(query), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A suite started in the background (`make test &`) ignores SIGINT, and so would the
        # child: give it the default, as a terminal's Ctrl-C finds it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdin is not None
    line = {"stream": "Stock", "t0": 1, "t1": 1, "Name": "A", "Price": 2.0, "Volume": 1}
    process.stdin.write(json.dumps(line) + "\n")
    process.stdin.flush()
    # Interrupt it once it is blocked reading standard input (Linux: read(2) on fd 0).
    syscall = Path(f"/proc/{process.pid}/syscall")
    deadline = time.monotonic() + 60
    while not syscall.read_text().startswith("0 0x0 ") and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "Traceback" not in err


def test_explain_json_holds_the_placement_algebra_and_automata(cesar):
    query = cesar.write("q.cel", "Stock NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock")
    result = cesar.run("explain", "--stream", STOCK, "--json", query)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reads"] == ["Stock"] and data["placement"]["key_attributes"] == ["Name"]
    assert data["algebra"].startswith(";[$1.Name_1 = $2.Name")
    (automaton,) = data["automata"]
    assert [node["id"] for node in automaton["nodes"]] == [0, 1, 2]
    forward = [e for e in automaton["edges"] if (e["source"], e["kind"]) == (1, "forward")]
    assert forward[0]["conjuncts"][0]["dynamic"] == "$1.Name_1 = Name AND $1.Price_1 < Price"
    assert cesar.run("explain", "--stream", STOCK, "--json", "--dot", query).returncode == 2


def test_the_bundled_intraday_file_as_it_is_gives_what_the_converted_sample_gives(cesar):
    """examples/intraday_sample.csv is the source's layout of examples/stocks_sample.csv."""
    query = "FILTER{{After < 0.998 * Before}} (SELECT {n}, {p}_1 AS Before, {p} AS After "
    query += "FROM {s} NEXT{{$1.{n} = $2.{n}}} {s})"
    converted = cesar.query(
        [STOCK + "[min]"],
        {"drop": query.format(n="Name", p="Price", s="Stock")},
        (ROOT / "examples" / "stocks_sample.csv").read_text(),
    )
    as_is = cesar.query(
        ["Quote(symbol:string,close:float,volume:int)[min]"],
        {"drop": query.format(n="symbol", p="close", s="Quote")},
        (ROOT / "examples" / "intraday_sample.csv").read_text(),
        "--time-column",
        "ts",
        "--columns",
        "symbol,close,volume",
    )
    assert len(converted) > 10
    assert [(r["t0"], r["t1"], list(r["attrs"].values())) for r in as_is] == [
        (r["t0"], r["t1"], list(r["attrs"].values())) for r in converted
    ]


def _stderr_on_a_terminal(command: list[str]) -> tuple[int, bytes, str]:
    """Run ``command`` with stderr on a pseudo-terminal: status, what it drew there, stdout."""
    leader, follower = pty.openpty()
    with tempfile.TemporaryFile() as stdout:  # a file, not a pipe nobody reads while it draws
        process = subprocess.Popen(command, stdout=stdout, stderr=follower)
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the terminal has closed it
                break
            if not chunk:
                break
            drawn += chunk
        os.close(leader)
        status = process.wait(timeout=120)
        stdout.seek(0)
        return status, drawn, stdout.read().decode()


def test_the_progress_bar_is_drawn_on_a_terminal_stderr_only(cesar):
    """stderr a terminal: the bar counts the events there; stdout (a pipe) holds only alerts."""
    query = cesar.write("q.cel", "FILTER{Price > 1} Stock")
    rows = "".join(f"{t},A,2,1\n" for t in range(3000))
    events = cesar.write("e.csv", "t,Name,Price,Volume\n" + rows)
    command = [str(CESAR), "run", "--stream", STOCK, "--query", str(query), str(events)]
    status, drawn, out = _stderr_on_a_terminal(command)
    assert status == 0
    assert b"evaluating (engine)" in drawn and b"3000/3000" in drawn
    assert b"reading lines" in drawn and b"3001/3001" in drawn  # the header too
    assert b"compiling queries" in drawn and b"1/1" in drawn
    assert len([json.loads(line) for line in out.splitlines()]) == 3000
    status, drawn, _ = _stderr_on_a_terminal([*command, "--quiet"])
    assert status == 0 and b"evaluating" not in drawn and b"reading" not in drawn
    assert b"compiling" not in drawn
    queries = cesar.write("q.jsonl", json.dumps({"id": "q", "query": "FILTER{Price > 1} Stock"}))
    bench = [str(CESAR), "bench", "--stream", STOCK, "--queries", str(queries)]
    status, drawn, out = _stderr_on_a_terminal([*bench, "--events", str(events)])
    assert status == 0 and b"compiling queries" in drawn and b"3001/3001" in drawn
    assert json.loads(out)["matches"] == 3000  # standard output: the figures alone
    piped = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert piped.returncode == 0 and piped.stderr == ""


def test_a_plan_pin_is_honoured_by_an_engine_that_plans_and_refused_by_one_that_cannot(cesar):
    query = cesar.write(
        "pinned.sase",
        "PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) "
        "{ [Name] AND b.Price > a.Price } WITHIN 9 PLAN chain(b, a) PUBLISH Rise",
    )
    events = cesar.write(
        "e.jsonl",
        '{"t": 1, "Name": "A", "Price": 1, "Volume": 1}\n'
        '{"t": 2, "Name": "A", "Price": 2, "Volume": 1}\n',
    )
    refused = cesar.run("run", "--stream", STOCK, "--query", query, events)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "PLAN chain(b, a) cannot be honoured by an engine without plans" in refused.stderr
    assert "--engine engine" in refused.stderr and "Traceback" not in refused.stderr
    for engine in ("planned", "reference"):
        result = cesar.run("run", "--stream", STOCK, "--query", query, "--engine", engine, events)
        assert result.returncode == 0, result.stderr
        assert [json.loads(line)["t0"] for line in result.stdout.splitlines()] == [1]


def test_bench_reads_a_file_made_for_something_else_or_says_why_not(cesar):
    """``bench`` takes ``run``'s options for a foreign file; without them it refuses the rows
    with their reason and exits 2 instead of measuring nothing."""
    queries = cesar.write("q.jsonl", '{"id": "up", "query": "FILTER{close > 100} Quote"}\n')
    events = cesar.write(
        "raw.csv",
        "symbol,ts,close\nAAPL,2020-10-26T09:31:00-04:00,114.2\nAMZN,2020-10-26T09:31:00-04:00,3195.7\n",
    )
    spec = "Quote(symbol:string,close:float)[min]"
    args = ("bench", "--stream", spec, "--queries", queries, "--events", events)
    refused = cesar.run(*args)
    assert refused.returncode == 2 and not refused.stdout
    assert "cesar: rejected 2: 2 t0: missing" in refused.stderr
    assert f"cesar: {events}: no event read (a file not written for cesar: --time-column)" in (
        refused.stderr
    )
    read = cesar.run(*args, "--time-column", "ts")
    assert read.returncode == 0, read.stderr
    summary = json.loads(read.stdout)
    assert summary["events"] == 2 and summary["matches"] == 2 and summary["skipped"] == 0


def test_explain_of_a_file_that_is_not_there_says_so(cesar):
    result = cesar.run("explain", "--stream", STOCK, "/missing/query.cel")
    assert result.returncode == 2
    assert result.stderr.strip() == "cesar: /missing/query.cel: no such file"


def test_demo_with_events_it_cannot_read_says_why_without_a_traceback(cesar):
    missing = cesar.run("demo", "--events", "/missing/quotes.csv")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "cesar: --events /missing/quotes.csv: No such file or directory" in missing.stderr
    bad = cesar.run("demo", "--events", cesar.write("bad.csv", "t,Name,Price\n1,IBM,x\n"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "line 2" in bad.stderr and "Price" in bad.stderr


def test_feed_from_a_directory_that_is_not_there_says_so_at_once(cesar):
    """Before Spark starts (a minute), not after it, and without a traceback."""
    tmp = cesar.write("x", "").parent
    result = cesar.run(
        "feed", "--server", "127.0.0.1:1", "--source", tmp / "missing",
        "--checkpoint", tmp / "ck", "--dead-letter", tmp / "dl",
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr == f"cesar feed: --source {tmp / 'missing'}: no such directory\n"
    assert not (tmp / "ck").exists()


def test_serve_removes_a_ready_file_left_by_a_killed_server_before_anything_else(cesar):
    """A script waiting for ``--ready-file`` must not go on because of the last server's file:
    the server removes it as it starts, even when it then fails to start."""
    ready = cesar.write("ready", "127.0.0.1:50551\n")
    result = cesar.run(
        "serve", "--data-dir", ready.parent / "data", "--tokens", "/missing/tokens",
        "--ready-file", ready,
    )  # fmt: skip
    assert result.returncode == 2 and "--tokens /missing/tokens" in result.stderr
    assert not ready.exists()


def test_a_column_the_stream_lacks_is_refused_with_the_option_that_leaves_it_out(cesar):
    csv = cesar.write("wide.csv", "symbol,ts,close,high\nAAPL,2020-10-26T09:31:00Z,114.2,115\n")
    spec = "Quote(symbol:string,close:float)[min]"
    args = ("run", "--stream", spec, "--query", cesar.write("all.cel", "Quote"), csv)
    wide = cesar.run(*args, "--time-column", "ts")
    assert wide.returncode == 2
    assert (
        "field 'high': not an attribute of the stream (keep only its columns with --columns "
        "symbol,close)"
    ) in wide.stderr
    kept = cesar.run(*args, "--time-column", "ts", "--columns", "symbol,close")
    assert kept.returncode == 0 and json.loads(kept.stdout)["attrs"]["close"] == 114.2
