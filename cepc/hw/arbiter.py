"""The round-robin arbiter in front of ``m_t*``: which query's output FIFO offers its head.

The first FIFO with a record at or after ``turn`` is chosen, wrapping around; after a record is
taken, the next query asks first. A record offered stays offered, unchanged, until it is taken
(AXI-Stream; the host link reads it where it is): while one waits, the choice is held, even if a
FIFO ahead of it fills.

Made in the cycle itself, the choice joins every FIFO's fill flag and leads into every FIFO's pop:
on a large die, one path routed across all the output FIFOs. ``registered`` makes the choice a
register instead, set from what each FIFO's flag will be after the edge (``ready_next``, from
:class:`cepc.hw.fifo.OutputFifo`): the same choice in the same cycle, so records leave as they
would. The iCE40's FIFOs (:class:`cepc.hw.fifo.BlockRamFifo`) do not say what their flag will be, and
there the choice is made in the cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class RoundRobin(wiring.Component):
    """``n`` FIFOs' ``ready`` flags (and ``ready_next``, when ``registered``) and the sink's ``take``
    (``m_tready``) in; ``chosen`` and ``valid`` out. FIFO ``i`` pops when ``take & (chosen == i)``."""

    def __init__(self, n: int, registered: bool):
        self.n, self.registered = n, registered
        super().__init__({"ready": In(n), "ready_next": In(n), "take": In(1),
                          "valid": Out(1), "chosen": Out(range(max(n, 2)))})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        m.d.comb += self.valid.eq(self.ready.any())
        if n == 1:
            return m  # chosen stays 0
        turn = Signal(range(n))  # the FIFO asked first
        taken = self.valid & self.take
        with m.If(taken):
            m.d.sync += turn.eq(_after(self.chosen, n))
        waiting_next = self.valid & ~self.take  # an offered record is not taken this cycle
        if self.registered:
            pick_next = Signal.like(self.chosen)
            _first_ready(m, pick_next, Mux(taken, _after(self.chosen, n), turn), self.ready_next)
            m.d.sync += self.chosen.eq(Mux(waiting_next, self.chosen, pick_next))
        else:
            pick = Signal.like(self.chosen)
            _first_ready(m, pick, turn, self.ready)
            waiting = Signal()
            waited = Signal.like(self.chosen)
            m.d.sync += [waiting.eq(waiting_next), waited.eq(self.chosen)]
            m.d.comb += self.chosen.eq(Mux(waiting, waited, pick))
        return m


def _after(i, n):
    return Mux(i == n - 1, 0, i + 1)


def _first_ready(m, pick, turn, ready):
    """``pick``: the first FIFO whose ``ready`` bit is set at or after ``turn``, wrapping around (0 if
    none is)."""
    n = len(ready)
    for offset in reversed(range(n)):
        for i in range(n):
            with m.If((turn == i) & ready[(i + offset) % n]):
                m.d.comb += pick.eq((i + offset) % n)
