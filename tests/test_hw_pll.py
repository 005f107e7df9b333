"""PLL settings: the searches in cepc.hw.pll pick what prjtrellis' ecppll and icestorm's icepll pick."""

from __future__ import annotations

import re
import subprocess

import pytest

from cepc.hw.pll import ecp5_pll, ice40_pll

from synthtools import yowasp_or_skip


def run_tool(tool: str, args: list[str], cwd) -> str:
    return subprocess.run([*yowasp_or_skip(tool), *args], capture_output=True, text=True, cwd=cwd,
                          check=True).stdout


@pytest.mark.parametrize("mhz", [50, 75, 100, 125, 150, 175, 200])
def test_ecp5_pll_matches_ecppll(mhz, tmp_path):
    run_tool("ecppll", ["-i", "25", "-o", str(mhz), "-f", "pll.v"], tmp_path)
    text = (tmp_path / "pll.v").read_text()
    want = {k: int(v) for k, v in re.findall(r"\.(CLKI_DIV|CLKFB_DIV|CLKOP_DIV)\((\d+)\)", text)}
    pll = ecp5_pll(25e6, mhz * 1e6)
    assert (pll.clki_div, pll.clkfb_div, pll.clkop_div) == (want["CLKI_DIV"], want["CLKFB_DIV"], want["CLKOP_DIV"])
    assert pll.output_hz == mhz * 1e6 and 400e6 <= pll.vco_hz <= 800e6


@pytest.mark.parametrize("mhz", [30, 40, 48, 50, 51, 60])
def test_ice40_pll_matches_icepll(mhz, tmp_path):
    out = run_tool("icepll", ["-i", "12", "-o", str(mhz)], tmp_path)
    want = {k: int(v) for k, v in re.findall(r"^(DIVR|DIVF|DIVQ|FILTER_RANGE):\s+(\d+)", out, re.M)}
    pll = ice40_pll(12e6, mhz * 1e6)
    assert (pll.divr, pll.divf, pll.divq, pll.filter_range) == (want["DIVR"], want["DIVF"], want["DIVQ"],
                                                                want["FILTER_RANGE"])
    achieved = float(re.search(r"F_PLLOUT:\s+([\d.]+) MHz \(achieved\)", out).group(1))
    assert pll.output_hz == pytest.approx(achieved * 1e6, abs=1e3)


def test_out_of_range_frequencies_get_the_nearest_setting():
    assert 500e6 < ice40_pll(12e6, 2000e6).output_hz <= 533.3e6  # the VCO's top, no output divider below 2
    assert ecp5_pll(25e6, 1e3).output_hz == pytest.approx(3.125e6)  # VCO 400 MHz / 128


def _ecp5_outputs(fin: float) -> set[float]:
    """Every clock the EHXPLLL makes from ``fin`` MHz, by the datasheet's ranges (PFD 3.125–400 MHz,
    VCO 400–800 MHz), enumerated here apart from the search under test."""
    return {round(fin / clki * fb, 9) for clki in range(1, 129) for fb in range(1, 81)
            if 3.125 <= fin / clki <= 400 and any(400 <= fin / clki * fb * op <= 800 for op in range(1, 129))}


def _ice40_outputs(fin: float) -> set[float]:
    return {round(fin / (r + 1) * (f + 1) / 2 ** q, 9) for r in range(16) for f in range(128) for q in range(1, 7)
            if 10 <= fin / (r + 1) <= 133 and 533 <= fin / (r + 1) * (f + 1) <= 1066}


# --freq max asks for the fastest clock at or below what a placement reached: never above it (the nearest
# may be), and none faster below it
@pytest.mark.parametrize("mhz", [49.7, 51.44, 115.2, 118.83, 124.0, 150.0])
def test_at_most_is_the_fastest_clock_not_above(mhz):
    for search, outputs, fin in ((ecp5_pll, _ecp5_outputs, 25.0), (ice40_pll, _ice40_outputs, 12.0)):
        made = outputs(fin)
        want = max(f for f in made if f <= mhz + 1e-9)
        pll = search(fin * 1e6, mhz * 1e6, at_most=True)
        assert pll.output_hz / 1e6 == pytest.approx(want, abs=1e-6), search.__name__
    assert ice40_pll(12e6, 51.44e6).output_hz > 51.44e6  # (the nearest, without at_most, is above it)
    assert ecp5_pll(25e6, 150e6, at_most=True).output_hz == 150e6  # a clock made exactly is itself


def test_at_most_below_every_clock_is_refused():
    with pytest.raises(ValueError, match="no iCE40 PLL setting makes at most 8 MHz"):  # (its slowest: 8.4375)
        ice40_pll(12e6, 8e6, at_most=True)
    with pytest.raises(ValueError, match="no ECP5 PLL setting makes at most 3 MHz"):  # (3.125)
        ecp5_pll(25e6, 3e6, at_most=True)
