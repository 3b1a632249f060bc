"""The benchmarks' ``--smoke`` modes run once in CI and their engines agree: the engine's
benchmarks (those that drive a server: test_perf_servers.py)."""

import json
import subprocess
import sys

from tests.e2e.smoke import ROOT, smoke_json


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


def test_hetero_smoke_the_compiled_and_the_pure_build_give_the_same_alerts(tmp_path):
    report = smoke_json("cesar.perf.hetero", tmp_path / "hetero.json", 300, "--vs-pure")
    assert report["compiled"].startswith("compiled (mypyc") and report["pure"].startswith("pure")
    (run,) = report["runs"]
    assert run["events"] == 1000 and len(run["rows"]) == 25  # all, and each of the 24 shapes
    assert all(row["outputs_equal"] for row in run["rows"].values())
    assert (
        run["rows"]["all"]["alerts"]
        == sum(row["alerts"] for name, row in run["rows"].items() if name != "all")
        > 0
    )
    assert sum(row["queries"] for name, row in run["rows"].items() if name != "all") == 48


def test_catalogbench_smoke_commits_every_run_and_merges_under_both_caches(tmp_path):
    summary = smoke_json("cesar.perf.catalogbench", tmp_path / "catalog.json", 300)
    assert [r["cache"] for r in summary["records"]] == ["catalog", "sqlite_default"]
    assert [r["cache_kib"] for r in summary["records"]] == [65536, 2000]
    for record in summary["records"]:
        assert record["runs_committed"] == 80 * 50
        assert 0 < record["merged_rows"] <= 200  # one merge of 64 batches: a row a subscription
        # a row per client (50) a batch, fewer than its runs; none deleted before a 2nd merge
        assert 80 < record["log_rows"] < 80 * 50
        assert record["last_tenth"]["cpu_ms"] > 0 and record["pages"] > 0
