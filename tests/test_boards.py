"""boards/: every board builds the board top (do_build=False), with its clock, UART and PLL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cepc.errors import UsageError
from cepc.hw.board_top import BoardTop
from cepc.hw.pll import ecp5_pll, ice40_pll, with_link_clock
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa.lower import lower
from cepc.synth import flow

ROOT = Path(__file__).resolve().parent.parent
BOARDS = flow.boards()

# What each board must say: family, device, oscillator pin, UART rx/tx pins (from the boards' schematics)
EXPECTED = {
    "ulx3s-85f": ("ecp5", "LFE5U-85F", "G2", "M1", "L4"),
    "ulx3s-45f": ("ecp5", "LFE5U-45F", "G2", "M1", "L4"),
    "ulx3s-25f": ("ecp5", "LFE5U-25F", "G2", "M1", "L4"),
    "ulx3s-12f": ("ecp5", "LFE5U-12F", "G2", "M1", "L4"),
    "icebreaker": ("ice40", "iCE40UP5K", "35", "6", "9"),
    "colorlight-5a-75b": ("ecp5", "LFE5U-25F", "P6", "M13", "P11"),
}


def test_the_boards_of_the_issue_are_there():
    assert set(EXPECTED) == set(BOARDS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_board_top_builds(name, tmp_path):
    fam, device, clk_pin, rx_pin, tx_pin = EXPECTED[name]
    cls = BOARDS[name]
    platform = cls()
    assert flow.family(cls) == fam and platform.device == device
    pll = (ecp5_pll if fam == "ecp5" else ice40_pll)(platform.default_clk_frequency, cls.cepc_freq_mhz * 1e6)
    assert pll.output_hz == pytest.approx(cls.cepc_freq_mhz * 1e6)
    if fam == "ecp5":
        pll = with_link_clock(pll, cls.cepc_baud)
    # the host link's clock: slower than the design's, a whole number of cycles per UART bit
    assert pll.link_hz <= pll.output_hz / 2
    design = lower(check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql")))
    ld = flow.link_design(design, partitions=2, clock_hz=pll.output_hz, link_hz=pll.link_hz, baud=cls.cepc_baud,
                          buffer_bytes=cls.cepc_buffer_bytes, buffer_frames=cls.cepc_buffer_frames)
    assert ld.link.divisor * cls.cepc_baud == pytest.approx(pll.link_hz, rel=0.001)
    plan = platform.build(BoardTop(ld.link, pll), name="top", do_build=False)
    files = plan.files
    il = files["top.il"]
    assert ("EHXPLLL" if fam == "ecp5" else "SB_PLL40_2_PAD") in il
    assert ("CLKOS" if fam == "ecp5" else "PLLOUTGLOBALA") in il
    if fam == "ecp5":
        lpf = files["top.lpf"]
        for pin in (clk_pin, rx_pin, tx_pin):
            assert f'SITE "{pin}"' in lpf
        assert f"{cls.cepc_freq_mhz * 1e6:.0f}" in lpf.replace(".0 HZ", " HZ")  # the PLL output's constraint
        assert f"{pll.link_hz:.0f}" in lpf.replace(".0 HZ", " HZ")  # the link clock's
    else:
        pcf = files["top.pcf"]
        for pin in (clk_pin, rx_pin, tx_pin):
            assert f" {pin}\n" in pcf
        assert f"{pll.output_hz / 1e6:g}" in pcf
        assert f"{pll.link_hz / 1e6:g}" in pcf


def test_unknown_board_names_the_known_ones():
    with pytest.raises(UsageError, match=r"^unknown board 'nexys'; cepc knows colorlight-5a-75b, icebreaker, ulx3s-12f"):
        flow.board("nexys")
