"""An 8N1 UART: a receiver and a transmitter with an integer clock divider."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out


def divisor(clock_hz: float, baud: int) -> int:
    """Clock cycles per bit, the nearest integer; raises ValueError if the baud rate is more
    than 2 % off (an 8N1 receiver samples the stop bit 9.5 bits after the start edge)."""
    if baud <= 0:
        raise ValueError(f"the baud rate must be positive, not {baud!r}")
    div = round(clock_hz / baud)
    if div < 4:
        raise ValueError(f"{baud} baud needs at least 4 clock cycles per bit; the clock is {clock_hz / 1e6:g} MHz")
    error = (clock_hz / div - baud) / baud
    if abs(error) > 0.02:
        raise ValueError(f"{baud} baud is {error:+.1%} off at {clock_hz / 1e6:g} MHz (divisor {div}); "
                         f"pick a baud rate that divides the clock")
    return div


class UartRx(wiring.Component):
    """Receives 8N1 bytes from ``rx``.

    ``rx`` goes through a two-flip-flop synchroniser. The start bit is
    checked at its middle, then each bit sampled ``divisor`` cycles apart.
    ``valid`` pulses for one cycle with ``data`` when the stop bit is high;
    ``error`` pulses instead when it is low (a framing error, or a break),
    and the receiver then waits for the line to return high. No
    backpressure: the consumer takes every byte (one per ten bit times).
    """

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"the UART divisor must be at least 4, not {divisor!r}")
        self._div = divisor
        super().__init__({"data": Out(8), "valid": Out(1), "error": Out(1), "rx": In(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        div = self._div
        meta = Signal(init=1)
        line = Signal(init=1)
        m.d.sync += [meta.eq(self.rx), line.eq(meta)]

        timer = Signal(range(div))
        bits = Signal(range(9))
        shift = Signal(8)
        m.d.sync += [self.valid.eq(0), self.error.eq(0)]
        with m.If(timer != 0):
            m.d.sync += timer.eq(timer - 1)

        with m.FSM():
            with m.State("idle"):
                with m.If(~line):
                    m.d.sync += timer.eq(div // 2 - 1)
                    m.next = "start"
            with m.State("start"):
                with m.If(timer == 0):
                    with m.If(line):  # a glitch, not a start bit
                        m.next = "idle"
                    with m.Else():
                        m.d.sync += [timer.eq(div - 1), bits.eq(0)]
                        m.next = "data"
            with m.State("data"):
                with m.If(timer == 0):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), timer.eq(div - 1),
                                 bits.eq(bits + 1)]
                    with m.If(bits == 7):
                        m.next = "stop"
            with m.State("stop"):
                with m.If(timer == 0):
                    with m.If(line):
                        m.d.sync += [self.data.eq(shift), self.valid.eq(1)]
                        m.next = "idle"
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                        m.next = "break"
            with m.State("break"):
                with m.If(line):
                    m.next = "idle"
        return m


class UartTx(wiring.Component):
    """Sends the bytes of the ``bytes`` stream on ``tx``, 8N1, ``divisor`` cycles per bit.

    ``bytes.ready`` is high while the transmitter is idle; a byte takes ten bit times.
    """

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"the UART divisor must be at least 4, not {divisor!r}")
        self._div = divisor
        super().__init__({"bytes": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        div = self._div
        timer = Signal(range(div))
        bits = Signal(range(10))
        shift = Signal(10, init=0x3FF)  # stop bit, 8 data bits LSB-first, start bit
        busy = Signal()
        m.d.comb += [self.bytes.ready.eq(~busy), self.tx.eq(shift[0])]
        with m.If(~busy):
            with m.If(self.bytes.valid):
                m.d.sync += [shift.eq(0b1 << 9 | self.bytes.payload << 1), busy.eq(1), timer.eq(div - 1),
                             bits.eq(0)]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += [shift.eq(1 << 9 | shift >> 1), timer.eq(div - 1), bits.eq(bits + 1)]
            with m.If(bits == 9):
                m.d.sync += busy.eq(0)
        return m
