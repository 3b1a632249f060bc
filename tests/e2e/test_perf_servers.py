"""The benchmarks that drive a server (serverbench, feedbench, loadtest, soak, …): their
``--smoke`` modes run once in CI and lose nothing (the engine's: test_perf.py)."""

import json
import subprocess
import sys
import time

from tests.e2e.smoke import ROOT, smoke_json


def test_serverbench_smoke_same_alerts_with_one_and_two_shards(tmp_path):
    summary = smoke_json("cesar.perf.serverbench", tmp_path / "server.json", 600)
    assert summary["alerts_agree"] is True
    one, two = summary["records"]
    assert (one["shards"], two["shards"]) == (1, 2)
    assert one["alerts"] == two["alerts"] > 0
    assert one["counters"]["matches"] == one["alerts"]
    assert one["front_us_per_event"] > 0 and two["shards_us_per_event"] > 0


def test_feedbench_smoke_routes_every_row_and_loses_no_alert(tmp_path):
    summary = smoke_json("cesar.perf.feedbench", tmp_path / "feedbench.json", 900)
    assert summary["routing"]["warm"]["rows"] == summary["events"] == 2_340
    assert sum(summary["routing"]["warm"]["events_sent_per_shard"].values()) >= 2_340
    for run in summary["end_to_end"]:
        assert run["alerts"] == summary["alerts_cesar_run"]
        assert run["latency_p99_ms"] >= run["latency_p50_ms"] > 0


def test_loadtest_smoke_loses_no_alert_and_draws_its_figure(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cesar.server.cli.main",
            "loadtest",
            "--smoke",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "loadtest.json").read_text())
    summary = json.loads(result.stdout)  # nothing but the summary: no progress line
    assert summary == {k: report[k] for k in ("subscribe", "load", "drained", "errors", "check")}
    assert report["errors"] == {} and report["drained"] is True
    check = report["check"]
    assert check["stable_subscriptions"] == 1000
    assert check["expected_alerts"] == check["received_stable_alerts"] > 0
    assert (check["lost"], check["extra"], check["churn_subscriptions_with_gaps"]) == (0, 0, 0)
    load = report["load"]
    assert load["events"] >= 5000 and load["churn_subscribes"] >= 50
    assert load["churn_unsubscribes"] >= 40 and load["latency_ms"]["p50"] > 0
    assert all(point["rss_shards_mb"] > 0 for point in report["timeline"])
    assert (tmp_path / "loadtest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_loadtest_drives_a_running_server_and_fails_on_errors(tmp_path):
    from cesar.perf.serverproc import Server, scrape

    tokens = tmp_path / "tokens"
    tokens.write_text("t-a client-a\nt-b client-b\nt-pub publisher\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens), "--metrics-port", "0").start()
    metrics = server.process.stdout.readline().split()[1]
    command = [
        sys.executable, "-m", "cesar.server.cli.main", "loadtest", "--server", server.address,
        "--tokens", str(tokens), "--subscribers", "2", "--per-subscriber", "200",
        "--publishers", "1", "--rate", "500", "--duration", "5", "--epoch-size", "50",
        "--churn", "2", "--churn-life", "2", "--prefix", "T_", "--template", "Filter",
    ]  # fmt: skip
    try:
        first = subprocess.Popen(
            [*command, "--out", str(tmp_path / "first")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        during = scrape(metrics)  # the server's endpoint while the load runs
        deadline = time.monotonic() + 120
        while during["cesar_front_events_accepted_total"] == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            during = scrape(metrics)
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, out + err
        after = scrape(metrics)
        accepted = "cesar_front_events_accepted_total"
        assert 0 < during[accepted] < after[accepted]  # scraped mid-run, and it moved on
        assert during["cesar_front_subscribes_total"] <= after["cesar_front_subscribes_total"]
        assert after["cesar_front_alerts_total"] > during["cesar_front_alerts_total"]
        assert after["cesar_front_listens_opened_total"] >= 2
        shard_events = [v for k, v in after.items() if k.startswith("cesar_shard_events_total")]
        assert len(shard_events) == 2 and sum(shard_events) > 0
        report = json.loads((tmp_path / "first" / "loadtest.json").read_text())
        assert report["check"]["stable_subscriptions"] == 400  # techbench Filter, as algebra
        assert report["check"]["lost"] == report["check"]["extra"] == 0
        assert report["check"]["expected_alerts"] > 0
        again = subprocess.run(  # the same PUBLISH names: every subscription is refused
            [*command, "--out", str(tmp_path / "again"), "--no-check"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert again.returncode == 1
        errors = json.loads((tmp_path / "again" / "loadtest.json").read_text())["errors"]
        assert errors["subscribe"] >= 400
    finally:
        server.stop()


def test_loadtest_refuses_a_server_off_this_machine(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("a x\nb y\n")
    result = subprocess.run(
        [sys.executable, "-m", "cesar.server.cli.main", "loadtest", "--server", "10.1.2.3:50051",
         "--tokens", str(tokens), "--subscribers", "1", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert "10.1.2.3:50051 is not a loopback address" in result.stderr


def test_soak_smoke_serves_steady_clients_beside_runaway_churning_and_stalled_ones(tmp_path):
    report = smoke_json("cesar.perf.soak", tmp_path / "soak.json", 600)
    assert report["passed"] and report["steady_alerts"] > 0
    # About one churn a second when the machine is idle; 9 in 20 s seen on a loaded one.
    assert report["steady_lost"] == report["steady_extra"] == 0 and report["churned"] >= 5
    assert report["samples"][-1]["alerts_dropped"] > 0  # the runaway FOLD was capped
    assert all(ratio > 0 for ratio in report["memory_late_over_early"].values())


def test_subscribebench_smoke_subscribes_into_a_loaded_server(tmp_path):
    summary = smoke_json("cesar.perf.subscribebench", tmp_path / "subscribe.json", 600)
    assert summary["preload"] == summary["measured"] == 2_000
    assert summary["measured_per_s"] > 0 and len(summary["shards_rss_mb"]) == 2
    assert 0 < summary["batch_ms_p50"] <= summary["batch_ms_p99"] <= summary["batch_ms_max"]


def test_restartbench_smoke_resumes_from_a_later_checkpoint_each_time(tmp_path):
    summary = smoke_json("cesar.perf.restartbench", tmp_path / "restart.json", 300)
    first, last = summary["marks"]
    assert 0 < first["checkpoint"] < last["checkpoint"]
    assert last["batches_replayed"] <= summary["snapshot_every_batches"]
    assert first["instances"] > 0


def test_listenbench_smoke_delivers_every_seq_once_in_order(tmp_path):
    summary = smoke_json("cesar.perf.listenbench", tmp_path / "listen.json", 300)
    assert summary["every_seq_once_in_order"] and summary["alerts"] == 5_000
    assert summary["catch_up_alerts_per_message"] > 100


def test_fairbench_smoke_measures_a_small_client_beside_a_bulk_one(tmp_path):
    report = smoke_json("cesar.perf.fairbench", tmp_path / "fair.json", 600)
    assert report["counters"]["bulk_events"] == 40_000
    assert report["alone"]["requests"] >= 200 and report["beside_bulk"]["requests"] >= 1
    assert report["p99_ratio"] > 0


def test_fuzzbench_smoke_answers_every_batch_and_stops_on_sigterm(tmp_path):
    report = smoke_json("cesar.perf.fuzzbench", tmp_path / "fuzz.json", 600)
    assert report["subscribed"] == report["patterns"] == 100 and report["exit"] == 0
    assert report["loud_batch"]["requests"] == 4 and report["small_beside"]["requests"] >= 1
    assert 0 < report["steps_per_epoch_max"] <= 2.5 * 50_000  # the client's budget, about 2×
    assert report["counters"]["epochs"] > 0 and report["counters"]["matches"] > 0


def test_consolebench_smoke_every_server_makes_the_same_alerts(tmp_path):
    summary = smoke_json("cesar.perf.consolebench", tmp_path / "console.json", 300)
    assert summary["alerts_agree"] is True and summary["on"]["alerts"] > 0
    assert len(summary["on"]["rounds_events_per_s"]) == summary["rounds"] == 2
    assert summary["watched"]["requests"] >= 6  # a poll of every view, each subscription's too
    assert summary["watched_over_off"] > 0


def test_frontbench_smoke_gives_one_outcome_in_either_wire_form(tmp_path):
    (run,) = smoke_json("cesar.perf.frontbench", tmp_path / "front.json", 300)["records"]
    protobuf, arrow = run["protobuf"], run["arrow"]
    assert protobuf["accepted"] == arrow["accepted"] == 4_000  # the first 1,000 warm up
    assert protobuf["shard_events"] == arrow["shard_events"] == 5_000
    assert protobuf["alerts"] == arrow["alerts"] > 0
    assert protobuf["front_us_per_event"] > 0 and arrow["front_us_per_event"] > 0
    assert run["alerts"]["alerts"] == 5_000
