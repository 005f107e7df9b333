"""Copies of a register, kept apart from synthesis's merging, for routes across a large die.

A register that fans out to block RAMs (or flip-flops) all over an ECP5's die makes its long routes
end in logic or in many loads; a copy beside each far group makes every long route run from one
flip-flop to another. Yosys would merge identical registers back into one, so each copy is a module
of its own that the synthesis flow marks ``keep_hierarchy``. On a small die (the UP5K) the copies
only cost logic cells: :func:`small_die` says when to leave them out.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring


def small_die(platform) -> bool:
    """True when ``platform`` is an iCE40 one (Amaranth's family name is ``iCE40``): a small die, where
    copies of registers to shorten routes cost logic cells it is short of."""
    return str(getattr(platform, "family", "")).lower() == "ice40"


class Replica(wiring.Component):
    """A register of its own: ``q`` takes ``d`` on the clock edges where ``en`` is high.

    The table keeps one per bank and way of `en`, of its read address and of the write block RAM
    takes; the host link one of its reset for the link and one for the design. Synthesis would merge
    copies of one register into one; the flow keeps every submodule named ``replica_…`` a module of its own
    (``keep_hierarchy``), which it cannot merge across. Without ``init`` it has no reset (nor a reset
    net reaching across the die): the table's copies are loaded in the same enabled cycles as what
    they copy, before any key after a reset uses them, and a write copied before a reset is written
    again until then, which changes nothing."""

    PREFIX = "replica_"  # its submodules' names begin with this: the synthesis flow keeps them apart

    def __init__(self, width: int, *, init: int | None = None):
        self._init = init  # None: no reset; else the value after one (`en`'s copies)
        super().__init__({"d": wiring.In(width), "en": wiring.In(1), "q": wiring.Out(width)})

    def elaborate(self, platform):
        m = Module()
        q = Signal(len(self.q), reset_less=self._init is None, init=self._init or 0)
        with m.If(self.en):
            m.d.sync += q.eq(self.d)
        m.d.comb += self.q.eq(q)
        return m
