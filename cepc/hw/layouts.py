"""Tuple and match-record layouts: the one place bit widths live.

The tuple layout follows the wire format of SPEC §1 (fields in declaration
order, LSB-first); Python benches pack and unpack through :class:`~cepc.plan.TuplePlan`
with the same offsets, so they cannot drift from the hardware.
"""

from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from ..plan import DesignPlan, QueryPlan, TuplePlan

SEQ_WIDTH = 48  # arrival index of a tuple; wraps after 2**48 tuples
COUNTER_WIDTH = 48  # status counters


def tuple_layout(tup: TuplePlan) -> data.StructLayout:
    return data.StructLayout({f.name: (signed(f.width) if f.signed else unsigned(f.width)) for f in tup.fields})


def key_width(tup: TuplePlan, query: QueryPlan) -> int:
    return sum(tup.field(k).width for k in query.key_fields)


def query_id_width(design: DesignPlan) -> int:
    return max(1, (len(design.queries) - 1).bit_length())


def record_key_width(design: DesignPlan) -> int:
    return max([1] + [key_width(design.tuple, q) for q in design.queries])


def record_measures_width(design: DesignPlan) -> int:
    return max([0] + [q.measures_width for q in design.queries])


def record_layout(design: DesignPlan) -> data.StructLayout:
    """A match record: the query's key fields packed LSB-first in PARTITION BY order, seq, query id,
    then (when some query has MEASURES) the query's measures packed LSB-first in declared order."""
    fields = {
        "key": unsigned(record_key_width(design)),
        "seq": unsigned(SEQ_WIDTH),
        "query": unsigned(query_id_width(design)),
    }
    if record_measures_width(design):
        fields["measures"] = unsigned(record_measures_width(design))
    return data.StructLayout(fields)


def padded(bits: int) -> int:
    """Bits rounded up to whole bytes, as on the wire."""
    return (bits + 7) // 8 * 8
