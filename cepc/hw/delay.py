"""A delay line with a clock enable: registers when short, block RAM when long."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

REGISTER_STAGES = 4  # a delay line this short is registers; a longer one is a ring in memory


class DelayLine(wiring.Component):
    """``o_data``/``o_valid`` are ``i_data``/``i_valid`` of exactly ``depth`` enabled cycles before.

    Used to carry a tuple's payload (tuple, predicate vector, seq) beside its key
    while the key travels through the partitioner (Woods et al. Fig. 2). Valid
    bits live in flip-flops, so a reset flushes the line; payloads of more than
    four stages live in a ring buffer of ``depth - 1`` words (one BRAM read
    port) followed by an output register.
    """

    def __init__(self, width: int, depth: int):
        if depth < 1:
            raise ValueError(f"delay must be at least 1, not {depth}")
        self._width, self._depth = width, depth
        super().__init__({"en": In(1), "i_valid": In(1), "i_data": In(width), "o_valid": Out(1),
                          "o_data": Out(width)})

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
            with m.If(self.en):
                m.d.sync += stages[0].eq(self.i_data)
                for i in range(n - 1):
                    m.d.sync += stages[i + 1].eq(stages[i])
            m.d.comb += self.o_data.eq(stages[-1])
            return m
        # a ring of n - 1 words plus an output register: block RAM's slow clock-to-out
        # (5.6 ns on ECP5) ends in a flip-flop instead of the logic after the line
        ring_depth = n - 1
        m.submodules.ring = ring = memory.Memory(shape=self._width, depth=ring_depth, init=[])
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
