"""`cepc synth` end to end: every example on an ECP5 and an iCE40 board, through Yosys, nextpnr
and the packer (the YoWASP tools). Slow; small partition counts keep it to minutes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cepc.cli import main

from synthtools import yowasp_or_skip

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
EXAMPLES = ["marathon/marathon.sql", "network/network.sql", "mshape/mshape.sql"]


@pytest.fixture(autouse=True)
def tools():
    for tool in ("yosys", "nextpnr-ecp5", "nextpnr-ice40", "ecppack", "icepack"):
        yowasp_or_skip(tool)


# The flow, not the timing targets (bench/synth.py measures those): short pipeline partitioners and
# clocks with room to spare (nextpnr's Fmax moves by several percent with placement: network reached
# 93.6 MHz on the 12F and 34.5 MHz on the UP5K in one run, mshape 45-46 MHz), clocks the PLL makes
# exactly and 3 Mbaud divides. mshape's one partition carries 1,094 bits of partial matches: with
# four, place and route alone takes minutes.
# (mshape on the UP5K does not fit: test_mshape_does_not_fit_the_up5k_and_says_so)
BOARDS = {"ulx3s-12f": (4, "30"), "icebreaker": (2, "24")}


@pytest.mark.parametrize("example, board", [(e, b) for e in EXAMPLES for b in BOARDS
                                            if not (b == "icebreaker" and e.startswith("mshape"))])
def test_every_example_synthesises_and_meets_timing(example, board, tmp_path, capsys):
    partitions, freq = BOARDS[board]
    if example.startswith("mshape"):
        partitions = 1
    out = tmp_path / "build"
    rc = main(["synth", str(ROOT / "examples" / example), "--board", board, "--partitioner", "pipeline",
               "--partitions", str(partitions), "--freq", freq, "-o", str(out), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r == json.loads((out / "report.json").read_text())
    assert r["board"] == board and r["options"]["partitions"] == partitions and r["timing_met"]
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
    # nothing here congests router2, which --router auto tries first on ECP5 (router1 is the iCE40's)
    assert r["router"] == ("router2" if board.startswith("ulx3s") else "router1")
    assert r["placer"] == "heap"  # --placer auto: HeAP, as these take a small share of the flip-flops
    # Yosys maps for the part's timing, and without emulating reads during writes beside block RAM
    script = (out / "cepc_board.ys").read_text()
    assert ("synth_ice40 -dffe_min_ce_use 4 -device u " in script) == (board == "icebreaker")
    assert "setparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:cepc_no_collisions %i" in script


def test_the_vhdl_back_end_synthesises_onto_a_board(tmp_path, capsys):
    # --hdl vhdl: GHDL's netlist of the VHDL in place of the Amaranth design, inside the same host link;
    # on an ECP5 its table's banks are DP16KDs, read through their output registers as Amaranth's are
    out = tmp_path / "build"
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "ulx3s-12f", "--hdl", "vhdl",
               "--partitioner", "table", "--partitions", "1024", "--freq", "30", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    r = json.loads((out / "report.json").read_text())
    assert r["options"]["hdl"] == "vhdl" and r["options"]["partitioner"] == "table" and r["timing_met"]
    assert Path(r["bitstream"]).stat().st_size > 20_000
    # the VHDL, GHDL's netlist of it, read by Yosys before the board top, whose design is an instance of it
    assert "entity cepc_vhdl is" in (out / "cepc_vhdl.vhd").read_text()
    netlist = (out / "cepc_vhdl.v").read_text()
    assert re.search(r"^module cepc_vhdl$", netlist, re.M)
    assert (out / "cepc_board.ys").read_text().startswith("# Automatically generated by Amaranth")
    assert "read_verilog  cepc_vhdl.v\nread_rtlil cepc_board.il" in (out / "cepc_board.ys").read_text()
    assert "cell \\cepc_vhdl " in (out / "cepc_board.il").read_text()
    # 1,024 partitions: 256 buckets of 4 ways, a DP16KD of 512 x 36 each, with its output register; the
    # host link's buffer takes one more, as for Verilog
    assert netlist.count("DP16KD #(") == 4 and netlist.count('.REGMODE_B("OUTREG")') == 4
    assert r["resources"]["bram"]["used"] == 5
    # its partitioner's and core's logic is all there (Verilog, the same options: 2,240 LUTs)
    assert r["resources"]["lut"]["used"] > 2000 and r["resources"]["ff"]["used"] > 2000


def test_the_vhdl_back_end_on_an_ice40_says_why_it_is_larger(tmp_path, capsys):
    # the VHDL's output FIFOs are LUT RAM, which the iCE40 lacks: said before Yosys, and with the error
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker", "--hdl", "vhdl",
               "--partitioner", "pipeline", "--partitions", "2", "--freq", "24", "-o", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    why = (r"the VHDL back end's output FIFOs are LUT RAM, which the iCE40 does not have, so their 2,704 bits "
           r"are flip-flops and multiplexers here; --hdl verilog puts them in block RAM")
    assert re.search("^note: " + why, err, re.M)
    assert re.search(r"^error: the design does not fit iCE40UP5K: it needs [\d,]+ logic cells \(ICESTORM_LC\), "
                     r"the device has 5,280 .*; use fewer --partitions \(now 2\); " + why, err, re.M)


def test_a_design_above_the_flip_flop_share_is_placed_statically_and_routed_by_router1(tmp_path, capsys,
                                                                                         monkeypatch):
    # --placer auto and --router auto: marathon's 2,638 flip-flops are 11 % of the 12F's (its die's)
    # 24,288; above a share of 5 % the flow takes nextpnr's static placer, and router1 alone
    from cepc.synth import flow
    monkeypatch.setattr(flow, "STATIC_FF_SHARE", 0.05)
    out = tmp_path / "build"
    assert main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "ulx3s-12f",
                 "--partitioner", "pipeline", "--partitions", "4", "--freq", "30", "-o", str(out)]) == 0
    assert re.search(r"note: nextpnr's static placer: the design takes 1\d% of the device's flip-flops",
                     capsys.readouterr().err)
    report = json.loads((out / "report.json").read_text())
    assert (report["router"], report["placer"]) == ("router1", "static")
    assert report["placer_reason"].startswith("the design takes 1")  # (and why)
    log = (out / "nextpnr.log").read_text()
    assert "Router1 time" in log and "overused=" not in log  # router1's, not router2's iterations
    assert "Running Static placer" in log and "HeAP Placer Time" not in log  # the static placer's, not HeAP's


def test_mshape_does_not_fit_the_up5k_and_says_so(tmp_path, capsys):
    # one partition of M-shape's partial matches (1,094 bits of registers, their multiplexers and
    # comparators) is more logic than the UP5K has (bench/results/synth.md: with the partitions
    # cepc sizes, its FIFO and delay line also take more than the 30 block RAMs)
    rc = main(["synth", str(ROOT / "examples" / "mshape" / "mshape.sql"), "--board", "icebreaker",
               "--partitioner", "pipeline", "--partitions", "1", "--freq", "24", "-o", str(tmp_path)])
    assert rc == 1
    assert re.search(r"^error: the design does not fit iCE40UP5K: it needs [\d,]+ logic cells \(ICESTORM_LC\), "
                     r"the device has 5,280 \([\d,]+ or \d+% over\); use fewer --partitions \(now 1\)$",
                     capsys.readouterr().err, re.M)


def test_a_design_that_does_not_fit_is_a_clear_error(tmp_path, capsys):
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
               "--partitioner", "pipeline", "--partitions", "40", "-o", str(tmp_path)])
    assert rc == 1
    assert re.search(r"^error: the design does not fit iCE40UP5K: it needs [\d,]+ logic cells \(ICESTORM_LC\), "
                     r"the device has 5,280 \([\d,]+ or \d+% over\); use fewer --partitions \(now 40\)$",
                     capsys.readouterr().err, re.M)


def test_a_clock_the_pll_cannot_make_is_a_usage_error(tmp_path, capsys):
    assert main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
                 "--freq", "900", "-o", str(tmp_path)]) == 1
    assert "error: the PLL cannot make 900 MHz from the board's 12 MHz; the nearest is" in capsys.readouterr().err


def test_a_design_clock_below_the_host_links_is_refused(tmp_path, capsys):
    # the iCEBreaker's host link runs on the 12 MHz oscillator; the design's clock may not be slower
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
               "--freq", "10", "-o", str(tmp_path)])
    assert rc == 1
    assert re.search(r"^error: the link's clock \(12 MHz\) must not be faster than the design's \(9\.9375 MHz\)$",
                     capsys.readouterr().err, re.M)
    assert not (tmp_path / "yosys.log").exists()  # refused before synthesis


def test_a_terminated_synth_stops_its_tools(tmp_path):
    # SIGTERM (a CI job's limit, `kill`) while Yosys runs: cepc exits and takes Yosys with it
    out = tmp_path / "build"
    proc = subprocess.Popen([sys.executable, "-m", "cepc.cli", "synth", str(ROOT / "examples" / "marathon" / "marathon.sql"),
                             "--board", "ulx3s-12f", "-o", str(out)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "yosys.log").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM

    def tools_in(d: Path) -> list[int]:
        pids = []
        for p in Path("/proc").iterdir():
            try:
                if p.name.isdigit() and Path(os.readlink(p / "cwd")) == d:
                    pids.append(int(p.name))
            except OSError:
                pass
        return pids

    assert tools_in(out.resolve()) == []


@pytest.mark.parametrize("fifo", ["block_ram", "delay_line"])
def test_memories_that_never_read_a_word_being_written_are_block_ram_alone(fifo, tmp_path):
    # cepc.hw.ecp5.NO_COLLISIONS, as the flow tells Yosys (flow.no_collisions_script): without it Yosys
    # emulates a read of the word being written beside an iCE40's block RAM, two flip-flops and a LUT
    # a bit (an 88-bit FIFO: 182 flip-flops and 94 LUTs)
    from amaranth.back import rtlil

    from cepc.hw.delay import DelayLine
    from cepc.hw.fifo import BlockRamFifo
    from cepc.synth.flow import no_collisions_script

    if fifo == "block_ram":
        dut = BlockRamFifo(88, 16)
        ports = [dut.w_data, dut.w_en, dut.w_rdy, dut.w_level, dut.r_data, dut.r_rdy, dut.r_en]
        own = 20  # pointers, levels, flags
    else:  # a ring of 199 words in block RAM, then its output register
        dut = DelayLine(88, 200)
        ports = [dut.en, dut.i_valid, dut.i_data, dut.o_valid, dut.o_data]
        own = 88 + 200 + 8  # the output register, the valid bits, the pointer
    (tmp_path / "m.il").write_text(rtlil.convert(dut, ports=ports))
    flops = {}
    for told in (True, False):
        script = no_collisions_script() if told else ""
        (tmp_path / "m.ys").write_text(f"read_rtlil m.il\n{script}\nsynth_ice40 -top top\ntee -q -o stat.json stat -json\n")
        subprocess.run([*yowasp_or_skip("yosys"), "-q", "m.ys"], cwd=tmp_path, check=True, capture_output=True)
        cells = json.loads((tmp_path / "stat.json").read_text())["design"]["num_cells_by_type"]
        assert cells.get("SB_RAM40_4K", 0) >= 6
        flops[told] = sum(n for t, n in cells.items() if t.startswith("SB_DFF"))
    assert flops[True] <= own and flops[False] - flops[True] >= 2 * 88, flops
