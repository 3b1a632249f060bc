"""The benchmarks' ``--smoke`` modes run once in CI and their engines agree."""

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke_json(module: str, out: Path, timeout: int, *extra: str) -> dict:
    """Run ``python -m MODULE --smoke --json OUT [EXTRA…]``; it must exit 0; the JSON it wrote."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--smoke", "--json", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())


def test_engines_benchmark_smoke_outputs_agree():
    result = subprocess.run(
        [sys.executable, "-m", "cesar.perf.engines", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["outputs_agree"] is True
    reference, automaton = summary["records"]
    assert reference["outputs"] == automaton["outputs"] > 0
    assert automaton["counters"]["events"] == 300
    assert automaton["counters"]["edge_checks"] > 0


def test_techbench_smoke_runs_every_template_and_the_engines_agree(tmp_path):
    summary = smoke_json("cesar.perf.techbench", tmp_path / "techbench.json", 600)
    records = summary["records"]
    assert {r["template"] for r in records} == {
        "LinearStat",
        "LinearDyn",
        "Filter",
        "NonDeterministic",
        "NonDeterministicAgg",
    }
    for template in {r["template"] for r in records}:
        mine = [r for r in records if r["template"] == template]
        assert [r["engine"] for r in mine] == ["full", "nomerge", "naive"]
        assert len({r["match_digest"] for r in mine}) == 1
    assert summary["subscribe_cel_ms_p50"] > 0


def test_serverbench_smoke_same_alerts_with_one_and_two_shards(tmp_path):
    summary = smoke_json("cesar.perf.serverbench", tmp_path / "server.json", 600)
    assert summary["alerts_agree"] is True
    one, two = summary["records"]
    assert (one["shards"], two["shards"]) == (1, 2)
    assert one["alerts"] == two["alerts"] > 0
    assert one["counters"]["matches"] == one["alerts"]


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


def test_doubletop_smoke_both_formulations_find_the_same_tops_on_real_closes():
    result = subprocess.run(
        [sys.executable, "-m", "cesar.perf.doubletop", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    record = json.loads(result.stdout)
    assert record["matches"] == 2 and record["same_matches"] and record["scan_agrees"]
    assert record["mu_events_per_s"] > 0 and record["resubscription_events_per_s"] > 0


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


def test_families_smoke_every_family_alerts_and_merging_changes_nothing(tmp_path):
    summary = smoke_json("cesar.perf.families", tmp_path / "families.json", 300)
    records = summary["records"]
    assert {r["family"] for r in records} == {"rise", "rise_all", "drop", "run"}
    for family in ("rise", "rise_all", "drop", "run"):
        assert summary[f"{family}_20_outputs_agree"] is True
        mine = [r for r in records if r["family"] == family]
        assert [r["engine"] for r in mine] == ["engine", "nomerge"]
        assert all(r["alerts"] > 0 and r["queries"] == 20 for r in mine)


def test_families_smoke_on_the_original_cayuga_workload(tmp_path):
    summary = smoke_json(
        "cesar.perf.families", tmp_path / "cayuga.json", 300, "--walk", "--families", "cayuga"
    )
    assert summary["events"] == 5000 and summary["cayuga_20_outputs_agree"] is True
    shared, alone = summary["records"]
    assert shared["alerts"] == alone["alerts"] > 0
    assert shared["dag_nodes"] == 3 and alone["dag_nodes"] == 41


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


def test_waitbench_smoke_alerts_agree_and_waiting_touches_fewer(tmp_path):
    summary = smoke_json("cesar.perf.waitbench", tmp_path / "wait.json", 300)
    assert summary["alerts_agree"] is True
    last = summary["chunks"][-1]
    assert last["waiting"]["alerts"] == last["by group"]["alerts"] > 0
    assert last["waiting"]["touched_per_event"] < last["by group"]["touched_per_event"]


def test_snapshotbench_smoke_restores_alike_and_masks_are_smaller(tmp_path):
    summary = smoke_json("cesar.perf.snapshotbench", tmp_path / "snap.json", 300)
    assert summary["restored_alike"] is True and summary["alerts_after"] > 0
    assert summary["masks"]["instances"] == summary["listed"]["instances"] == summary["instances"]
    assert summary["members"] > summary["instances"] > 0  # partial matches are shared
    assert summary["masks"]["bytes"] < summary["listed"]["bytes"]


def test_patternbench_smoke_query3_shared_and_alone_agree_and_windows_grow(tmp_path):
    summary = smoke_json("cesar.perf.patternbench", tmp_path / "patterns.json", 300)
    assert summary["query3_1_outputs_agree"] is True and summary["query3_20_outputs_agree"] is True
    assert summary["together_20_outputs_agree"] is True
    together = [r for r in summary["records"] if r["benchmark"] == "together"]
    assert all(r["alerts"] > 0 for r in together)
    assert summary["looking_back_naive_agrees"] is True
    with_negation, without = summary["looking_back_alerts_with_without"]
    assert 0 < with_negation < without  # the negation drops some rises, not all
    looking = [r for r in summary["records"] if r["benchmark"] == "looking_back"]
    assert (
        looking[0]["remembered_checked_per_event"] > 0 == looking[1]["remembered_checked_per_event"]
    )
    query3 = [r for r in summary["records"] if r["benchmark"] == "query3"]
    assert [(r["queries"], r["engine"]) for r in query3] == [
        (1, "engine"),
        (1, "nomerge"),
        (20, "engine"),
        (20, "nomerge"),
    ]
    assert all(r["alerts"] > 0 for r in query3)
    windows = [r for r in summary["records"] if r["benchmark"] == "any_window"]
    assert [r["window_min"] for r in windows] == [2, 4]
    assert all(r["naive_agrees"] for r in windows)
    assert windows[0]["live_instances_peak"] < windows[1]["live_instances_peak"]


def test_planbench_smoke_every_plan_agrees_and_the_lazy_ones_hold_less(tmp_path):
    summary = smoke_json("cesar.perf.planbench", tmp_path / "plans.json", 300)
    assert summary["outputs_agree"] is True
    records = summary["records"]
    rare = [r for r in records if r["benchmark"] == "rare"]
    assert all(r["alerts"] > 0 for r in rare)
    assert all(summary[f"rare_{s}_partials_eager_vs_lazy"] > 5 for s in ("seq3", "seq4", "and3"))
    pinned = [r for r in rare if "pinned" in r["plan"]]
    assert len(pinned) == 4 and all(r["plan"].startswith("plan chain") for r in pinned)
    recompute = [r for r in records if r["benchmark"] == "any_window" and r["engine"] == "plans"]
    assert all(r["live_partials_mean"] == 0 < r["buffered_mean"] for r in recompute)
    crowd = [r for r in records if r["benchmark"] == "crowd"]
    assert crowd[1]["plans_now"] == {"eager": 20} and crowd[1]["idle"] == 20


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


def test_populations_smoke_every_mode_agrees_and_reports_each_population(tmp_path):
    report = smoke_json("cesar.perf.populations", tmp_path / "populations.json", 600)
    summary = report["summary"]
    agree = [key for key in summary if key.endswith("_alerts_agree")]
    assert len(agree) == 3 * 5 * 2 and all(summary[key] for key in agree)  # streams × kinds × n
    runs = [r for r in report["records"] if "population" in r]
    kinds = ("templates", "patterns", "mixed", "pinned", "shared")
    assert {(r["population"], r["engine"]) for r in runs} == {
        (p, e) for p in kinds for e in ("engine", "planned", "budgeted", "nomerge")
    }
    reach = {(r["queries"], r["tickers"]) for r in runs if r["stream"] == "reach"}
    assert reach == {(10, 5), (20, 10)}  # a ticker per two subscriptions
    assert any(r["alerts"] > 0 for r in runs if r["population"] == "patterns")
    pinned = [r for r in runs if r["population"] == "pinned" and r["engine"] == "planned"]
    assert pinned and all(r["planned_lazy"] == r["queries"] for r in pinned)  # every one lazy
    shared = [r for r in runs if r["population"] == "shared" and r["engine"] == "planned"]
    assert shared and all(r["planned_lazy"] == r["queries"] for r in shared)
    # Each has 2-4 components (2 buffers each or more if none were shared); its first has a
    # buffer of its own, the later ones share one, or one per volume threshold (three).
    assert all(r["lazy_buffers"] <= r["queries"] + 4 for r in shared)
    assert all(r["subscribed_per_s"] > 0 for r in runs)
    (growth,) = [r for r in report["records"] if r.get("benchmark") == "growth"]
    assert growth["stream"] == "quotes" and growth["events"] > 2_000  # the sample's quotes
    assert len(growth["per_block"]) >= 2 and growth["instances_touched_per_event_all"] > 0
    alone = [r for r in report["records"] if r.get("benchmark") == "alone"]
    assert len(alone) == 7 and all(r["own_time"] for r in alone)
    (compiled,) = [r for r in report["records"] if r.get("benchmark") == "compile"]
    assert compiled["pattern_family_bound"] == compiled["count"] - 2  # a template from the 2nd
    assert compiled["distinct_patterns_per_s"] > 0 and compiled["cel_templates_per_s"] > 0


def test_windowbench_smoke_alerts_agree_and_sharing_updates_one_window(tmp_path):
    summary = smoke_json("cesar.perf.windowbench", tmp_path / "windows.json", 300)
    assert summary["alerts_agree"] is True and summary["shared"]["alerts"] > 0
    assert summary["shared"]["windows"] == 1
    assert summary["private"]["windows"] == summary["subscriptions"]
    assert summary["shared"]["window_updates_per_event"] == 1.0


def test_consolebench_smoke_both_servers_make_the_same_alerts(tmp_path):
    summary = smoke_json("cesar.perf.consolebench", tmp_path / "console.json", 300)
    assert summary["alerts_agree"] is True and summary["on"]["alerts"] > 0
    assert len(summary["on"]["rounds_events_per_s"]) == summary["rounds"] == 2


def test_orbench_smoke_an_or_gives_its_alternatives_alerts(tmp_path):
    summary = smoke_json("cesar.perf.orbench", tmp_path / "or.json", 300)
    assert summary["alerts_agree"] is True and summary["or"]["alerts"] > 0
    assert summary["or"]["instances_touched"] == summary["split"]["instances_touched"]
    assert summary["or"]["matches"] == summary["split"]["matches"]  # no hop: one match each
    assert summary["or"]["dag_nodes"] == summary["split"]["dag_nodes"]


def test_compositebench_smoke_every_form_equals_the_brute_force_count_and_shares(tmp_path):
    summary = smoke_json("cesar.perf.compositebench", tmp_path / "composite.json", 300)
    assert summary["alerts_agree"] is True
    for form, rows in summary["forms"].items():
        few, many = rows["2"], rows["8"]
        assert many["alerts"] > few["alerts"] > 0, form
        assert many["dag_nodes_by_level"] == few["dag_nodes_by_level"], form  # merged
        assert many["internal_matches_per_event"] == few["internal_matches_per_event"], form
    assert summary["forms"]["or"]["8"]["split"]["alerts"] == summary["forms"]["or"]["8"]["alerts"]
