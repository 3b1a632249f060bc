"""The front's admission (server/front/admission.py): a turn's rows in (t1, arrival) order."""

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from cesar.server.front.admission import in_order


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=12), st.booleans())
def test_in_order_is_the_stable_sort_by_t1_then_arrival(rows, presorted) -> None:
    """Ties included (equal arrivals keep their order: the index column tells them apart); a
    table already in order is returned as it is."""
    if presorted:
        rows = sorted(rows)
    table = pa.table(
        {
            "t1": pa.array([t1 for t1, _ in rows], pa.int64()),
            "arrival": pa.array([a for _, a in rows], pa.int64()),
            "index": pa.array(range(len(rows)), pa.int64()),
        }
    )
    order = pc.sort_indices(table, [("t1", "ascending"), ("arrival", "ascending")])
    assert in_order(table).to_pylist() == table.take(order).to_pylist()
    assert (in_order(table) is table) == (order.to_pylist() == list(range(len(rows))))
