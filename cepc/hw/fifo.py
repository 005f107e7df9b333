"""The top's output FIFOs off the iCE40: a write register in front of LUT RAM read without a clock.

Each query's match records, and the tuples the partitioners could not place, leave through a
16-deep FIFO. On a large die the FIFO sits by the output, far from the partitioner and the NFA core
whose registers decide a write; and a buffered FIFO's output register puts the pop onto the enables
of a word-wide register. So here:

* a write is registered first (``w_data``, ``w_en``), beside the memory, and stored the next cycle;
* the memory is LUT RAM read without a clock (an ECP5's TRELLIS_DPR16X4; distributed RAM, MLABs):
  the head word is offered straight from it, and taking it moves a pointer and the count only;
* ``w_level`` counts the words stored, not the one in the write register: the caller keeps a slot
  for it (:data:`cepc.hw.top.STALL_MARGIN`). ``r_rdy``, and whether there is space, are registers;
  ``r_rdy_next`` is what ``r_rdy`` will be after the next edge, for a caller that registers a
  choice among several FIFOs (the top's arbiter).

A word written at one edge can be read after the second, as from :class:`BlockRamFifo` (which the
iCE40, without LUT RAM, uses in block RAM): both back ends take the same cycles.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .ecp5 import NO_COLLISIONS


class OutputFifo(wiring.Component):
    """``depth`` words of ``width`` bits; ``amaranth.lib.fifo``'s port names. A write when full is
    lost (the top stalls its pipeline before that can happen)."""

    def __init__(self, width: int, depth: int):
        if depth < 2:
            raise ValueError(f"the FIFO needs at least two words, not {depth}")
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_level": Out(range(depth + 1)),
                          "r_data": Out(width), "r_rdy": Out(1), "r_rdy_next": Out(1), "r_en": In(1)})

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        m.submodules.storage = storage = Memory(shape=self.width, depth=depth, init=[])
        w_port = storage.write_port()
        r_port = storage.read_port(domain="comb")

        data = Signal(self.width, reset_less=True)  # the write register
        valid = Signal()
        m.d.sync += [valid.eq(self.w_en), data.eq(self.w_data)]

        produce = Signal(range(depth))
        consume = Signal(range(depth))
        level = Signal(range(depth + 1))
        ready = Signal()  # level != 0, registered
        space = Signal(init=1)  # level != depth, registered
        writing = Signal()
        reading = Signal()
        m.d.comb += [
            writing.eq(valid & space), reading.eq(self.r_en & ready),
            w_port.addr.eq(produce), w_port.data.eq(data), w_port.en.eq(writing),
            r_port.addr.eq(consume),
            self.r_data.eq(r_port.data), self.r_rdy.eq(ready), self.w_level.eq(level),
        ]
        with m.If(writing):
            m.d.sync += produce.eq(_wrap(produce, depth))
        with m.If(reading):
            m.d.sync += consume.eq(_wrap(consume, depth))
        m.d.comb += self.r_rdy_next.eq(ready)
        with m.If(writing & ~reading):
            m.d.sync += [level.eq(level + 1), space.eq(level != depth - 1)]
            m.d.comb += self.r_rdy_next.eq(1)
        with m.Elif(reading & ~writing):
            m.d.sync += [level.eq(level - 1), space.eq(1)]
            m.d.comb += self.r_rdy_next.eq(level != 1)
        m.d.sync += ready.eq(self.r_rdy_next)
        return m


class BlockRamFifo(wiring.Component):
    """The output FIFO on the iCE40: ``depth`` words, ``depth - 1`` of them in block RAM read into its
    own output latch, the head offered from there; cycle for cycle amaranth's SyncFIFOBuffered (a word
    written at one edge is offered after the second, and counted in ``w_level`` at once), whose logic
    this is. Its memory is read only when it holds a word and written only when it has room, so a word
    is never read as it is written: marked so (``NO_COLLISIONS``), Yosys maps it onto block RAM alone,
    where SyncFIFOBuffered's took two flip-flops and a LUT a bit more (the UP5K is short of logic cells).
    """

    def __init__(self, width: int, depth: int):
        if depth < 2:
            raise ValueError(f"the FIFO needs at least two words, not {depth}")
        self.width, self.depth = width, depth
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1), "w_level": Out(range(depth + 1)),
                          "r_data": Out(width), "r_rdy": Out(1), "r_en": In(1)})

    def elaborate(self, platform):
        m = Module()
        inner = self.depth - 1
        m.submodules.storage = storage = Memory(shape=self.width, depth=inner, init=[], attrs=NO_COLLISIONS)
        # (kept, for a test of what NO_COLLISIONS promises)
        self.w_port, self.r_port = w_port, r_port = storage.write_port(), storage.read_port()
        level = Signal(range(inner + 1))  # words in block RAM
        produce = Signal(range(inner))
        consume = Signal(range(inner))
        writing, reading = Signal(), Signal()  # reading: block RAM's head into its output latch
        m.d.comb += [
            self.w_rdy.eq(level != inner),
            writing.eq(self.w_en & self.w_rdy),
            reading.eq((level != 0) & (~self.r_rdy | self.r_en)),
            w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(writing),
            r_port.addr.eq(consume), r_port.en.eq(reading), self.r_data.eq(r_port.data),
            self.w_level.eq(level + self.r_rdy),
        ]
        with m.If(writing):
            m.d.sync += produce.eq(_wrap(produce, inner))
        with m.If(reading):
            m.d.sync += [consume.eq(_wrap(consume, inner)), self.r_rdy.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        with m.If(writing & ~reading):
            m.d.sync += level.eq(level + 1)
        with m.Elif(reading & ~writing):
            m.d.sync += level.eq(level - 1)
        return m


def _wrap(pointer, depth):
    return Mux(pointer == depth - 1, 0, pointer + 1)
