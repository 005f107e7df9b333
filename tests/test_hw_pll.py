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
