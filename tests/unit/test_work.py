"""The work budget (server/engine/work.py): a subscription past its steps in an epoch is cut
for the rest of it, alone, with one notice per episode, at the same step on every run and
across a restart."""

import pickle

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from cesar.server.engine.work import CALM_EPOCHS

SCHEMAS = {"S": parse_stream_spec("S(k:string,v:int)"), "T": parse_stream_spec("T(v:int)")}
QUERIES = {
    "runaway": "PATTERN AND(S a, S b, S c) WITHIN 4 PUBLISH Runaway",
    "calm": "S NEXT{$1.k = $2.k AND $2.v > $1.v} S PUBLISH Rises",
    "copy": "FILTER{v > 4} S PUBLISH Big",
}


def engine_of(limit: int | None, saved: RunSnapshot | None = None) -> Engine:
    engine = Engine(EngineOptions(max_steps=limit))
    if saved is not None:
        prepare(engine, saved)
    for name, text in QUERIES.items():
        query = compile_query(text, SCHEMAS, name)
        since = None if saved is None else saved.since[name]
        engine.subscribe(name, query.automata, since, query.pattern)
    if saved is not None:
        restore(engine, saved)
    return engine


def epochs(count: int) -> list[list[Event]]:
    return [
        [Event.of("S", t, t, {"k": f"k{(t + i) % 3}", "v": (t * 7 + i) % 10}) for i in range(6)]
        for t in range(1, count + 1)
    ]


def run(engine: Engine, stream: list[list[Event]]) -> list[tuple[str, int, int, tuple]]:
    out = []
    for epoch in stream:
        out += [(e.stream, e.t0, e.t1, e.values) for e in engine.process(epoch)]
        out += [("notice:" + n.subscription, 0, epoch[0].t1, (n.reason,)) for n in engine.notices]
        engine.notices.clear()
        engine.check_valid()
    return out


def test_a_runaway_is_cut_alone_and_told_once_per_episode() -> None:
    stream = epochs(12)
    free = run(engine_of(None), stream)
    capped_engine = engine_of(2_000)
    capped = run(capped_engine, stream)
    for stream_name in ("Rises", "Big"):  # the others lose nothing
        assert [o for o in capped if o[0] == stream_name] == [
            o for o in free if o[0] == stream_name
        ]
    runaway = [o for o in capped if o[0] == "Runaway"]
    assert 0 < len(runaway) < len([o for o in free if o[0] == "Runaway"])
    told = [o for o in capped if o[0].startswith("notice:")]
    assert [o[0] for o in told] == ["notice:runaway"]  # cut at many epochs, told once
    assert "more than 2000 steps" in told[0][3][0] and "max_steps_per_epoch" in told[0][3][0]
    assert capped_engine.counters.cut > 1


def test_the_cut_is_the_same_on_every_run_and_across_a_restart() -> None:
    stream = epochs(14)
    whole = run(engine_of(2_000), stream)
    assert whole == run(engine_of(2_000), stream)
    first = engine_of(2_000)
    before = run(first, stream[:7])
    saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(first).to_data())))
    assert saved.budgets["cut"] == {"runaway": 0}
    assert before + run(engine_of(2_000, saved), stream[7:]) == whole  # no second notice


def test_an_episode_ends_after_calm_epochs() -> None:
    engine = engine_of(2_000)
    run(engine, epochs(6))
    assert "runaway" in engine.work.episodes
    quiet = [[Event.of("S", t, t, {"k": "q", "v": 0})] for t in range(100, 100 + CALM_EPOCHS + 31)]
    run(engine, quiet)  # past WITHIN 30 its partial matches go, then calm epochs count
    assert "runaway" not in engine.work.episodes
    engine.unsubscribe("runaway")
    engine.check_valid()


def test_many_runaways_within_their_budgets_are_cut_by_the_engines() -> None:
    stream = epochs(10)
    free = Engine(EngineOptions())
    capped = Engine(EngineOptions(max_steps=1_000_000, max_engine_steps=3_000))
    for engine in (free, capped):
        for n in range(3):  # three runaways, each far within its own budget
            query = compile_query(QUERIES["runaway"].replace("Runaway", f"R{n}"), SCHEMAS, f"r{n}")
            engine.subscribe(f"r{n}", query.automata, None, query.pattern)
        calm = compile_query(QUERIES["copy"], SCHEMAS, "copy")
        engine.subscribe("copy", calm.automata, None, calm.pattern)
    out_free, out_capped = run(free, stream), run(capped, stream)
    assert [o for o in out_capped if o[0] == "Big"] == [o for o in out_free if o[0] == "Big"]
    told = sorted(o[0] for o in out_capped if o[0].startswith("notice:"))
    assert told and set(told) <= {"notice:r0", "notice:r1", "notice:r2"}
    reasons = [o[3][0] for o in out_capped if o[0].startswith("notice:")]
    assert all("max_engine_steps_per_epoch" in r for r in reasons)
    assert capped.counters.cut > 0
    assert len([o for o in out_capped if o[0].startswith("R")]) < len(
        [o for o in out_free if o[0].startswith("R")]
    )


def test_a_clients_many_subscriptions_are_held_to_its_budget_and_others_lose_nothing() -> None:
    stream = epochs(10)
    free = Engine(EngineOptions())
    held = Engine(EngineOptions(max_steps=1_000_000))
    for engine, loud, quiet in ((free, None, None), (held, ("loud", 900), ("quiet", 900))):
        for n in range(10):  # one client's ten runaways (of two shapes), each within its budget
            text = QUERIES["runaway"].replace("Runaway", f"R{n}").replace("4", str(4 + n % 2))
            query = compile_query(text, SCHEMAS, f"r{n}")
            engine.subscribe(f"r{n}", query.automata, None, query.pattern, loud)
        for name in ("calm", "copy"):  # another client's, under the same budget
            query = compile_query(QUERIES[name], SCHEMAS, name)
            engine.subscribe(name, query.automata, None, query.pattern, quiet)
    out_free, out_held = run(free, stream), run(held, stream)
    for stream_name in ("Big", "Rises"):
        assert [o for o in out_held if o[0] == stream_name] == [
            o for o in out_free if o[0] == stream_name
        ]
    notices = [o for o in out_held if o[0].startswith("notice:")]
    assert {o[0] for o in notices} == {f"notice:r{n}" for n in range(10)}
    assert all("client loud took more than 900 steps" in o[3][0] for o in notices)
    runaway = [o for o in out_held if o[0].startswith("R")]
    assert 0 < len(runaway) < len([o for o in out_free if o[0].startswith("R")])
    assert held.work.members == {"loud": 10, "quiet": 2}
    for n in range(10):
        held.unsubscribe(f"r{n}")
    held.check_valid()
    assert held.work.budgets == {"quiet": 900}


def test_each_subscription_is_told_the_steps_of_the_latest_epoch() -> None:
    """Between epochs each subscription's steps are the latest epoch's, spread or not; a slot
    freed by an unsubscribe and taken by a new subscription brings none of them along."""
    engine = engine_of(1_000_000)  # far from the budget: no spread happens in an epoch
    twin = compile_query("FILTER{v > 5} S PUBLISH Bigger", SCHEMAS, "twin")  # copy's space
    engine.subscribe("twin", twin.automata, None, twin.pattern)
    engine.process(epochs(3)[-1])
    steps = {name: engine.work.steps_of(name) for name in [*QUERIES, "twin"]}
    assert all(steps.values()), steps
    assert not engine.work.spent and not engine.work.pending  # the epoch is over
    freed = engine.work.places("copy")
    engine.unsubscribe("copy")
    query = compile_query("FILTER{v > 4} S PUBLISH Again", SCHEMAS, "again")
    engine.subscribe("again", query.automata, None, query.pattern)
    assert engine.work.places("again") == freed  # the same slots
    assert engine.work.steps_of("again") == 0
    assert {name: engine.work.steps_of(name) for name in ("runaway", "calm", "twin")} == {
        name: steps[name] for name in ("runaway", "calm", "twin")
    }
