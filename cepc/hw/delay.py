"""A delay line with a clock enable: registers when short, block RAM when long."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .ecp5 import NO_COLLISIONS
from .replica import Replica, small_die

REGISTER_STAGES = 4  # a delay line this short is registers; a longer one is a ring in memory
EN_CHUNK = 64  # with `en_next`, on a large die: bits of a stage per copy of the enable


class DelayLine(wiring.Component):
    """``o_data``/``o_valid`` are ``i_data``/``i_valid`` of exactly ``depth`` enabled cycles before.

    Used to carry a tuple's payload (tuple, predicate vector, seq) beside its key
    while the key travels through the partitioner (Woods et al. Fig. 2). Valid
    bits live in flip-flops, so a reset flushes the line; payloads of more than
    four stages live in a ring buffer of ``depth - 1`` words (one BRAM read
    port) followed by an output register.
    """

    def __init__(self, width: int, depth: int, *, en_ahead: bool = False, ahead: bool | int = False):
        if depth < 1:
            raise ValueError(f"delay must be at least 1, not {depth}")
        if ahead and not int(ahead) + 1 <= depth <= REGISTER_STAGES:
            raise ValueError(f"only a line of {int(ahead) + 1} to {REGISTER_STAGES} registers shows its data "
                             f"{int(ahead)} stage{'s' if ahead > 1 else ''} ahead")
        self._width, self._depth = width, depth
        signature = {"en": In(1), "i_valid": In(1), "i_data": In(width), "o_valid": Out(1), "o_data": Out(width)}
        if ahead:  # the data of ``depth - 1`` enabled cycles before: what o_data will be after the next
            signature["o_ahead"] = Out(width)
        for k in range(2, int(ahead) + 1):  # and of ``depth - k``: what o_ahead will be k - 1 edges later
            signature[f"o_ahead{k}"] = Out(width)
        self.en_ahead = en_ahead
        if en_ahead:
            # what `en` will be after the next edge: on a large die a line of registers takes its enables
            # from copies of `en` of its own, EN_CHUNK bits of a stage each, registered from this (one
            # net reaching every enable of network's 4 × 204-bit payload line was its critical path on
            # three of five seeds: 8.5–9.4 ns of routing, no logic)
            signature["en_next"] = In(1)
        super().__init__(signature)

    def elaborate(self, platform):
        m = Module()
        n = self._depth
        valid = [Signal(name=f"v{i}") for i in range(n)]
        with m.If(self.en):
            m.d.sync += valid[0].eq(self.i_valid)
            for i in range(n - 1):
                m.d.sync += valid[i + 1].eq(valid[i])
        m.d.comb += self.o_valid.eq(valid[-1])
        if n <= REGISTER_STAGES:
            stages = [Signal(self._width, name=f"d{i}", reset_less=True) for i in range(n)]  # (valid: v*)
            copies = self.en_ahead and not small_die(platform)
            step = EN_CHUNK if copies else self._width
            for i in range(n):
                for lo in range(0, self._width, step):
                    hi = min(lo + step, self._width)
                    en = self.en
                    if copies:
                        copy = m.submodules[f"{Replica.PREFIX}en{i}_{lo}"] = Replica(1, init=1)
                        m.d.comb += [copy.d.eq(self.en_next), copy.en.eq(1)]
                        en = copy.q
                    with m.If(en):
                        m.d.sync += stages[i][lo:hi].eq(self.i_data[lo:hi] if i == 0 else stages[i - 1][lo:hi])
            m.d.comb += self.o_data.eq(stages[-1])
            if "o_ahead" in self.signature.members:
                m.d.comb += self.o_ahead.eq(stages[-2])
            for k in range(2, n):
                if f"o_ahead{k}" in self.signature.members:
                    m.d.comb += getattr(self, f"o_ahead{k}").eq(stages[-1 - k])
            return m
        # a ring of n - 1 words plus an output register: block RAM's slow clock-to-out
        # (5.6 ns on ECP5) ends in a flip-flop instead of the logic after the line
        ring_depth = n - 1
        # (read a word after the one written: never the word being written, NO_COLLISIONS)
        m.submodules.ring = ring = memory.Memory(shape=self._width, depth=ring_depth, init=[], attrs=NO_COLLISIONS)
        wr = ring.write_port()
        rd = ring.read_port()
        ptr = Signal(range(ring_depth))
        nxt = Signal(range(ring_depth))
        with m.If(ptr != ring_depth - 1):
            m.d.comb += nxt.eq(ptr + 1)
        out = Signal(self._width, reset_less=True)
        # written at ptr now, read back when ptr comes round again (n - 1 cycles), then registered
        m.d.comb += [
            wr.addr.eq(ptr), wr.data.eq(self.i_data), wr.en.eq(self.en),
            rd.addr.eq(nxt), rd.en.eq(self.en), self.o_data.eq(out),
        ]
        with m.If(self.en):
            m.d.sync += [ptr.eq(nxt), out.eq(rd.data)]
        return m
