"""Drive the generated top in ``amaranth.sim`` and compare it with the reference matcher.

Shared by the hardware tests. Tuples are packed with the design's own
:class:`~cepc.plan.TuplePlan`, cut into AXI-Stream beats (tuples straddle beats,
a packet's last beat is partial with ``tkeep``), sent with random ``tvalid``
gaps, and records are taken with random ``tready`` backpressure.
"""

from __future__ import annotations

import gc
import random
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import pandas as pd
from amaranth.hdl import Elaboratable, Fragment
from amaranth.sim import Simulator

from cepc.hw.top import Top
from cepc.lang.check import Checked
from cepc.nfa import powerset
from cepc.nfa.lower import lower
from cepc.plan import DesignPlan
from cepc.simulate import decode_record, record_rows

from oracle import expected_rows


def beats(data: bytes, width: int, last: bool = True) -> list[tuple[int, int, int]]:
    """One packet as (tdata, tkeep, tlast) beats; the last beat is partial where the bytes run out."""
    wb = width // 8
    out = []
    for i in range(0, len(data), wb):
        chunk = data[i:i + wb]
        out.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1, int(last and i + wb >= len(data))))
    return out


class Ice40:
    """Stands for an iCE40 platform (Amaranth names the family so): the design built for a small die."""
    family = "iCE40"


class OnPlatform(Elaboratable):
    """``inner`` elaborated as for ``platform`` (simulation itself has none)."""

    def __init__(self, inner, platform):
        self.inner, self.platform = inner, platform

    def elaborate(self, platform):
        return Fragment.get(self.inner, self.platform)


@dataclass
class SimResult:
    records: list[dict] = field(default_factory=list)  # decoded match records, in output order
    spilled: list[int] = field(default_factory=list)  # packed tuples on the spill stream
    counters: dict = field(default_factory=dict)
    cycles: int = 0
    first_record_cycle: int | None = None
    input_cycles: int = 0  # the cycle the source's last beat was taken in


def simulate(design: DesignPlan, packets: list[list[tuple[int, int, int]]], *, bus_width: int = 32,
             partitions: int = 8, stall: float = 0.0, backpressure: float = 0.0, seed: int = 0,
             idle: int | None = None, evict_after: int | None = None, partitioner: str = "pipeline",
             decoder: bool = True, platform=None, update_cycles: int = 1, hazards: str = "forward",
             two_beat_fifos: tuple[str, ...] = (), late_measures: bool = False, slot_period: int = 2) -> SimResult:
    """``platform``: elaborate the top as for it (:class:`Ice40`: as for the iCEBreaker)."""
    top = Top(design, bus_width=bus_width, partitions=partitions, evict_after=evict_after, partitioner=partitioner,
              decoder=decoder, update_cycles=update_cycles, hazards=hazards, two_beat_fifos=two_beat_fifos,
              late_measures=late_measures, slot_period=slot_period)
    rng = random.Random(seed)
    result = SimResult()
    done = [False]  # the source has sent everything; the sink then waits `idle` quiet cycles
    idle = idle if idle is not None else partitions + 64

    async def source(ctx):
        for packet in packets:
            for data, keep, last in packet:
                while rng.random() < stall:
                    ctx.set(top.s_tvalid, 0)
                    await ctx.tick()
                ctx.set(top.s_tdata, data)
                ctx.set(top.s_tkeep, keep)
                ctx.set(top.s_tlast, last)
                ctx.set(top.s_tvalid, 1)
                await ctx.tick().until(top.s_tready)
        ctx.set(top.s_tvalid, 0)
        result.input_cycles = result.cycles
        done[0] = True

    async def sink(ctx):
        quiet = 0
        cycle = 0
        offered = {"m": None, "spill": None}  # a word offered and not taken last cycle
        while not done[0] or quiet < idle:
            if not done[0]:
                quiet = 0
            ready = rng.random() >= backpressure
            ctx.set(top.m_tready, ready)
            ctx.set(top.spill_tready, rng.random() >= backpressure)
            _, _, mv, md, mr, sv, sd, sr = await ctx.tick().sample(
                top.m_tvalid, top.m_tdata, top.m_tready, top.spill_tvalid, top.spill_tdata, top.spill_tready)
            cycle += 1
            result.cycles = cycle
            quiet += 1
            # AXI-Stream: an offered word stays offered, unchanged, until taken
            for name, valid, data, ready in (("m", mv, md, mr), ("spill", sv, sd, sr)):
                if offered[name] is not None:
                    assert valid and data == offered[name], f"{name} changed while offered, cycle {cycle}"
                offered[name] = data if valid and not ready else None
            if mv and mr:
                result.records.append(decode_record(design, md))
                if result.first_record_cycle is None:
                    result.first_record_cycle = cycle
                quiet = 0
            if sv and sr:
                result.spilled.append(sd)
                quiet = 0
        result.cycles = cycle
        for name in ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow"):
            result.counters[name] = ctx.get(getattr(top, name))

    sim = Simulator(OnPlatform(top, platform) if platform is not None else top)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()
    return result


def hw_rows(design: DesignPlan, result: SimResult, checked: Checked) -> list[list[str]]:
    """Records as match-file rows (SPEC §5), sorted by seq then query order."""
    return record_rows(checked, design, result.records)


def run_and_compare(checked: Checked, frame: pd.DataFrame, max_length: int | None = None,
                    dfa_encoding: str | None = None, **kw) -> SimResult:
    """Simulate ``frame`` through the design of ``checked`` and assert the records equal the reference.

    ``dfa_encoding`` (onehot or binary): build every query as its DFA (``--automaton dfa``)."""
    design = lower(checked, max_length)
    if dfa_encoding is not None:
        design = powerset.design_dfa(design, dfa_encoding)
    data = b"".join(design.tuple.to_bytes(row) for row in frame.to_dict("records"))
    packet_tuples = kw.pop("packet_tuples", None)
    width = kw.get("bus_width", 32)
    if packet_tuples:
        tb = design.tuple.nbytes
        step = packet_tuples * tb
        packets = [beats(data[i:i + step], width) for i in range(0, len(data), step)]
    else:
        packets = [beats(data, width)]
    result = simulate(design, packets, **kw)
    assert result.counters["dropped"] == 0 and result.counters["overflow"] == 0
    assert hw_rows(design, result, checked) == expected_rows(checked, frame)
    assert result.counters["tuples_in"] == len(frame)
    assert result.counters["matches_out"] == len(result.records)
    return result


@contextmanager
def unused_elaboratables():
    """The ``UnusedElaboratable`` warnings of what was made inside the block and dropped unelaborated,
    as a list of their messages, filled as the block ends (after a garbage collection: such objects sit
    in reference cycles). Amaranth holds the warning back until something is elaborated in the process;
    the block enables it, as in a full run, where pytest reported it under whichever later test the
    collector happened to run in."""
    from amaranth.hdl import UnusedElaboratable

    found: list[str] = []
    held = UnusedElaboratable.__dict__.get("_MustUse__silence")
    UnusedElaboratable._MustUse__silence = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield found
            gc.collect()
        found += [str(w.message) for w in caught if w.category is UnusedElaboratable]
    finally:
        UnusedElaboratable._MustUse__silence = held
