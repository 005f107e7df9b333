"""The board top: clock (PLL), reset, UART pins and LEDs around a :class:`~cepc.hw.hostlink.HostLink`.

The board (a platform of ``boards/``) names its oscillator (``default_clk``),
its host UART (``cepc_uart``) and the LEDs to show life on (``cepc_leds``:
heartbeat, activity, error; any may be missing).
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import FFSynchronizer

from .hostlink import HostLink
from .pll import Ecp5Pll, Ice40Pll

# iCE40 block RAMs read zero for about 3 µs after configuration; hold reset well past that.
POWER_ON_RESET_S = 20e-6


class BoardTop(Elaboratable):
    """``link`` on a board, clocked by ``pll`` (an :class:`Ecp5Pll` or :class:`Ice40Pll`) from
    the board's oscillator. Reset is held until the PLL locks and for 20 µs after."""

    def __init__(self, link: HostLink, pll: Ecp5Pll | Ice40Pll):
        self.link = link
        self.pll = pll

    def elaborate(self, platform):
        m = Module()
        clk_port = platform.request(platform.default_clk, dir="-")
        clk = Signal()
        locked = Signal()
        if isinstance(self.pll, Ice40Pll):
            m.submodules.pll = self.pll.instance(clk_port.io, clk, locked)  # the PLL sits on the pad
        else:
            m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_port)
            m.submodules.pll = self.pll.instance(clk_buf.i, clk, locked)
        platform.add_clock_constraint(clk, self.pll.output_hz)

        # The domain has no reset: the host link resets everything it holds from one register
        # (see HostLink), held here until the PLL locks and for 20 µs after.
        m.domains.sync = sync = ClockDomain("sync", reset_less=True)
        m.d.comb += sync.clk.eq(clk)
        hold = max(2, int(POWER_ON_RESET_S * self.pll.output_hz))
        locked_sync = Signal()
        m.submodules.lock_sync = FFSynchronizer(locked, locked_sync, init=0)
        por = Signal(range(hold + 1))
        with m.If(~locked_sync):
            m.d.sync += por.eq(0)
        with m.Elif(por != hold):
            m.d.sync += por.eq(por + 1)
        power_on = Signal(init=1)
        m.d.sync += power_on.eq(por != hold)

        m.submodules.link = link = self.link
        uart_name, uart_number = platform.cepc_uart
        uart = platform.request(uart_name, uart_number, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [link.rx.eq(rx.i), tx.o.eq(link.tx), link.reset.eq(power_on)]

        # LEDs: heartbeat (about 1.5 Hz), UART activity (stretched to ~50 ms), sticky error
        leds = []
        for i, resource in enumerate(platform.cepc_leds):
            if resource is None:
                leds.append(None)
                continue
            m.submodules[f"led{i}"] = buf = io.Buffer("o", platform.request(*resource, dir="-"))
            leds.append(buf.o)
        beat = Signal(max(1, int(self.pll.output_hz).bit_length() - 1))
        m.d.sync += beat.eq(beat + 1)
        glow = Signal(range(int(self.pll.output_hz / 20) + 1))
        with m.If(link.activity):
            m.d.sync += glow.eq(int(self.pll.output_hz / 20))
        with m.Elif(glow != 0):
            m.d.sync += glow.eq(glow - 1)
        for led, value in zip(leds, [beat[-1], glow != 0, link.error]):
            if led is not None:
                m.d.comb += led.eq(value)
        return m
