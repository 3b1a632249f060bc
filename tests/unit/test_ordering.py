"""CallOrder: calls run in their numbers' order whatever order their threads arrive in."""

from __future__ import annotations

import threading
import time

import pytest

from cesar.server.shard.ordering import CallOrder, OutOfOrder, Stamp


def call(order: CallOrder, stamp: Stamp, ran: list[int], errors: list[str]) -> threading.Thread:
    """A thread that waits for ``stamp``'s turn, notes its number and finishes."""

    def body() -> None:
        try:
            order.wait(stamp)
        except OutOfOrder as exc:
            errors.append(f"{stamp.number}: {exc}")
            return
        ran.append(stamp.number)
        order.finish(stamp)

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def settle(order: CallOrder, waiting: int) -> None:
    """Wait until ``waiting`` calls of the session have arrived and not finished."""
    deadline = time.monotonic() + 10
    while len(order.arrived) < waiting:
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_calls_arriving_backwards_run_in_their_numbers_order() -> None:
    order = CallOrder()
    ran: list[int] = []
    errors: list[str] = []
    order.wait(Stamp("s", 1))  # call 1 holds its turn while 5, 4, 3, 2 arrive
    threads = []
    for number in (5, 4, 3, 2):
        threads.append(call(order, Stamp("s", number), ran, errors))
    settle(order, 5)
    assert ran == []
    order.finish(Stamp("s", 1))
    for thread in threads:
        thread.join(10)
    assert (ran, errors) == ([2, 3, 4, 5], [])
    assert order.waited == 4  # each found the one before it unfinished


def test_calls_sent_one_after_another_never_wait() -> None:
    order = CallOrder()
    for number in range(1, 6):
        order.wait(Stamp("s", number))
        order.finish(Stamp("s", number))
    assert order.waited == 0 and order.ran == 5


def test_a_call_whose_predecessor_never_arrives_fails_and_so_do_those_after_it() -> None:
    order = CallOrder(arrival_seconds=0.2)
    ran: list[int] = []
    errors: list[str] = []
    order.wait(Stamp("s", 1))
    order.finish(Stamp("s", 1))
    later = call(order, Stamp("s", 4), ran, errors)  # 3 did arrive: 4 waits on it
    started = time.monotonic()
    with pytest.raises(OutOfOrder, match="call 2 of session s never arrived"):
        order.wait(Stamp("s", 3))
    assert time.monotonic() - started >= 0.2
    later.join(10)
    assert ran == [] and errors == ["4: call 2 of session s never arrived"]
    with pytest.raises(OutOfOrder, match="never arrived"):
        order.wait(Stamp("s", 2))  # too late: the session is broken


def test_a_new_session_fails_the_old_ones_waiting_calls_and_starts_over() -> None:
    order = CallOrder()
    ran: list[int] = []
    errors: list[str] = []
    order.wait(Stamp("old", 1))
    waiting = call(order, Stamp("old", 2), ran, errors)
    settle(order, 2)
    order.wait(Stamp("new", 1))  # the front reconnected: its calls are numbered from 1 again
    waiting.join(10)
    assert errors == ["2: a newer session of the front began"]
    order.finish(Stamp("old", 1))  # the old call that was running ends: nothing changes
    order.finish(Stamp("new", 1))
    order.wait(Stamp("new", 2))
    assert (order.session, order.ran) == ("new", 1)


def test_a_call_ahead_of_its_sessions_first_waits_for_it() -> None:
    order = CallOrder()
    ran: list[int] = []
    errors: list[str] = []
    early = call(order, Stamp("s", 2), ran, errors)
    time.sleep(0.05)
    assert ran == []
    order.wait(Stamp("s", 1))
    order.finish(Stamp("s", 1))
    early.join(10)
    assert (ran, errors, order.waited) == ([2], [], 1)


def test_a_call_of_a_session_that_never_begins_fails() -> None:
    order = CallOrder(arrival_seconds=0.1)
    with pytest.raises(OutOfOrder, match="session s never began here"):
        order.wait(Stamp("s", 3))


def test_calls_without_a_stamp_go_at_once() -> None:
    order = CallOrder()
    order.wait(Stamp("s", 1))
    order.wait(None)  # not one of the front's numbered calls: only the lock orders it
    order.finish(None)
    assert order.ran == 0


@pytest.mark.parametrize("value", ["", "7", "s:", "s:0", "s:-1", "s:x", ":3"])
def test_a_malformed_stamp_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="cesar-order must be"):
        Stamp.of([("cesar-order", value)])
