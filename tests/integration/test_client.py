"""cesar.client against a real server (front + 2 shards) over loopback gRPC: Python values in,
alerts out equal to ``cesar run``'s, idempotent subscribing across a restart, the server's
reasons in exceptions, and listeners that resume and reconnect."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cesar.automata.schema import Event
from cesar.client import (
    AlreadyExists,
    AsyncClient,
    Client,
    InvalidArgument,
    NotFound,
    Subscription,
    Unavailable,
)
from cesar.perf.serverproc import QUERIES, Server, expected_lines, normalized, sample_events

DROPS = QUERIES[1].read_text()


def rows(events: list[Event]) -> list[dict[str, object]]:
    """``events`` as the client takes them: attributes, t0 and t1."""
    return [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in events]


def lines(alerts: list) -> Counter[str]:  # type: ignore[type-arg]
    """Alerts as ``cesar run``'s lines, normalized as the expected ones are."""
    found: Counter[str] = Counter()
    for alert in alerts:
        record = json.loads(alert.json())
        del record["subscription"], record["seq"]
        found[json.dumps(record)] += 1
    return normalized(found)


def expected(query: str, events: list[Event]) -> Counter[str]:
    return normalized(expected_lines([("q", query)], events))


def client_of(server: Server, **options: object) -> Client:
    return Client(server.address, **options)  # type: ignore[arg-type]


def test_python_values_in_and_alerts_equal_cesar_run(server: Server) -> None:
    events = sample_events()
    want = expected(DROPS, events)
    with client_of(server) as client:
        sub = client.subscribe(DROPS)
        assert (sub.id, sub.stream, sub.key_attribute) == ("s1", "Drops", "Name")
        published = client.publish("Stock", rows(events), batch=300)
        assert (published.accepted, published.rejected, published.duplicate) == (
            len(events),
            (),
            False,
        )
        with client.listen(after=0, timeout=60) as listener:
            got = []
            for alert in listener:
                got.append(alert)
                if len(got) == sum(want.values()):
                    break
        assert lines(got) == want
        assert [a.seq for a in got] == list(range(1, len(got) + 1))
        assert got[0].time is not None and got[0].time.endswith("Z")  # [min]: ISO, UTC
        assert client.subscriptions()[0].last_seq == len(got)


MARKET_HOURS = (
    "FILTER{MINUTE_OF_DAY(t1) >= 871 AND MINUTE_OF_DAY(t1) <= 1260} Stock PUBLISH Regular"
)
ABOVE_AVERAGE = "FILTER{Price > 1.001 * AVG_OVER(Price, 30 MIN, Name)} Stock PUBLISH Above"


def test_queries_reading_derived_attributes_publish_what_cesar_run_publishes(
    server: Server,
) -> None:
    # A time function in a FILTER, a window without SELECT: the server refused both once (the
    # published stream's spec held "MINUTE_OF_DAY(t1)", which no spec can say).
    events = sample_events()
    want = normalized(expected_lines([("r", MARKET_HOURS), ("a", ABOVE_AVERAGE)], events))
    assert sum(want.values()) > 100
    with client_of(server) as client:
        client.subscribe(MARKET_HOURS)
        client.subscribe(ABOVE_AVERAGE)
        specs = {s.name: s.spec for s in client.streams()}
        assert specs["Regular"] == "Regular(Name:string,Price:float,Volume:int)[min]"
        assert specs["Above"] == "Above(Name:string,Price:float,Volume:int)[min]"
        assert client.publish("Stock", rows(events), batch=500).rejected == ()
        got: list = []  # type: ignore[type-arg]
        with client.listen(after=0, timeout=60) as listener:
            listener.deliver(got.extend, count=sum(want.values()))
        assert lines(got) == want


def test_a_window_over_a_published_stream_is_refused_and_publishing_goes_on(
    server: Server,
) -> None:
    # Accepted once, it failed the shard on the next publish (UNAVAILABLE for every client).
    events = sample_events()
    with client_of(server) as client:
        client.subscribe(MARKET_HOURS)
        with pytest.raises(InvalidArgument) as bad:
            client.subscribe("FILTER{HOUR(t1) > 15} Regular PUBLISH Late")
        assert bad.value.reason.startswith("line 1, column 8: HOUR(t1) reads Regular, a stream")
        assert client.publish("Stock", rows(events), batch=500).rejected == ()
        assert [s.stream for s in client.subscriptions()] == ["Regular"]


def test_slices_of_one_epoch_published_open_lose_nothing_and_closed_say_why(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    events = sample_events()
    cut = next(i for i in range(1000, len(events)) if events[i - 1].t1 == events[i].t1)
    want = expected(DROPS, events)
    with client_of(server) as client:
        client.subscribe(DROPS)
        first = client.publish("Stock", rows(events[:cut]), close=False)
        assert first.closed is None and str(first).endswith("time left open")
        rest = client.publish("Stock", rows(events[cut:]))
        assert rest.rejected == () and rest.closed == events[-1].t1
        got: list = []  # type: ignore[type-arg]
        with client.listen(after=0, timeout=60) as listener:
            listener.deliver(got.extend, count=sum(want.values()))
        assert lines(got) == want
        # The same slices into another stream, the first closing its last epoch (the default):
        # the second's events of that epoch are late, and the call says so.
        # (in another unit: a close promises it for every stream counting time in its unit)
        client.define_stream("Quote(Name:string,Price:float,Volume:int)[ms]")
        quotes = [{**row, "t0": row["t1"]} for row in rows(events)]
        assert client.publish("Quote", quotes[:cut]).closed == events[cut - 1].t1
        late = sum(1 for e in events[cut:] if e.t1 == events[cut - 1].t1)
        with caplog.at_level("WARNING", logger="cesar.client"):
            refused = client.publish("Quote", quotes[cut:])
        assert len(refused.rejected) == late and refused.accepted == len(events) - cut - late
        assert all("an earlier publish closed its epoch" in r.reason for r in refused.rejected)
        assert f"{late} rejected ({late} t1: late)" in str(refused)
        assert f"publish to Quote: {refused.accepted} accepted, {late} rejected" in caplog.text


def test_datetimes_become_ticks_and_a_bad_event_is_rejected_with_field_and_reason(
    server: Server,
) -> None:
    with client_of(server) as client:
        client.define_stream("Quote(Sym:string,Px:float,Up:bool)[sec, America/New_York]")
        sub = client.subscribe("SELECT * FROM FILTER{Px > 10}(Quote) PUBLISH Big")
        opened = datetime(2020, 10, 26, 9, 30, tzinfo=UTC) + timedelta(hours=4)
        published = client.publish(
            "Quote",
            [
                {"t1": opened, "Sym": "IBM", "Px": 131, "Up": True},  # an int for a float
                {"t1": opened, "Sym": "IBM", "Px": "high", "Up": False},
                {
                    "t0": opened,
                    "t1": opened + timedelta(seconds=5),
                    "Sym": "A",
                    "Px": 11.5,
                    "Up": 0 == 1,
                },
            ],
        )
        assert published.accepted == 2
        (rejection,) = published.rejected
        assert (rejection.index, rejection.field) == (1, "attributes.Px")
        assert sub.key_attribute  # partitioned: alerts of different keys in no set order
        got = sorted(client.listen([sub.id], after=0, timeout=5), key=lambda a: a.t1)
        assert [(a.t0, a.t1, a.attrs) for a in got] == [
            (1603719000, 1603719000, {"Sym": "IBM", "Px": 131, "Up": True}),
            (1603719000, 1603719005, {"Sym": "A", "Px": 11.5, "Up": False}),
        ]
        assert got[0].time == "2020-10-26T09:30:00-04:00"  # the stream's zone, with its offset
        assert got[1].time == "2020-10-26T09:30:00-04:00/2020-10-26T09:30:05-04:00"
        # Quote's [sec] watermark closed no [min] epoch: Stock's quotes are not late
        stock = [{"t1": 26728651, "Name": "IBM", "Price": 1.0, "Volume": 1}]
        assert client.publish("Stock", stock).accepted == 1
        with pytest.raises(TypeError, match=r"Quote\.Px: \[1\] is not"):
            client.publish("Quote", [{"t1": 1, "Sym": "A", "Px": [1], "Up": True}])


def test_errors_are_exceptions_that_keep_the_servers_reason(server: Server) -> None:
    with client_of(server) as client:
        with pytest.raises(InvalidArgument) as bad:
            client.subscribe("SELECT * FROM\n  FILTER{Price >}(Stock)")
        assert bad.value.code == "INVALID_ARGUMENT"
        assert bad.value.reason.startswith("line 2, column 17: unexpected '}'; expected a term")
        with pytest.raises(NotFound, match="s9"):
            client.unsubscribe("s9")
        results = client.subscribe_many([DROPS, "FILTER{", DROPS])
        assert isinstance(results[0], Subscription)
        assert isinstance(results[1], InvalidArgument)
        assert results[1].reason.startswith("line 1, column 8")
        assert isinstance(results[2], AlreadyExists) and "Drops" in results[2].reason


def test_a_retried_subscribe_returns_the_subscription_its_key_made_across_a_restart(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path / "data").start()
    try:
        with client_of(server) as client:
            first = client.subscribe(DROPS, idempotency_key="drops-1")
            assert client.subscribe(DROPS, idempotency_key="drops-1") == first
            with pytest.raises(AlreadyExists, match=r"drops-1.*s1 from another request"):
                client.subscribe(DROPS.replace("0.998", "0.99"), idempotency_key="drops-1")
            batch = client.subscribe_many(
                ["FILTER{Price > 1}(Stock)", "FILTER{Price > 1}(Stock)", DROPS],
                ["big", "big", "drops-1"],
            )
            assert [getattr(r, "id", r) for r in batch] == ["s2", "s2", "s1"]
            with pytest.raises(InvalidArgument, match="longer than 200 bytes"):
                client.subscribe(DROPS, idempotency_key="k" * 201)
        assert server.stop() == 0
        server.start()
        with client_of(server) as client:
            assert client.subscribe(DROPS, idempotency_key="drops-1").id == "s1"
            assert [s.id for s in client.subscriptions()] == ["s1", "s2"]
            client.unsubscribe("s1")  # the key is free again with its subscription gone
            assert client.subscribe(DROPS, idempotency_key="drops-1").id == "s3"
        with Client(server.address, token=None) as other:
            assert other.subscribe_many(["FILTER{Price > 2}(Stock)"], ["big"])[0] != batch[0]
    finally:
        server.stop()


def test_a_listener_resumes_from_its_checkpoint_and_reconnects_through_a_restart(
    tmp_path: Path,
) -> None:
    """Half the sample, a listener that delivers to a callable and stops part-way, the server
    restarted, the other half: a second listener from the checkpoint file gets the rest, each
    alert once, and its own reconnect through a second restart loses nothing."""
    events = sample_events()
    half = len(events) // 2
    while events[half].t1 == events[half - 1].t1:
        half += 1
    total = sum(expected(DROPS, events).values())
    checkpoint = tmp_path / "seqs.json"
    server = Server(tmp_path / "data", "--port", "0").start()
    try:
        with client_of(server) as client:
            client.subscribe(DROPS)
            client.publish("Stock", rows(events[:half]))
            got: list = []  # type: ignore[type-arg]
            with client.listen(after=0, checkpoint=checkpoint, timeout=60) as listener:
                assert listener.deliver(got.extend, count=10) == 10
            assert json.loads(checkpoint.read_text()) == {"s1": 10}
        address = server.address
        server.stop()
        server.args += ["--port", address.rsplit(":", 1)[1]]
        server.start()
        with Client(address) as client:
            said: list[str] = []
            listener = client.listen(checkpoint=checkpoint, reconnect_for=60, timeout=120)
            listener.on_lost = said.append

            def restart_then_publish() -> None:
                while len(got) < 20:
                    threading.Event().wait(0.05)
                server.stop()
                server.start()
                with Client(address) as publisher:
                    publisher.publish("Stock", rows(events[half:]))

            helper = threading.Thread(target=restart_then_publish)
            helper.start()
            listener.deliver(got.extend, count=total - 10)
            helper.join()
            listener.close()
            assert said and "the server went away" in said[0]
        assert [a.seq for a in got] == list(range(1, total + 1))
        assert lines(got) == expected(DROPS, events)
        assert json.loads(checkpoint.read_text()) == {"s1": total}
    finally:
        server.stop()


def test_a_listener_gives_up_when_no_server_answers(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        client = client_of(server)
        client.subscribe(DROPS)
        listener = client.listen(reconnect_for=1.0)
        server.stop()
        with pytest.raises(Unavailable, match="no server answered for 1 s"):
            list(listener)
        client.close()
    finally:
        server.stop()


def test_the_asyncio_client_does_what_the_blocking_one_does(server: Server) -> None:
    events = sample_events()
    want = expected(DROPS, events)

    async def run() -> list:  # type: ignore[type-arg]
        async with AsyncClient(server.address) as client:
            sub = await client.subscribe(DROPS, idempotency_key="d")
            assert (await client.subscribe(DROPS, idempotency_key="d")) == sub
            published = await client.publish("Stock", rows(events))
            assert published.accepted == len(events)
            with pytest.raises(InvalidArgument):
                await client.explain("FILTER{")
            assert "Price > 1" in await client.explain("FILTER{Price > 1}(Stock)")
            got = []
            listener = await client.listen(after=0, timeout=60)
            async for alert in listener:
                got.append(alert)
                if len(got) == sum(want.values()):
                    break
            listener.close()
            stats = await client.stats()
            assert stats["front"]["alerts"] >= len(got)
            return got

    got = asyncio.run(run())
    assert lines(got) == want
