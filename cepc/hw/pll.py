"""PLL settings for the board tops: the searches of prjtrellis' ``ecppll`` and icestorm's ``icepll``.

Both tools ship in the YoWASP packages; the tests check that these searches
pick the same dividers as the tools.

Each PLL also gives the host link its clock (``link_hz``, :mod:`cepc.hw.hostlink`): on ECP5 a
second output, CLKOS, divided from the same VCO (:func:`with_link_clock`); on iCE40 the oscillator
itself, which SB_PLL40_2_PAD passes on beside the PLL's output.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Instance, Signal


@dataclass(frozen=True)
class Ecp5Pll:
    """EHXPLLL, feedback from CLKOP: f_out = f_in · CLKFB_DIV / CLKI_DIV, VCO = f_out · CLKOP_DIV."""

    input_hz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkos_div: int | None = None  # the host link's clock, CLKOS (None: not used)

    @property
    def output_hz(self) -> float:
        return self.input_hz * self.clkfb_div / self.clki_div

    @property
    def vco_hz(self) -> float:
        return self.output_hz * self.clkop_div

    @property
    def link_hz(self) -> float:
        return self.vco_hz / self.clkos_div if self.clkos_div else self.output_hz

    def instance(self, clk_in, clk_out, locked, link_out=None) -> Instance:
        if link_out is not None and not self.clkos_div:
            raise ValueError("this PLL has no link clock: set one with with_link_clock()")
        # CLKOS in phase with CLKOP, as ecppll sets a second output
        secondary = {} if link_out is None else dict(
            a_FREQUENCY_PIN_CLKOS=f"{self.link_hz / 1e6:g}", p_CLKOS_ENABLE="ENABLED", p_CLKOS_DIV=self.clkos_div,
            p_CLKOS_CPHASE=self.clkop_div // 2, p_CLKOS_FPHASE=0, o_CLKOS=link_out)
        return Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{self.input_hz / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{self.output_hz / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=self.clki_div, p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=self.clkop_div,
            # CLKOP shifted by half a period, as ecppll (and Lattice's tools) do
            p_CLKOP_CPHASE=self.clkop_div // 2, p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=self.clkfb_div,
            i_RST=0, i_STDBY=0, i_CLKI=clk_in, o_CLKOP=clk_out, i_CLKFB=clk_out, o_CLKINTFB=Signal(),
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked, **secondary,
        )


# (an output "at most" a frequency may exceed it by this much: float rounding, not a real clock)
AT_MOST_SLACK_MHZ = 1e-6


def ecp5_pll(input_hz: float, output_hz: float, at_most: bool = False) -> Ecp5Pll:
    """The EHXPLLL dividers whose output is nearest ``output_hz`` (PFD 3.125–400 MHz, VCO
    400–800 MHz); among equals, the VCO nearest 600 MHz. ``at_most``: the fastest output not above
    ``output_hz``."""
    best, best_key = None, None
    fin = input_hz / 1e6
    want = output_hz / 1e6
    for clki in range(1, 129):
        pfd = fin / clki
        if not 3.125 <= pfd <= 400:
            continue
        for fb in range(1, 81):
            fout = pfd * fb
            if at_most and fout > want + AT_MOST_SLACK_MHZ:
                break  # (fout grows with fb)
            for op in range(1, 129):
                vco = fout * op
                if not 400 <= vco <= 800:
                    continue
                key = (round(abs(fout - want), 9), abs(vco - 600))
                if best_key is None or key < best_key:
                    best, best_key = Ecp5Pll(input_hz, clki, fb, op), key
    if best is None:
        raise ValueError(f"no ECP5 PLL setting makes {'at most ' if at_most else ''}{output_hz / 1e6:g} MHz "
                         f"from {input_hz / 1e6:g} MHz")
    return best


ICE40_FILTER = ((17, 1), (26, 2), (44, 3), (66, 4), (101, 5))


@dataclass(frozen=True)
class Ice40Pll:
    """SB_PLL40_PAD, simple feedback: f_out = f_in · (DIVF + 1) / ((DIVR + 1) · 2^DIVQ)."""

    input_hz: float
    divr: int
    divf: int
    divq: int

    @property
    def pfd_hz(self) -> float:
        return self.input_hz / (self.divr + 1)

    @property
    def vco_hz(self) -> float:
        return self.pfd_hz * (self.divf + 1)

    @property
    def output_hz(self) -> float:
        return self.vco_hz / 2 ** self.divq

    @property
    def link_hz(self) -> float:  # the oscillator, passed on by SB_PLL40_2_PAD's port A
        return self.input_hz

    @property
    def filter_range(self) -> int:
        pfd = self.pfd_hz / 1e6
        return next((r for limit, r in ICE40_FILTER if pfd < limit), 6)

    def instance(self, pad, clk_out, locked, link_out=None) -> Instance:
        if link_out is None:
            return Instance(
                "SB_PLL40_PAD",
                p_FEEDBACK_PATH="SIMPLE", p_DIVR=self.divr, p_DIVF=self.divf, p_DIVQ=self.divq,
                p_FILTER_RANGE=self.filter_range,
                i_PACKAGEPIN=pad, i_RESETB=1, i_BYPASS=0, o_PLLOUTGLOBAL=clk_out, o_LOCK=locked,
            )
        # port A: the pad's clock (the link's), port B: the PLL's output
        return Instance(
            "SB_PLL40_2_PAD",
            p_FEEDBACK_PATH="SIMPLE", p_DIVR=self.divr, p_DIVF=self.divf, p_DIVQ=self.divq,
            p_FILTER_RANGE=self.filter_range, p_PLLOUT_SELECT_PORTB="GENCLK",
            i_PACKAGEPIN=pad, i_RESETB=1, i_BYPASS=0, o_PLLOUTGLOBALA=link_out, o_PLLOUTGLOBALB=clk_out,
            o_LOCK=locked,
        )


def ice40_pll(input_hz: float, output_hz: float, at_most: bool = False) -> Ice40Pll:
    """The SB_PLL40 dividers whose output is nearest ``output_hz`` (PFD 10–133 MHz, VCO
    533–1066 MHz), the first found in icepll's search order among equals. ``at_most``: the fastest
    output not above ``output_hz``."""
    best, best_err = None, None
    fin, want = input_hz / 1e6, output_hz / 1e6
    for divr in range(16):
        pfd = fin / (divr + 1)
        if not 10 <= pfd <= 133:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533 <= vco <= 1066:
                continue
            for divq in range(1, 7):
                if at_most and vco / 2 ** divq > want + AT_MOST_SLACK_MHZ:
                    continue
                err = abs(vco / 2 ** divq - want)
                if best_err is None or err < best_err - 1e-9:
                    best, best_err = Ice40Pll(input_hz, divr, divf, divq), err
    if best is None:
        raise ValueError(f"no iCE40 PLL setting makes {'at most ' if at_most else ''}{output_hz / 1e6:g} MHz "
                         f"from {input_hz / 1e6:g} MHz")
    return best


# the host link's clock on ECP5: no faster than this (its logic has room to spare; a byte is tens of
# its cycles at any baud rate a UART bridge runs)
LINK_MAX_HZ = 64e6


def with_link_clock(pll: Ecp5Pll, baud: int) -> Ecp5Pll:
    """``pll`` with CLKOS set for the host link: the VCO divided to the clock, no faster than the
    design's nor LINK_MAX_HZ, whose UART divisor is nearest ``baud`` (among equals the fastest)."""
    from dataclasses import replace

    best, best_key = None, None
    for div in range(1, 129):
        hz = pll.vco_hz / div
        if hz > min(pll.output_hz, LINK_MAX_HZ) or hz < 4 * baud:
            continue
        cycles = max(1, round(hz / baud))
        key = (round(abs(hz / cycles - baud) / baud, 6), -hz)
        if best_key is None or key < best_key:
            best, best_key = div, key
    if best is None:
        raise ValueError(f"no ECP5 PLL output for a {baud} baud host link from a {pll.vco_hz / 1e6:g} MHz VCO, "
                         f"at least 4 cycles per bit and no faster than {pll.output_hz / 1e6:g} MHz")
    return replace(pll, clkos_div=best)
