"""The board top: clocks (PLL), reset, UART pins and LEDs around a :class:`~cepc.hw.hostlink.HostLink`.

Two clock domains: ``sync``, the design's, the PLL's output at the target frequency; ``link``, the
host link's, slower (``pll.link_hz``: a second PLL output on ECP5, the oscillator on iCE40).

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
    the board's oscillator. Reset is held until the PLL locks and for 20 µs after (counted in the
    link's domain; the link resets the design)."""

    def __init__(self, link: HostLink, pll: Ecp5Pll | Ice40Pll):
        self.link = link
        self.pll = pll

    def elaborate(self, platform):
        m = Module()
        clk_port = platform.request(platform.default_clk, dir="-")
        clk = Signal(name="clk")
        link_clk = Signal(name="link_clk")
        locked = Signal()
        if isinstance(self.pll, Ice40Pll):  # the PLL sits on the pad
            m.submodules.pll = self.pll.instance(clk_port.io, clk, locked, link_out=link_clk)
        else:
            m.submodules.clk_buf = clk_buf = io.Buffer("i", clk_port)
            m.submodules.pll = self.pll.instance(clk_buf.i, clk, locked, link_out=link_clk)
        platform.add_clock_constraint(clk, self.pll.output_hz)
        platform.add_clock_constraint(link_clk, self.pll.link_hz)

        # The domains have no reset: the host link resets everything it holds from registers (see
        # HostLink), its `reset` held here until the PLL locks and for 20 µs after.
        m.domains.sync = sync = ClockDomain("sync", reset_less=True)
        m.domains.link = link_cd = ClockDomain("link", reset_less=True)
        m.d.comb += [sync.clk.eq(clk), link_cd.clk.eq(link_clk)]
        hold = max(2, int(POWER_ON_RESET_S * self.pll.link_hz))
        locked_sync = Signal()
        m.submodules.lock_sync = FFSynchronizer(locked, locked_sync, init=0, o_domain="link")
        por = Signal(range(hold + 1))
        with m.If(~locked_sync):
            m.d.link += por.eq(0)
        with m.Elif(por != hold):
            m.d.link += por.eq(por + 1)
        power_on = Signal(init=1)
        m.d.link += power_on.eq(por != hold)

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
        beat = Signal(max(1, int(self.pll.link_hz).bit_length() - 1))
        m.d.link += beat.eq(beat + 1)
        glow = Signal(range(int(self.pll.link_hz / 20) + 1))
        with m.If(link.activity):
            m.d.link += glow.eq(int(self.pll.link_hz / 20))
        with m.Elif(glow != 0):
            m.d.link += glow.eq(glow - 1)
        for led, value in zip(leds, [beat[-1], glow != 0, link.error]):
            if led is not None:
                m.d.comb += led.eq(value)
        return m
