"""Tuple and match-record layouts: the one place bit widths live.

The tuple layout follows the wire format of SPEC §1 (fields in declaration
order, LSB-first); Python benches pack and unpack through :class:`~cepc.plan.TuplePlan`
with the same offsets, so they cannot drift from the hardware.
"""

from __future__ import annotations

import re

from amaranth.hdl import Value, signed, unsigned
from amaranth.lib import data

from ..plan import DesignPlan, QueryPlan, TuplePlan

SEQ_WIDTH = 48  # arrival index of a tuple; wraps after 2**48 tuples
COUNTER_WIDTH = 48  # status counters


def tuple_layout(tup: TuplePlan) -> data.StructLayout:
    """The tuple's fields, each named ``ident(field name)``: read a field with :func:`field`."""
    return data.StructLayout({ident(f.name): (signed(f.width) if f.signed else unsigned(f.width))
                              for f in tup.fields})


def field(view, name: str) -> Value:
    """Field ``name`` (as the query spells it) of a tuple view of :func:`tuple_layout`."""
    return Value.cast(getattr(view, ident(name)))


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


def ident(text: str) -> str:
    """A name fit for a signal, submodule or tuple field: a quoted field, query, variable or measure
    name may hold any character, which Yosys's RTLIL reader (and so the Verilog) does not take. Each
    other character becomes ``_xHH_``, so distinct names stay distinct ("a b" is ``a_x20_b``)."""
    return re.sub(r"[^A-Za-z0-9_]", lambda m: f"_x{ord(m.group()):02x}_", text)


def hw_names(design: DesignPlan) -> list[str]:
    """Each query's name in the hardware (signals, submodules), distinct even where ident() maps two alike."""
    names: list[str] = []
    for q in design.queries:
        name = ident(q.name)
        if name in names:
            name = f"{name}_q{q.index}"
        names.append(name)
    return names


def padded(bits: int) -> int:
    """Bits rounded up to whole bytes, as on the wire."""
    return (bits + 7) // 8 * 8
