"""Crossings between the host link's clock domain and the design's.

The host link moves a byte every ten bit times of its UART; the design takes a tuple every cycle.
The board top clocks them apart (:mod:`cepc.hw.board_top`): the link at a few tens of MHz, the
design at its Fmax, so the link's wide, slow decisions never limit the design's clock. What crosses
between them is one word at a time, by a toggle handshake:

* the sending side puts the word into a register of its own (or, a FIFO's output, leaves it where
  it is held) and toggles ``req``;
* the receiving side sees ``req`` through a two-flip-flop synchroniser, takes the word (unchanged
  since before the toggle and until the word is taken) and toggles ``ack``;
* the sending side sees ``ack`` through a synchroniser of its own, and may send the next word.

No multi-bit value is ever sampled while it changes, whatever the two clocks' ratio. A word takes
about three cycles of each clock; the link needs far less (a UART byte is tens of link cycles).

Both sides must be reset together (every register here, the synchronisers' too, has a reset): the
host link holds its reset for :data:`RESET_HOLD` link cycles and resets the design from a
synchronised copy of it, so the two resets overlap.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out


def _toggles(m: Module, req_domain: str, ack_domain: str):
    """The toggle pair of a handshake: ``req`` (a register of ``req_domain``) and ``ack`` (of
    ``ack_domain``), each seen on the other side through a two-flip-flop synchroniser that a reset
    of that side clears. Returns ``req, ack, req_seen, ack_seen``."""
    req, ack, req_seen, ack_seen = Signal(), Signal(), Signal(), Signal()
    m.submodules.req_sync = FFSynchronizer(req, req_seen, o_domain=ack_domain, reset_less=False)
    m.submodules.ack_sync = FFSynchronizer(ack, ack_seen, o_domain=req_domain, reset_less=False)
    return req, ack, req_seen, ack_seen


class StreamCDC(wiring.Component):
    """valid/ready words from domain ``i_domain`` into ``o_domain``, one at a time.

    ``o_valid`` is the XOR of two flip-flops, ``i_ready`` a function of three (held: a flip-flop,
    and ``i_valid`` is only registered).
    Words pass in order, none lost or repeated; ``i_busy``: the input side has a word the output side has not taken.

    Two kinds:

    * a register (default): the input side takes the word into a register of its own (``o_data``,
      stable while ``o_valid``) and is ready for the next once the output side has taken it;
    * ``held``: no register. The source must hold its word (valid high, data unchanged) until
      ``i_ready``, as a FIFO's output does: the input side announces it, the output side reads
      ``i_data`` itself and takes it, and only then does ``i_ready`` pulse, for a cycle, to pop it.
    """

    def __init__(self, width: int, i_domain: str, o_domain: str, *, held: bool = False):
        self._width, self._i, self._o, self._held = width, i_domain, o_domain, held
        super().__init__({"i_valid": In(1), "i_data": In(width), "i_ready": Out(1), "i_busy": Out(1),
                          "o_valid": Out(1), "o_data": Out(width), "o_ready": In(1)})

    def elaborate(self, platform):
        m = Module()
        # req: toggled by the input side when a word is offered; ack: by the output side when taken
        req, ack, req_seen, ack_seen = _toggles(m, self._i, self._o)
        m.d.comb += self.o_valid.eq(req_seen != ack)
        with m.If(self.o_valid & self.o_ready):
            m.d[self._o] += ack.eq(~ack)
        if self._held:
            announced = Signal()  # the source's word is offered (and held by it) until it is taken
            # The pop is a register (it reaches the source's FIFO, which may be across the die): set
            # the cycle after the output side's `ack` is seen. The source's valid is registered too
            # (`offered`), so no path runs from the pop to the source and back: a word is announced
            # once `offered` shows the source after the pop, two cycles after it (`popped`).
            pop, popped, offered = Signal(), Signal(), Signal()
            m.d[self._i] += [pop.eq(announced & (req == ack_seen) & ~pop), popped.eq(pop),
                             offered.eq(self.i_valid)]
            m.d.comb += [self.i_ready.eq(pop), self.i_busy.eq(announced), self.o_data.eq(self.i_data)]
            with m.If(~announced & ~pop & ~popped & offered):
                m.d[self._i] += [announced.eq(1), req.eq(~req)]
            with m.If(pop):
                m.d[self._i] += announced.eq(0)
        else:
            data = Signal(self._width, reset_less=True)
            m.d.comb += [self.i_ready.eq(req == ack_seen), self.i_busy.eq(req != ack_seen), self.o_data.eq(data)]
            with m.If(self.i_valid & self.i_ready):
                m.d[self._i] += [data.eq(self.i_data), req.eq(~req)]
        return m


class Fetch(wiring.Component):
    """A word of ``values`` (all in ``far_domain``) read from ``near_domain`` by index.

    Near side: ``start`` (a cycle) asks for ``values[index]`` (``index`` is taken with it);
    ``ready`` rises once the word is in ``word`` and stays high until the next ``start``. The far
    side registers the word the cycle it sees the request (the value it had a cycle before), so it is
    one value of the counter at one instant, never a mix of two. ``word`` is a register of the far
    side, stable while ``ready``."""

    def __init__(self, width: int, count: int, near_domain: str, far_domain: str, bank=None):
        self._width, self._near, self._far = width, near_domain, far_domain
        # ``bank``: a CounterBank (cepc.hw.counter) of the far side holds the values, read from there
        # (``values`` then unused)
        self._bank = bank
        super().__init__({"values": In(width).array(count), "index": In(range(max(count, 2))),
                          "start": In(1), "ready": Out(1), "word": Out(width)})

    def elaborate(self, platform):
        m = Module()
        # req: toggled by the near side's `start`; ack: follows it on the far side once the word is in
        req, ack, req_seen, ack_seen = _toggles(m, self._near, self._far)
        index = Signal.like(self.index, reset_less=True)  # near side, taken with `start`
        word = Signal(self._width, reset_less=True)
        # The far side picks values[index] into `sample` every cycle, and takes `sample` into `word`
        # when it sees the request: the multiplexer is off the path of the word's enables. `index`
        # changed with `req`, two far edges before `req_seen` does, so the `sample` taken then is of
        # a settled index (and of the counter one cycle earlier).
        sample = Signal(self._width, reset_less=True)
        with m.If(self.start):
            m.d[self._near] += [req.eq(~req), index.eq(self.index)]
        if self._bank is not None:  # the bank reads the word into a register of its own
            bank = self._bank
            asked = Signal()
            with m.If((req_seen != ack) & ~asked):
                m.d.comb += [bank.read.eq(1), bank.index.eq(index)]
                m.d[self._far] += asked.eq(1)
            with m.If(bank.done):
                m.d[self._far] += [ack.eq(req_seen), asked.eq(0)]
            m.d.comb += [self.ready.eq(req == ack_seen), self.word.eq(bank.word)]
            return m
        with m.Switch(index):
            for i, value in enumerate(self.values):
                with m.Case(i):
                    m.d[self._far] += sample.eq(value)
        with m.If(req_seen != ack):
            m.d[self._far] += [word.eq(sample), ack.eq(req_seen)]
        m.d.comb += [self.ready.eq(req == ack_seen), self.word.eq(word)]
        return m
