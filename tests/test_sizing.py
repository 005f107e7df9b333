"""`--partitioner auto`: the tables get the block RAM the rest of the design leaves.

On the iCE40 (no LUT RAM) the 16-deep output FIFOs and the host link's buffer take block RAM, one
per 16 bits of width; `auto` once gave network's tables half of the UP5K as if they were free, and
the design did not fit (38 of 30 block RAMs); nor did the pipeline it falls back to, whose delay line
is then block RAM as well (39). The slow test ties the count to Yosys's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cepc.cli import main
from cepc.hw import sizing, top
from cepc.hw.layouts import record_layout
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa.lower import lower

from synthtools import assert_flow_report, yowasp_or_skip

ROOT = Path(__file__).resolve().parent.parent
UP5K, ECP5 = sizing.DEVICES["ice40up5k"], sizing.DEVICES["ecp5-85f"]


def design(example: str):
    return lower(check(parse_file(ROOT / "examples" / example)))


def test_the_fifo_depth_is_the_tops():
    assert sizing.FIFO_DEPTH == top.OUTPUT_FIFO_DEPTH


def test_fifos_take_block_ram_only_without_lut_ram():
    net = design("network/network.sql")
    assert record_layout(net).size == 81 and net.tuple.nbytes * 8 == 152
    # two queries' 81-bit records (6 blocks of 256 × 16 each) and the 152-bit spill FIFO (10)
    assert sizing.reserved_blocks(net, UP5K) == sizing.Reserved(fifos=22, buffer=0)
    assert sizing.reserved_blocks(net, UP5K, 2048) == sizing.Reserved(fifos=22, buffer=4)  # 4 × 512 × 8
    assert sizing.reserved_blocks(net, ECP5, 2048) == sizing.Reserved(fifos=0, buffer=1)  # one 2,048 × 9


def test_auto_leaves_room_for_the_fifos_and_the_buffer():
    net = design("network/network.sql")
    # the FIFOs' 22 blocks and the buffer's 4 leave 4: a table of one way and 256 partitions a query,
    # 2 blocks each (256 × 16: the state, the 24-bit quotient tag and the in-use bit). With the full
    # 32-bit key as its tag no table fitted, and network got a pipeline of 2.
    reserved = sizing.reserved_blocks(net, UP5K, 2048)
    choice = sizing.choose(net, UP5K, reserved=reserved)
    assert (choice.partitioner, choice.partitions, choice.ways) == ("table", 256, 1)
    assert [(t.entry_bits, t.blocks) for t in choice.tables] == [(27, 2), (27, 2)]
    assert reserved.blocks + 4 == UP5K.blocks
    # mshape: its FIFOs (25 blocks) and the buffer leave 1 block, not enough for the smallest table
    msh = design("mshape/mshape.sql")
    reserved = sizing.reserved_blocks(msh, UP5K, 2048)
    choice = sizing.choose(msh, UP5K, reserved=reserved)
    assert choice.partitioner == "pipeline"
    assert "not even a 64-entry table fits the 1 of" in choice.reason
    # and a pipeline of 1: the delay line of 16 would be a ring of 15 163-bit payloads in 11 blocks, so
    # at most a line of 2 registers (one of 4 is too many flip-flops: network's, measured, 103 % of the
    # logic cells), and an element of 934 flip-flops (its key, its vector, six states' registers of
    # their own and LAST(price) once) takes a sixth of the UP5K's 5,280 (two of 1,094 and the rest of
    # mshape took 8,900 logic cells)
    assert sizing.payload_bits(msh) == 163 and UP5K.blocks_for(15, 163) == 11
    assert sizing.element_bits(msh) == 32 + 6 + 6 * 144 + 32 and sizing.elements_fitting(msh, UP5K) == 1
    assert choice.partitions == 1 and sizing.REGISTER_PIPELINE == 2
    assert "1 partition of 934 flip-flops: 17% of ice40up5k's 5,280 at most" in choice.reason
    # where the ring fits (or is LUT RAM), the flip-flops' cap alone: 14 of mshape's elements take a
    # sixth of the 85F's 83,640 flip-flops; marathon's 25-bit ones keep the default length
    roomy = sizing.Reserved(fifos=0, buffer=0)
    assert sizing.pipeline_length(msh, ECP5, reserved) == 14 and sizing.pipeline_length(msh, UP5K, roomy) == 1
    # marathon: 12 blocks of FIFOs, 4 of buffer, its table the 14 left
    mar = design("marathon/marathon.sql")
    assert sizing.pipeline_length(mar, UP5K, roomy) == 16  # (25-bit elements)
    reserved = sizing.reserved_blocks(mar, UP5K, 2048)
    choice = sizing.choose(mar, UP5K, reserved=reserved)
    assert choice.partitioner == "table" and choice.partitions == 4096
    assert reserved.blocks + sum(t.blocks for t in choice.tables) <= UP5K.blocks
    # where FIFOs are LUT RAM, half the device stays the tables' (the sizes measured on ECP5 stand)
    assert sizing.choose(net, ECP5, reserved=sizing.reserved_blocks(net, ECP5, 2048)) == sizing.choose(net, ECP5)
    # 2 × 48 of the 85F's 208 blocks: 32,768 partitions a query (16,384 with the full key as the tag)
    assert sizing.choose(net, ECP5).partitions == 32768


def test_auto_falls_back_to_the_pipeline_only_when_the_tables_logic_does_not_fit(monkeypatch, tmp_path):
    # `auto` sizes tables by block RAM; nextpnr alone knows whether their logic fits
    from cepc.errors import FitError
    from cepc.lang.parse import parse_file as parse
    from cepc.synth import flow

    placed = []

    def place(design, choice, opts, *args):
        placed.append((choice.partitioner, choice.partitions))
        if choice.partitioner == "table":
            raise FitError(f"the design does not fit: {opts.partitioner}", bel=failing["bel"],
                           detail="it needs 6,110 logic cells (ICESTORM_LC), the device has 5,280")
        return "placed"

    monkeypatch.setattr(flow, "_place_fastest", place)  # (its builds: _place, each)
    checked = check(parse(ROOT / "examples" / "network" / "network.sql"))
    notes = []
    failing = {"bel": "ICESTORM_LC"}  # what nextpnr finds too little of
    opts = flow.SynthOptions(board="icebreaker", out_dir=tmp_path)
    assert flow.synthesize(checked, opts, notes.append) == "placed"
    assert placed == [("table", 256), ("pipeline", 2)]
    assert any(n.startswith("note: the tables of 256 partitions do not fit iCE40UP5K: it needs 6,110") for n in notes)
    # not when the user asked for the table or its size, nor when block RAM is what does not fit
    for asked, bel in (({"partitioner": "table"}, "ICESTORM_LC"), ({"partitions": 256}, "ICESTORM_LC"),
                       ({}, "ICESTORM_RAM")):
        placed.clear()
        failing["bel"] = bel
        with pytest.raises(FitError):
            flow.synthesize(checked, flow.SynthOptions(board="icebreaker", out_dir=tmp_path, **asked))
        assert placed == [("table", 256)]


def test_fifos_too_wide_for_block_ram_are_stored_as_two_halves_behind_the_pipeline():
    # finance0 on the UP5K: its FIFOs' full words (19 blocks for the 289-bit records, 10 for the tuples)
    # and the buffer take 33 of 30; as two halves a word, 10 and 5. The spill FIFO's alone make them fit
    # (28), and take fewer flip-flops than the records' too
    fin = design("finance/finance0/finance0.sql")
    assert sizing.reserved_blocks(fin, UP5K, 2048) == sizing.Reserved(fifos=29, buffer=4)
    both = sizing.reserved_blocks(fin, UP5K, 2048, ("records", "spill"))
    assert both == sizing.Reserved(fifos=15, buffer=4, two_beat=("spill", "records"))
    reserved = sizing.fitting_fifos(fin, UP5K, 2048, "auto")
    assert reserved == sizing.Reserved(fifos=24, buffer=4, two_beat=("spill",))
    assert sizing.fitting_fifos(fin, UP5K, 2048, "pipeline") == reserved
    assert sizing.fitting_fifos(fin, UP5K, 2048, "table") is None  # (a tuple a cycle: a word a cycle)
    # finance2's 322-bit records: the spill FIFO's halves leave it the UP5K's 30 blocks exactly
    f2 = design("finance/finance2/finance2.sql")
    assert sizing.fitting_fifos(f2, UP5K, 2048, "auto") == sizing.Reserved(fifos=26, buffer=4, two_beat=("spill",))
    # the records' too, where the spill FIFO's alone leave them too many (a larger buffer)
    assert sizing.fitting_fifos(fin, UP5K, 4096, "auto").two_beat == ("spill", "records")
    assert sizing.fitting_fifos(fin, UP5K, 16384, "auto") is None  # (the buffer alone takes 32)
    from cepc.synth.flow import _reserved_message
    big = [sizing.reserved_blocks(fin, UP5K, 16384, kinds) for kinds in ((), sizing.TWO_BEAT_FIFOS)]
    assert _reserved_message(fin, UP5K, *big).endswith(
        "(31 over) before any partition state; as two halves a word (behind the pipeline partitioner) they take 47 "
        "(15 and 32); fewer --partitions cannot help; fewer or narrower MEASURES, fewer queries or a larger device can")
    choice = sizing.choose(fin, UP5K, reserved=reserved)
    assert (choice.partitioner, choice.partitions, choice.two_beat_fifos) == ("pipeline", 1, ("spill",))
    assert "fit ice40up5k's block RAM only as two halves a word" in choice.reason
    assert "the spill FIFO stores a word as two halves" in choice.reason
    assert sizing.choose(fin, UP5K, "pipeline", 2, reserved=reserved).two_beat_fifos == ("spill",)
    with pytest.raises(ValueError, match="two halves a word, behind the pipeline"):
        sizing.choose(fin, UP5K, "table", reserved=reserved)
    # where full words fit, or the device has LUT RAM, they stay full words
    msh = design("mshape/mshape.sql")
    assert sizing.fitting_fifos(msh, UP5K, 2048, "auto") == sizing.reserved_blocks(msh, UP5K, 2048)
    assert not sizing.fitting_fifos(fin, ECP5, 2048, "auto").two_beat


def test_synth_places_finance0_on_the_up5k_behind_the_pipeline_with_two_beat_fifos(monkeypatch, tmp_path):
    from cepc.lang.parse import parse_file as parse
    from cepc.synth import flow

    chosen, notes = [], []
    monkeypatch.setattr(flow, "_place_fastest", lambda design, choice, *args: chosen.append(choice) or "placed")
    checked = check(parse(ROOT / "examples" / "finance" / "finance0" / "finance0.sql"))
    assert flow.synthesize(checked, flow.SynthOptions(board="icebreaker", out_dir=tmp_path), notes.append) == "placed"
    assert [(c.partitioner, c.partitions, c.two_beat_fifos) for c in chosen] == [("pipeline", 1, ("spill",))]
    assert any("two halves a word" in n for n in notes)
    chosen.clear()  # (two partitions, as asked: the FIFOs still two halves a word)
    flow.synthesize(checked, flow.SynthOptions(board="icebreaker", out_dir=tmp_path, partitions=2), notes.append)
    assert [(c.partitioner, c.partitions, c.two_beat_fifos) for c in chosen] == [("pipeline", 2, ("spill",))]


def test_a_design_whose_fifos_alone_do_not_fit_fails_before_yosys(tmp_path, capsys):
    # finance0's FIFOs fit the UP5K only as two halves a word, behind the pipeline partitioner
    rc = main(["synth", str(ROOT / "examples" / "finance" / "finance0" / "finance0.sql"), "--board", "icebreaker",
               "--partitioner", "table", "-o", str(tmp_path)])
    assert rc == 1
    err = capsys.readouterr().err
    assert re.search(r"^error: the design does not fit iCE40 UP5K: its output FIFOs alone \(1 of 289-bit match "
                     r"records and one of 160-bit tuples, 16 deep; .*\) take 29 SB_RAM40_4Ks and the host link's "
                     r"buffer 4: 33 of the device's 30 \(3 over\) before any partition state; --partitioner "
                     r"pipeline would store them as two halves a word", err, re.M)
    assert not (tmp_path / "yosys.log").exists()


@pytest.mark.slow
def test_network_on_the_icebreaker_fits_as_auto_sizes_it(tmp_path, capsys):
    for tool in ("yosys", "nextpnr-ice40", "icepack"):
        yowasp_or_skip(tool)
    rc = main(["synth", str(ROOT / "examples" / "network" / "network.sql"), "--board", "icebreaker", "--freq", "24",
               "-o", str(tmp_path / "build"), "--report", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    # the flow's checks of test_synth_flow's examples (network's synthesis for an iCE40 board is this one)
    assert_flow_report(tmp_path / "build", tmp_path / "r.json", err, "icebreaker", "24")
    # block RAM holds two tables of 256 partitions, and now their logic fits too: the FIFOs, the delay
    # line and the block RAMs beside them took 6,110 logic cells before the FIFOs' block RAM was marked
    # NO_COLLISIONS and the seq left the delay line (the fallback: the test above)
    assert "do not fit" not in err
    assert re.search(r"^partitioner: table, one tuple per cycle — synflood hashed, 1-way buckets: 256 partitions", err, re.M)
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["options"]["partitioner"] == "table" and r["options"]["partitions"] == 256 and r["timing_met"]
    assert r["tuples_per_cycle"] == 1
    # the block RAMs Yosys used: the FIFOs', the buffer's and the tables' 2 each, as sized
    net = design("network/network.sql")
    assert r["resources"]["bram"]["used"] == sizing.reserved_blocks(net, UP5K, 2048).blocks + 4 == 30
