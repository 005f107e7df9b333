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

from hwsim import unused_elaboratables
from synthtools import assert_flow_report, ice40_cells, yowasp_or_skip

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
# (mshape on the UP5K: two partitions do not fit, test_mshape_does_not_fit_the_up5k_and_says_so; one takes
# 97.5 % of its logic cells, test_mshape_fits_the_up5k_with_room_to_place, and routes, in 12 minutes:
# bench/results/synth-rounds.md)
BOARDS = {"ulx3s-12f": (4, "30"), "icebreaker": (2, "24")}


# (network on the UP5K: test_sizing's test_network_on_the_icebreaker_fits_as_auto_sizes_it, which makes
# the same checks of the flow on the table partitioner --partitioner auto picks there; it is network's
# synthesis, as the ECP5's flow is marathon's and mshape's here, for CI's time: 181 s on the 12F)
@pytest.mark.parametrize("example, board", [(e, b) for e in EXAMPLES for b in BOARDS
                                            if not (b == "icebreaker" and e.split("/")[0] in ("mshape", "network"))
                                            and not (b == "ulx3s-12f" and e.startswith("network"))])
def test_every_example_synthesises_and_meets_timing(example, board, tmp_path, capsys, monkeypatch):
    from cepc.synth import flow

    partitions, freq = BOARDS[board]
    if example.startswith("mshape"):
        partitions = 1
    # --placer auto and --router auto: above a share of the die's flip-flops the flow takes nextpnr's
    # static placer, and router1 alone. marathon's 2,638 flip-flops are 11 % of the 12F's 24,288: with
    # the share set to 5 % there it takes that way (the others, below it, HeAP; router1 on each)
    static = example.startswith("marathon") and board == "ulx3s-12f"
    if static:
        monkeypatch.setattr(flow, "STATIC_FF_SHARE", 0.05)
    out = tmp_path / "build"
    rc = main(["synth", str(ROOT / "examples" / example), "--board", board, "--partitioner", "pipeline",
               "--partitions", str(partitions), "--freq", freq, "-o", str(out), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    r = assert_flow_report(out, tmp_path / "r.json", err, board, freq, static)
    assert r["options"]["partitions"] == partitions
    # (--slot-period auto: mshape's pipeline of one element takes a tuple every three cycles, its conditions
    # two cycles of their own; the others' pipelines, of several elements, every other cycle)
    period = 3 if partitions == 1 else 2
    assert r["options"]["hazards"] == "forward" and r["options"].get("slot_period", 2) == period
    assert r["tuples_per_cycle_one_key"] == pytest.approx(r["tuples_per_cycle"], abs=1e-4)
    assert r["tuples_per_cycle"] == pytest.approx(1 / period)
    if static:
        assert re.search(r"note: nextpnr's static placer: the design takes 1\d% of the device's flip-flops", err)
        assert r["placer_reason"].startswith("the design takes 1")  # (and why)
        log = (out / "nextpnr.log").read_text()
        assert "Router1 time" in log and "overused=" not in log  # router1's, not router2's iterations
        assert "Running Static placer" in log and "HeAP Placer Time" not in log  # the static placer's, not HeAP's


def test_finance0_fits_the_up5k_with_its_spill_fifo_in_two_beats(tmp_path, capsys):
    # its FIFOs' full words and the host link's buffer take 33 of the UP5K's 30 block RAMs: `auto` stores
    # the spill FIFO's words as two halves (28), behind a pipeline of one element (a sixth of the
    # flip-flops), and the design fits (4,567 logic cells at 1fe5e20) and meets 24 MHz (27.6-32.9 at 51, seeds 1-5)
    out = tmp_path / "build"
    rc = main(["synth", str(ROOT / "examples" / "finance" / "finance0" / "finance0.sql"), "--board", "icebreaker",
               "--freq", "24", "-o", str(out), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert re.search(r"^partitioner: pipeline \(Woods et al.\), 1 partition, .*; the spill FIFO stores a word as two "
                     r"halves, in half the block RAM\)$", err, re.M)
    r = assert_flow_report(out, tmp_path / "r.json", err, "icebreaker", "24")
    assert r["options"]["partitioner"] == "pipeline" and r["options"]["partitions"] == 1
    assert r["resources"]["bram"]["used"] == 28  # (19 for the records, 5 for the spill FIFO's halves, 4 for the buffer)
    side = json.loads((out / "cepc_board.layout.json").read_text())
    assert side["options"]["two_beat_fifos"] == ["spill"]


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
    # beside each way's blocks, registers of its own (its read address, the write it takes), which
    # Yosys keeps apart as modules of their own rather than merging them into one register
    copies = re.findall(r"^\s*(cepc_vhdl_replica_\d+) \w+ \(", netlist, re.M)
    assert len(copies) == 2 * 4, copies
    kept = json.loads((out / "cepc_board.stat.json").read_text())["modules"]
    assert {"\\" + c for c in copies} <= set(kept), sorted(kept)
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


def test_mshape_does_not_fit_the_up5k_and_says_so(tmp_path, capsys):
    # the flow's clear error for a design that does not fit, on a real example: two partitions of
    # M-shape's partial matches (1,094 bits of registers each, their multiplexers and comparators) are
    # more logic than the UP5K has: 8,900 logic cells at a112817 (one partition takes 5,223 of its
    # 5,280, 98 %, and nextpnr's router then takes many minutes; bench/results/synth-rounds.md: with the
    # partitions cepc sizes, its FIFO and delay line also take more than the 30 block RAMs)
    rc = main(["synth", str(ROOT / "examples" / "mshape" / "mshape.sql"), "--board", "icebreaker",
               "--partitioner", "pipeline", "--partitions", "2", "--freq", "24", "-o", str(tmp_path)])
    assert rc == 1
    assert re.search(r"^error: the design does not fit iCE40UP5K: it needs [\d,]+ logic cells \(ICESTORM_LC\), "
                     r"the device has 5,280 \([\d,]+ or \d+% over\); use fewer --partitions \(now 2\)$",
                     capsys.readouterr().err, re.M)


class _Packed(Exception):
    """Raised by test_mshape_fits_the_up5k_with_room_to_place's nextpnr, which packs and stops."""


def test_mshape_fits_the_up5k_with_room_to_place(tmp_path, monkeypatch):
    # `cepc synth`'s design for mshape on the UP5K (one partition of 1,094 bits of partial matches), up to
    # nextpnr's packing into logic cells: 5,149 of the 5,280 at 0fdc227, which nextpnr places at seeds 1-3, 5
    # and 6 (40.7-46.2 MHz; HeAP not at seeds 4 and 7). Its conditions' orderings each taking chains of their own (a
    # field's against one value both ways) took it to 5,273, which nextpnr could not place in 24 minutes. 4,498
    # at 2c99038 (the iCE40's framer without an output register, stage 3's tuple from stage 2's registers); 4,337
    # at 7d234bb (the record's last tuple and the spilled tuple read from the register stage before the core);
    # far fewer would mean the design lost logic it needs
    from cepc.cli import _load
    from cepc.synth import flow
    from cepc.synth import report as rep

    packed = {}

    def pack_only(cmd, out, routers, watch, progress=lambda s: None, cancel=None):
        subprocess.run([*cmd, "--pack-only"], cwd=out, capture_output=True)  # (it exits 1 after packing, its log written)
        packed["cells"] = rep.log_utilisation((out / "nextpnr.log").read_text())["ICESTORM_LC"]
        raise _Packed

    monkeypatch.setattr(flow, "place_and_route", pack_only)
    opts = flow.SynthOptions(board="icebreaker", out_dir=tmp_path)
    with pytest.raises(_Packed):
        flow.synthesize(_load(str(ROOT / "examples" / "mshape" / "mshape.sql")), opts)
    assert packed["cells"].available == 5_280 and 4_000 <= packed["cells"].used <= 5_200
    # (--slot-period auto: a tuple every three cycles, its conditions' compares in slices a cycle before
    # their join: 4,519 logic cells at 3 against 4,337 at 2)
    assert json.loads((tmp_path / "cepc_board.layout.json").read_text())["options"]["slot_period"] == 3


def test_freq_max_builds_again_below_what_the_clock_reached(tmp_path):
    # the UP5K cannot run marathon at 100 MHz: --freq max builds again at the fastest clock the PLL makes
    # at least FASTEST_MARGIN below what the last build reached, until one meets its clock, and the
    # report gives every build (the CLI's `--freq max` starts at the board's clock, which this board
    # may meet at once)
    from cepc.cli import _load
    from cepc.synth import flow

    notes = []
    opts = flow.SynthOptions(board="icebreaker", out_dir=tmp_path / "build", freq_mhz=100, fastest=True,
                             partitioner="pipeline", partitions=2)
    result = flow.synthesize(_load(str(ROOT / "examples" / "marathon" / "marathon.sql")), opts, notes.append)
    builds = result.summary["freq_builds"]
    assert builds[0]["target_mhz"] == 100.5 and not builds[0]["met"]
    assert 2 <= len(builds) <= flow.FASTEST_BUILDS
    for before, after in zip(builds, builds[1:]):
        assert not before["met"]
        below = before["achieved_mhz"] * (1 - flow.FASTEST_MARGIN)
        assert after["target_mhz"] == round(flow.pll_at_most("ice40", 12e6, below, 115200).output_hz / 1e6, 3)
        assert after["target_mhz"] <= below
    last = builds[-1]
    assert result.summary["options"]["clock_mhz"] == last["target_mhz"] and result.report.timing_met == last["met"]
    assert last["met"] or len(builds) == flow.FASTEST_BUILDS
    assert json.loads((tmp_path / "build" / "report.json").read_text())["freq_builds"] == builds
    assert notes.count(next(n for n in notes if n.startswith("note: --freq max: 100.5 MHz missed (the design's "
                                                                 "clock reached "))) == 1
    if last["met"]:
        assert result.summary["suggested_freq_mhz"] is None and result.bitstream.exists()
        assert notes[-1].startswith(f"note: --freq max: timing met at {last['target_mhz']:g} MHz, build {len(builds)}")


def test_several_seeds_are_placed_in_turn_and_the_fastest_kept(tmp_path, capsys):
    # marathon's two pipeline partitions on the UP5K at 100.5 MHz, a clock it does not reach: nextpnr
    # places and routes the one netlist at seeds 1 and 2, and the faster placement is kept, its files
    # where the user looks; each seed's stays in seeds/S
    out = tmp_path / "build"
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
               "--partitioner", "pipeline", "--partitions", "2", "--freq", "100", "--seed", "1-2", "-o", str(out),
               "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 1, err
    r = json.loads((tmp_path / "r.json").read_text())
    runs = r["seeds"]
    assert [run["seed"] for run in runs] == [1, 2] and not any(run["met"] for run in runs)
    kept = max(runs, key=lambda run: run["achieved_mhz"])
    assert r["options"]["seed"] == kept["seed"] and r["clocks"][0]["achieved_mhz"] == kept["achieved_mhz"]
    for run in runs:  # each seed's own report, kept
        seed_report = json.loads((out / "seeds" / str(run["seed"]) / "nextpnr-report.json").read_text())
        assert round(max(seed_report["fmax"].values(), key=lambda c: c["constraint"])["achieved"], 2) == \
            run["achieved_mhz"]
    assert (out / "nextpnr-report.json").read_bytes() == \
        (out / "seeds" / str(kept["seed"]) / "nextpnr-report.json").read_bytes()
    assert (out / "cepc_board.asc").read_bytes() == (out / "seeds" / str(kept["seed"]) / "cepc_board.asc").read_bytes()
    assert "note: nextpnr seed 1: timing missed (the design's clock reached" in err
    # (on a machine of several cores, the seeds one at a time: told of --jobs)
    cores = len(os.sched_getaffinity(0))
    assert ("note: 2 seeds one at a time; --jobs 2 would place and route 2 at once on this machine's "
            in err) == (cores > 1)
    assert f"nextpnr seeds {flow_seeds_text(runs, kept['seed'])}" in err
    assert f"; at nextpnr's seeds {flow_seeds_text(runs, kept['seed'])}; lower --freq" in " ".join(err.split())
    assert (out / "yosys.log").read_text().count("Executing SYNTH_ICE40 pass") == 1  # one netlist
    # every endpoint that misses the clock, from the kept placement's SDF: its worst is nextpnr's own
    # critical path, and the error and the summary say how many miss it and where
    late, path = r["endpoints"], r["critical_paths"][0]
    assert path["clock"] == r["clocks"][0]["name"] and abs(late["worst_ns"] - path["delay_ns"]) <= 0.011
    assert late["period_ns"] == round(1000 / 100.5, 3) and 0 < late["failing"] <= late["total"]
    assert sum(g["failing"] for g in late["groups"]) <= late["failing"] and late["groups"][0]["worst_ns"] == \
        late["worst_ns"]
    # the path into the worst register, traced back through the SDF, is nextpnr's critical path: from the
    # same register, its time in logic and in routes the same (to the rounding of each)
    worst = late["groups"][0]
    from cepc.synth.sta import _register
    assert worst["source"] == _register(path["start"])
    assert abs(worst["routing_ns"] - path["routing_ns"]) <= 0.011 and abs(worst["logic_ns"] - path["logic_ns"]) <= 0.011
    assert late["paths"][0].startswith(f"{worst['register']} ← {worst['source']}: {worst['worst_ns']:.2f} ns, ")
    assert " ".join(late["paths"][0].split()) in " ".join(err.split())  # (printed under the summary)
    assert all(run["endpoints_failing"] > 0 for run in runs)
    assert f"; {late['summary']}" in " ".join(err.split()) and late["summary"].startswith(
        f"{late['failing']:,} of {late['total']:,} endpoints miss it, in ")
    # the same seeds two at once (--jobs 2), each nextpnr in seeds/S: the same placements, byte for byte,
    # and the same report but for the seconds taken
    at_once = tmp_path / "at_once"
    rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
               "--partitioner", "pipeline", "--partitions", "2", "--freq", "100", "--seed", "1-2", "--jobs", "2",
               "-o", str(at_once), "--report", str(tmp_path / "r2.json")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "--jobs 2 would" not in err
    r2 = json.loads((tmp_path / "r2.json").read_text())
    assert {k: v for k, v in r2.items() if k != "seconds"} == {k: v for k, v in r.items() if k != "seconds"}
    for seed in (1, 2):
        assert (at_once / "seeds" / str(seed) / "cepc_board.asc").read_bytes() == \
            (out / "seeds" / str(seed) / "cepc_board.asc").read_bytes()
    assert (at_once / "cepc_board.asc").read_bytes() == (out / "cepc_board.asc").read_bytes()


def flow_seeds_text(runs, kept):
    from cepc.synth.flow import seeds_text
    return seeds_text(runs, kept)


def test_freq_is_a_clock_or_max(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
              "--freq", "fast", "-o", str(tmp_path)])
    assert "argument --freq: a clock in MHz or max, not 'fast'" in capsys.readouterr().err


def test_a_clock_the_pll_cannot_make_is_a_usage_error(tmp_path, capsys):
    assert main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
                 "--freq", "900", "-o", str(tmp_path)]) == 1
    assert "error: the PLL cannot make 900 MHz from the board's 12 MHz; the nearest is" in capsys.readouterr().err


def test_a_design_clock_below_the_host_links_is_refused(tmp_path, capsys):
    # the iCEBreaker's host link runs on the 12 MHz oscillator; the design's clock may not be slower
    with unused_elaboratables() as unused:
        rc = main(["synth", str(ROOT / "examples" / "marathon" / "marathon.sql"), "--board", "icebreaker",
                   "--freq", "10", "-o", str(tmp_path)])
    assert rc == 1
    assert unused == []  # the refused link and the design made for it say nothing when they are collected
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
    il = rtlil.convert(dut, ports=ports)
    flops = {}
    for told in (True, False):
        cells = ice40_cells(il, tmp_path, no_collisions_script() if told else "")
        assert cells.get("SB_RAM40_4K", 0) >= 6
        flops[told] = sum(n for t, n in cells.items() if t.startswith("SB_DFF"))
    assert flops[True] <= own and flops[False] - flops[True] >= 2 * 88, flops


@pytest.mark.parametrize("inverse", ["a", "b"])
def test_the_orderings_of_a_pair_share_their_carry_chains(inverse, tmp_path):
    # cepc.hw.expr.ordered given an operand's inverse: on the iCE40 (Yosys' synth_ice40), a pair's four
    # orderings take the carry chains of one and one more slice's (its lowest: u <= v's carry in), as
    # Yosys' own compares of a pair share theirs. A pair's chains a way (a < b apart from b < a) took
    # twice one's, and mshape to 5,273 of the UP5K's 5,280 logic cells, which nextpnr could not place
    from amaranth.back import rtlil
    from amaranth.hdl import Cat, Module, Signal

    from cepc.hw.expr import ordered

    def cells(ops, chained=False, width=32):
        m = Module()
        a, b, na, nb = Signal(width), Signal(width), Signal(width), Signal(width)
        out = Signal(len(ops))
        given = (na, None) if inverse == "a" else (None, nb)
        m.d.comb += out.eq(Cat(*(ordered(op, a, b, 16, given, chained) for op in ops)))
        il = rtlil.convert(m, name="top", ports=[a, b, na, nb, out], emit_src=False)
        return ice40_cells(il, tmp_path)

    def carries(ops, chained=False, width=32):
        return cells(ops, chained, width).get("SB_CARRY", 0)

    one = carries(["<"])
    assert 32 <= one <= 34  # (two slices of 16 bits)
    assert carries(["<", "<=", ">", ">="]) <= one * 3 // 2 + 1
    # with the slices' equalities from chains (chained, above 32 bits): each upper slice's v >= u a chain
    # more, shared by the four as the rest is (the lowest slice's two chains, as above), and the
    # equalities' LUTs gone (16 bit pairs each: at least four LUTs in a tree)
    assert carries(["<"], chained=True) == one
    wide = carries(["<"], width=48)
    chained = carries(["<"], chained=True, width=48)
    assert wide + 32 <= chained <= wide + 36
    assert carries(["<", "<=", ">", ">="], chained=True, width=48) <= chained + 17
    assert cells(["<"], chained=True, width=48).get("SB_LUT4", 0) <= cells(["<"], width=48).get("SB_LUT4", 0) - 6
