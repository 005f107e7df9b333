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

The iCE40's block RAM is at most 16 bits wide, so a FIFO of wide words takes a block per 16 bits of
width however shallow it is (a 289-bit match record: 19 of the UP5K's 30). Behind Woods' pipeline
partitioner, which takes a tuple every other cycle, a word is written at most every other cycle:
:class:`TwoBeatFifo` then stores each word as two halves, one a cycle, in half the blocks.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
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


class TwoBeatFifo(wiring.Component):
    """:class:`BlockRamFifo`'s ports, for a writer that never writes in two cycles running (Woods'
    pipeline partitioner: a tuple every other cycle, so a record or a spilled tuple every other cycle
    at most) and holds ``w_data`` through the cycle after a write (the top loads its record and spill
    registers only with a tuple). Block RAM holds each word as two halves, in half the blocks: the low
    half is written as the word is, the high half in the cycle after. The reader gets the word whole:
    the low half is read into block RAM's output latch, then, as the high half is read, copied into a
    register of its own, and the word is offered from the two. A word written at one edge is offered
    after the third, a cycle later than from BlockRamFifo; one is offered every other cycle at most (the
    writer's rate). ``w_level`` counts a word at once, until it is taken, as BlockRamFifo's does.

    The low half offered takes ``width / 2`` flip-flops, where BlockRamFifo takes none, and the halves
    a multiplexer into block RAM: worth it only where the full width does not fit block RAM."""

    def __init__(self, width: int, depth: int):
        if depth < 2:
            raise ValueError(f"the FIFO needs at least two words, not {depth}")
        self.width, self.depth = width, depth
        self.half = (width + 1) // 2  # the low half; the high half is the rest (as wide, or a bit narrower)
        # (``r_rdy_next``, as OutputFifo's: for the top's arbiter off the iCE40, which registers its choice)
        super().__init__({"w_data": In(width), "w_en": In(1), "w_rdy": Out(1), "w_level": Out(range(depth + 1)),
                          "r_data": Out(width), "r_rdy": Out(1), "r_rdy_next": Out(1), "r_en": In(1)})

    def elaborate(self, platform):
        m = Module()
        half, halves = self.half, 2 * self.depth
        # Read only when it holds a half not yet read, written only when the FIFO has room for the
        # word: never read where it is written (the two pointers meet only empty or full)
        m.submodules.storage = storage = Memory(shape=half, depth=halves, init=[], attrs=NO_COLLISIONS)
        # (kept, for a test of what NO_COLLISIONS promises)
        self.w_port, self.r_port = w_port, r_port = storage.write_port(), storage.read_port()
        count = Signal(range(self.depth + 1))  # words in the FIFO, the one offered among them
        stored = Signal(range(halves + 1))  # halves in block RAM, not yet read
        produce, consume = Signal(range(halves)), Signal(range(halves))
        pending = Signal()  # a word was written last cycle: block RAM takes its high half now
        lower = Signal(half, reset_less=True)  # the low half of the word offered
        paired = Signal()  # block RAM's output latch holds a low half, its high half to come
        accept, writing, reading, taken = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [
            self.w_rdy.eq(count != self.depth), self.w_level.eq(count),
            accept.eq(self.w_en & self.w_rdy), writing.eq(accept | pending), taken.eq(self.r_en & self.r_rdy),
            w_port.addr.eq(produce), w_port.en.eq(writing),
            w_port.data.eq(Mux(pending, self.w_data[half:], self.w_data[:half])),
            r_port.addr.eq(consume), r_port.en.eq(reading),
            self.r_data.eq(Cat(lower, r_port.data)[:self.width]),
        ]
        m.d.sync += pending.eq(accept)
        with m.If(writing):
            m.d.sync += produce.eq(_wrap(produce, halves))
        # a low half, when nothing is offered or what is offered is taken; then its high half
        m.d.comb += reading.eq((stored != 0) & (paired | ~self.r_rdy | self.r_en))
        m.d.comb += self.r_rdy_next.eq(self.r_rdy & ~self.r_en)
        with m.If(reading):
            m.d.sync += [consume.eq(_wrap(consume, halves)), paired.eq(~paired)]
            m.d.comb += self.r_rdy_next.eq(paired)
            with m.If(paired):
                m.d.sync += lower.eq(r_port.data)
        m.d.sync += self.r_rdy.eq(self.r_rdy_next)
        m.d.sync += stored.eq(stored + writing - reading)
        m.d.sync += count.eq(count + accept - taken)
        return m


def _wrap(pointer, depth):
    return Mux(pointer == depth - 1, 0, pointer + 1)
