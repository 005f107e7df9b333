"""The synthesis tools for tests: a missing one skips on a laptop, fails under CI (CI=true)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from cepc import tools
from cepc.errors import ToolError


def yowasp_or_skip(tool: str) -> list[str]:
    try:
        return tools.yowasp(tool)
    except ToolError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(e))


def ice40_cells(il: str, cwd: Path, script: str = "") -> dict[str, int]:
    """Yosys' ``synth_ice40`` of the RTLIL ``il`` (its top module ``top``), after ``script``: its cells by type."""
    (cwd / "m.il").write_text(il)
    (cwd / "m.ys").write_text(f"read_rtlil m.il\n{script}\nsynth_ice40 -top top\ntee -q -o stat.json stat -json\n")
    subprocess.run([*yowasp_or_skip("yosys"), "-q", "m.ys"], cwd=cwd, check=True, capture_output=True)
    return json.loads((cwd / "stat.json").read_text())["design"]["num_cells_by_type"]


def assert_flow_report(out: Path, report: Path, err: str, board: str, freq: str, static: bool = False) -> dict:
    """What every successful `cepc synth` on ``board`` at ``freq`` MHz must give: the report (as
    --report wrote it and as report.json in the build directory), its resources, both clocks met,
    tuples/s from Fmax, the bitstream, the summary line, the router and placer --*-auto pick for a
    design of a small share of the device (``static``: of a large share, nextpnr's static placer and
    router1), and the Yosys script's device options. Returns the report."""
    r = json.loads(report.read_text())
    assert r == json.loads((out / "report.json").read_text())
    assert r["board"] == board and r["timing_met"]
    for key in ("lut", "ff", "bram", "carry"):
        assert r["resources"][key]["used"] > 0
    assert 0 < r["resources"]["lut"]["percent"] < 100
    clock, link = r["clocks"]  # the design's first, then the host link's own
    assert clock["achieved_mhz"] >= clock["target_mhz"] == r["options"]["clock_mhz"] == float(freq)
    assert "link_clk" in link["name"] and "link_clk" not in clock["name"]
    assert link["met"] and link["target_mhz"] == r["options"]["link_clock_mhz"] <= float(freq)
    # achieved_mhz is rounded to 10 kHz in the report; tuples/s is from the unrounded Fmax (at most 5 kHz away)
    assert r["tuples_per_second_at_fmax"] == pytest.approx(clock["achieved_mhz"] * 1e6 * r["tuples_per_cycle"],
                                                           abs=5e3 * r["tuples_per_cycle"] + 1)
    bitstream = Path(r["bitstream"])
    assert bitstream.suffix == (".bit" if board.startswith("ulx3s") else ".bin")
    assert bitstream.stat().st_size > 20_000
    assert re.search(r"Fmax \S+: [\d.]+ MHz, target [\d.]+ MHz: met", err)
    assert r["router"] == "router1" and not r["tmg_ripup"]  # --router auto: router1, on ECP5 as on iCE40
    if static:
        assert r["placer"] == "static"
    else:
        assert r["placer"] == "heap"  # --placer auto: HeAP, as these take a small share of the flip-flops
    # Yosys maps for the part's timing (products onto the UltraPlus's DSPs), and without emulating
    # reads during writes beside block RAM
    script = (out / "cepc_board.ys").read_text()
    assert ("synth_ice40 -dsp -dffe_min_ce_use 4 -device u " in script) == (board == "icebreaker")
    assert "setparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:cepc_no_collisions %i" in script
    return r
