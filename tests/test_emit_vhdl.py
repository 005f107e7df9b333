"""`cepc compile --hdl vhdl`: VHDL-2008 that GHDL analyses, elaborates and synthesises without a warning.

Every example and an awkward fixture (names that are not VHDL identifiers or clash in VHDL,
predicates over every type) in several configurations; the header, the names from the query,
and the sidecar (the same as for Verilog). Behaviour is tested in test_sim_ghdl.py.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cepc import __version__
from cepc.cli import main
from cepc.emit import vhdl
from cepc.tools import GHDL_STD, GHDL_WARNINGS

ROOT = Path(__file__).resolve().parent.parent
AWKWARD = ROOT / "tests" / "fixtures" / "vhdl" / "awkward.sql"
# a WITHIN query without aggregates in DEFINE or MEASURES (latest start), and signed registers
PARTIAL = ROOT / "tests" / "fixtures" / "vhdl" / "partial_matches.sql"
WINDOWS = ROOT / "tests" / "fixtures" / "vhdl" / "windows.sql"  # WITHIN on a signed time, a window wider than it
SCALED = ROOT / "tests" / "fixtures" / "vhdl" / "scaled.sql"  # scaled registers whose names meet others'
MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"
NETWORK = ROOT / "examples" / "network" / "network.sql"
HARDWARE_EXAMPLES = sorted((ROOT / "examples").rglob("*.sql"))
# the examples whose states keep partial-match registers (aggregates, MEASURES, WITHIN)
PARTIAL_MATCH_EXAMPLES = [p for p in HARDWARE_EXAMPLES
                          if "MEASURES" in p.read_text().upper() or "WITHIN" in p.read_text().upper()]

needs_ghdl = pytest.mark.skipif(shutil.which("ghdl") is None and os.environ.get("CI") != "true",
                                reason="GHDL is not installed (make setup installs it)")


def ghdl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["ghdl", *args], cwd=cwd, capture_output=True, text=True)


def assert_clean(vhd: Path, top: str = "cepc_top") -> None:
    """Analyse and elaborate with every GHDL warning on, elaborate fully, synthesise: no message at all."""
    work = vhd.parent
    steps = [
        ["-a", *GHDL_STD, *GHDL_WARNINGS, vhd.name],
        ["-e", *GHDL_STD, *GHDL_WARNINGS, top],
        ["-r", *GHDL_STD, top, "--no-run"],  # mcode: builds the whole hierarchy, generics and generates
        ["--synth", *GHDL_STD, top],  # synthesisable, and no inferred latch or undriven signal
    ]
    for step in steps:
        done = ghdl(*step, cwd=work)
        assert done.returncode == 0, f"ghdl {' '.join(step)}:\n{done.stderr}"
        messages = [line for line in done.stderr.splitlines()
                    if line and not line.startswith(" ") and ":note:" not in line]
        assert not messages, f"ghdl {' '.join(step)}:\n{done.stderr}"


def compile_vhdl(query: Path, out: Path, *args: str) -> str:
    assert main(["compile", str(query), "-o", str(out), *args]) == 0
    return out.read_text()


def test_there_are_examples_to_compile():
    assert len(HARDWARE_EXAMPLES) >= 2


@needs_ghdl
@pytest.mark.parametrize("query", HARDWARE_EXAMPLES + [AWKWARD, PARTIAL, WINDOWS, SCALED],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
@pytest.mark.parametrize("options", [
    ["--bus-width", "8", "--partitioner", "pipeline", "--partitions", "1"],
    ["--bus-width", "64", "--partitioner", "pipeline", "--partitions", "16"],
    ["--bus-width", "512", "--partitioner", "pipeline", "--partitions", "3", "--evict-after", "1000"],
    # auto: the table cepc sizes for the device (direct-indexed for narrow keys), the three-cycle update for
    # queries with partial-match registers
    ["--bus-width", "64"],
    ["--bus-width", "64", "--update-cycles", "1"],
    # hashed, with the one- and two-cycle updates (auto picks the three-cycle one for queries with partial-match
    # registers);
    # the one-cycle one with --hazards stall (nothing forwarded, the keys of a bucket spaced)
    ["--bus-width", "32", "--partitioner", "table", "--partitions", "64", "--evict-after", "100000",
     "--hazards", "stall", "--update-cycles", "1"],
    ["--bus-width", "32", "--partitioner", "table", "--partitions", "64", "--evict-after", "100000",
     "--update-cycles", "2"],
    # and the three-cycle one with --hazards stall (its spacing of 9)
    ["--bus-width", "32", "--partitioner", "table", "--partitions", "64", "--evict-after", "100000",
     "--hazards", "stall", "--update-cycles", "3"],
], ids=["8-bit-pipeline-1", "64-bit-pipeline-16", "512-bit-pipeline-3-evict", "64-bit-auto", "64-bit-auto-update-1",
        "32-bit-table-64-evict-stall-update-1", "32-bit-table-64-evict-update-2", "32-bit-table-64-evict-stall-update-3"])
def test_ghdl_analyses_elaborates_and_synthesises_without_a_warning(query, options, tmp_path):
    text = compile_vhdl(query, tmp_path / "top.vhd", *options)
    if options[-2:] == ["--update-cycles", "1"]:  # (pinned: no table registers its lookup)
        assert "UPDATE_CYCLES => 2" not in text
    if "stall" in options:  # (every table spaces its keys, where the design has one)
        assert text.count("HAZARD_STALL => true") == text.count("entity work.cepc_top_table_partitioner")
    assert_clean(tmp_path / "top.vhd")


@needs_ghdl
def test_several_queries_without_partition_by(tmp_path):
    # no pipeline partitioner at all: every partitioner is a single partition, the delay line one stage
    q = tmp_path / "q.sql"
    q.write_text("CREATE STREAM s (k UINT8, v INT8);\n"
                 "NAME a PATTERN (A B+) DEFINE A AS v < 0, B AS v >= 0;\n"
                 "NAME b AFTER MATCH CONTINUE PATTERN (. A) DEFINE A AS k = 255;\n")
    text = compile_vhdl(q, tmp_path / "top.vhd", "--top", "Flat_Top")
    assert "entity Flat_Top is" in text and "entity work.Flat_Top_pipeline_partitioner" not in text
    assert_clean(tmp_path / "top.vhd", "Flat_Top")


def test_header_names_the_query_and_the_version(tmp_path):
    text = compile_vhdl(MARATHON, tmp_path / "top.vhd", "--top", "marathon_top", "--partitioner", "pipeline",
                        "--partitions", "16")
    head = text.splitlines()[:8]
    assert head[0] == f"-- Generated by cepc {__version__} from {MARATHON}: do not edit."
    assert "-- Query 0 q0: PARTITION BY runner; AFTER MATCH SKIP PAST LAST ROW; " \
           "PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )" in head
    assert "-- Options: --bus-width 64 --partitions 16 --partitioner pipeline --device ecp5-85f --automaton nfa" in head
    # the top comes last, after one entity per component, each saying which template it came from
    entities = re.findall(r"^entity (\w+) is$", text, re.M)
    assert entities == ["marathon_top_framer", "marathon_top_decoder", "marathon_top_q0_nfa",
                        "marathon_top_partition_element", "marathon_top_partition_tail",
                        "marathon_top_pipeline_partitioner",
                        "marathon_top_delay_line", "marathon_top_fifo", "marathon_top"]
    for name in entities:
        assert re.search(rf"^-- {name}: autogenerated by cepc from hdl_templates/\w+\.vhd\.j2$", text, re.M), name


def test_the_file_holds_only_the_partitioners_it_uses(tmp_path):
    text = compile_vhdl(MARATHON, tmp_path / "top.vhd")  # auto: the table
    entities = re.findall(r"^entity (\w+) is$", text, re.M)
    assert "cepc_top_table_partitioner" in entities
    assert not {"cepc_top_pipeline_partitioner", "cepc_top_single_partition"} & set(entities)


def test_ports_are_those_of_the_verilog_top(tmp_path):
    text = compile_vhdl(NETWORK, tmp_path / "top.vhd", "--bus-width", "32")
    side = json.loads((tmp_path / "top.json").read_text())
    entity = text[text.index("entity cepc_top is"):]
    entity = entity[:entity.index("end entity;")]
    ports = {}
    for name, direction, kind in re.findall(r"^\s+(\w+)\s+: (in|out)\s+(std_logic_vector\(\d+ downto 0\)|std_logic)",
                                            entity, re.M):
        width = int(re.search(r"\((\d+) downto 0\)", kind)[1]) + 1 if "vector" in kind else 1
        ports[name] = {"dir": direction, "width": width}
    assert ports.pop("clk") == ports.pop("rst") == {"dir": "in", "width": 1}
    assert ports == side["ports"]


def test_signals_are_named_after_the_query(tmp_path):
    text = compile_vhdl(NETWORK, tmp_path / "top.vhd")
    # predicates in the decoder, <query>_<DEFINE name>; fields as f_<name>
    assert "synflood_SYN <= '1' when f_flags = 0 /* 'SYN' */ and f_bytes < 100 else '0';" in text
    assert "halfopen_NOACK <= '1' when f_flags /= 2 /* 'ACK' */ else '0';" in text
    # states in the NFA cores: <label>_state before the tuple, <label>_reach after it
    assert "NOACK_reach <= (S_state or NOACK_state) and pred_NOACK;  -- NOACK" in text
    assert "SYN_3_reach <= (SYN_2_state or SYN_3_state) and pred_SYN;  -- SYN.3" in text
    assert "match <= SYN_3_reach;" in text
    # per-query signals of the top
    assert "synflood_key <= b_raw(95 downto 64);  -- src, the first lowest" in text
    assert "halfopen_partitioner : entity work.cepc_top_table_partitioner" in text


def test_awkward_names_become_distinct_vhdl_identifiers(tmp_path):
    text = compile_vhdl(AWKWARD, tmp_path / "top.vhd")
    decl = re.findall(r"^\s+signal (\w+)\s*:", text, re.M)
    # VHDL does not tell case apart: X/x, next/Next/NEXT get distinct names; reserved words are prefixed
    assert {"f_X", "f_x_1", "f_range", "f_a_b", "f_x_y", "f_time"} <= set(decl)
    assert {"next_E", "Next_1_F", "NEXT_2_G", "my_query_A"} <= set(decl)
    # conditions compared as numbers: (range > 200) = (Signal > 0)
    assert "same_H <= '1' when to_u1(f_range > 200) = to_u1(f_Signal > 0) and f_flag = to_u1(f_a_b < 0) else '0';" in text
    for name in set(re.findall(r"^\s*(?:signal|alias|entity)\s+(\w+)\s*(?::|is\b)", text, re.M)):
        assert vhdl.is_identifier(name), name


@pytest.mark.parametrize("name, ok", [("cepc_top", True), ("Top2", True), ("signal", False), ("a__b", False),
                                      ("top_", False), ("_top", False), ("2top", False)])
def test_vhdl_identifiers(name, ok):
    assert vhdl.is_identifier(name) is ok


def test_top_must_be_a_vhdl_identifier(tmp_path, capsys):
    assert main(["compile", str(MARATHON), "-o", str(tmp_path / "t.vhd"), "--top", "my__top"]) == 1
    assert re.search(r"^error: --top must be a VHDL identifier, not 'my__top'$", capsys.readouterr().err, re.M)
    assert main(["compile", str(MARATHON), "-o", str(tmp_path / "t.vhd"), "--top", "entity"]) == 1
    assert "--top must be a VHDL identifier, not 'entity'" in capsys.readouterr().err


def test_sidecar_is_the_one_written_for_verilog(tmp_path):
    args = ["--bus-width", "32", "--partitions", "5", "--evict-after", "300"]
    compile_vhdl(NETWORK, tmp_path / "top.vhd", *args)
    (tmp_path / "v").mkdir()
    assert main(["compile", str(NETWORK), "-o", str(tmp_path / "v" / "top.v"), *args]) == 0
    assert (tmp_path / "top.json").read_text() == (tmp_path / "v" / "top.json").read_text()


def test_hdl_from_the_suffix(tmp_path):
    text = compile_vhdl(MARATHON, tmp_path / "top.vhdl")
    assert text.startswith("-- Generated by cepc") and "architecture rtl of cepc_top is" in text


def test_no_hdl_text_in_the_python_of_the_back_end():
    """Templates are the only place VHDL text lives: no string in cepc/emit/vhdl.py holds VHDL syntax."""
    source = (ROOT / "cepc" / "emit" / "vhdl.py").read_text()
    tree = ast.parse(source)
    reserved = next(n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "RESERVED" for t in n.targets))
    skip = {id(n) for n in ast.walk(reserved)}
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    syntax = re.compile(r"<=|:=|\bdownto\b|\bstd_logic|\bsignal\s|\bentity\s|\bend\s|'[01]'|\bport map\b")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip | docstrings:
            assert not syntax.search(node.value), node.value


# --- partial-match registers: the core of PartialMatchCore, in VHDL --------------------------------


def test_there_are_partial_match_examples():
    names = {p.stem for p in PARTIAL_MATCH_EXAMPLES}
    assert {"mshape", "finance0", "finance2", "finance5"} <= names


@pytest.mark.parametrize("query", PARTIAL_MATCH_EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("partitioner", ["table", "pipeline"])
def test_partial_match_queries_get_a_core_with_named_registers(query, partitioner, tmp_path):
    text = compile_vhdl(query, tmp_path / "top.vhd", "--partitioner", partitioner, "--partitions", "8")
    side = json.loads((tmp_path / "top.json").read_text())
    (q,) = side["queries"]
    # the core is the partial-match template's, the state registers named after their aggregates
    assert re.search(r"^-- cepc_top_\w+_nfa: autogenerated by cepc from hdl_templates/partial_match\.vhd\.j2$",
                     text, re.M)
    assert re.search(r"^  signal \w+_count, \w+_count_new : unsigned\(\d+ downto 0\)", text, re.M) or \
        re.search(r"^  signal \w+_count_base, \w+_count_new : unsigned\(\d+ downto 0\)", text, re.M)
    # the record carries the measures: its width is the sidecar's
    assert f"m_tdata      : out std_logic_vector({side['match_record']['bits'] - 1} downto 0)" in text
    assert q.get("measures") or q.get("registers"), q
    # the overflow counter counts (no longer tied to zero)
    assert "overflow    <= std_logic_vector(overflow_count);" in text
    if "within" in q:
        assert "WITHIN => true" in text and "_next_expiry <=" in text
    else:
        assert "WITHIN => true" not in text

def test_scaled_registers_get_names_of_their_own(tmp_path):
    # MIN(v) * 3 in DEFINE is the register min_v_x3 (scale 3 in the sidecar), as is MIN of the field
    # v_x3: the VHDL names them apart; FIRST(d) * -2 is first_d_xm2, LAST(d) * -3 last_d_xm3 (signed)
    text = compile_vhdl(SCALED, tmp_path / "top.vhd", "--partitioner", "table", "--partitions", "8")
    side = json.loads((tmp_path / "top.json").read_text())
    regs = side["queries"][0]["registers"]
    assert [(r["name"], r.get("scale")) for r in regs[:3]] == [("min_v_x3", 3), ("min_v_x3", None),
                                                               ("first_d_xm2", -2)]
    last = [r for r in side["queries"][1]["registers"] if r["name"] == "last_d_xm3"]
    assert [(r["scale"], r["signed"]) for r in last] == [(-3, True)]
    assert re.search(r"^  signal A_min_v_x3\b", text, re.M) and re.search(r"^  signal A_min_v_x3_1\b", text, re.M)


@pytest.mark.parametrize("options, what", [
    (["--automaton", "dfa"], "--automaton dfa"),
    (["--no-decoder"], "--no-decoder"),
], ids=["dfa", "no-decoder"])
def test_verilog_only_options_are_refused(options, what, tmp_path, capsys):
    out = tmp_path / "top.vhd"
    assert main(["compile", str(MARATHON), "-o", str(out), *options]) == 1
    message = capsys.readouterr().err
    assert what in message and "--hdl verilog" in message
    assert not out.exists()


@pytest.mark.parametrize("query", [MARATHON, NETWORK, ROOT / "examples" / "mshape" / "mshape.sql"],
                         ids=lambda p: p.stem)
def test_the_two_cycle_update_in_the_vhdl(query, tmp_path):
    # --update-cycles 2: each table registers its lookup (UPDATE_CYCLES 2) and says whether the framer's
    # tuple shares a bucket with the tuple at stage 2 (`adjacent`), the top holds such a tuple a cycle
    # (`hold`), the payload reaches the lookup through a line of four stages (in flip-flops, not block RAM)
    # and is registered at the fifth, the record is registered twice and the stall keeps one FIFO slot
    # more: the latency of the Verilog top with the two-cycle update, in the same sidecar. As in the
    # Verilog, the data registers the update adds have no reset, only their valid flags.
    from cepc.hw.top import OUTPUT_FIFO_DEPTH, STALL_MARGIN

    one = compile_vhdl(query, tmp_path / "one.vhd", "--update-cycles", "1")
    two = compile_vhdl(query, tmp_path / "two.vhd", "--update-cycles", "2")
    side = json.loads((tmp_path / "two.json").read_text())
    assert side["options"]["update_cycles"] == 2 and side["latency_cycles"] == 13
    assert json.loads((tmp_path / "one.json").read_text())["latency_cycles"] == 11
    tables = len(re.findall(r"^  \w+_partitioner : entity work\.cepc_top_table_partitioner$", two, re.M))
    assert tables == len(side["queries"]) >= 1
    assert two.count("UPDATE_CYCLES => 2)") == tables and "UPDATE_CYCLES => 2" not in one
    assert two.count("hold => hold,") == tables and "hold" not in one[one.index("entity cepc_top is"):]
    assert "f_ready <= en and slot and not hold;" in two and "f_ready <= en and slot;" in one
    assert "constant DEPTH         : positive := 5;" in two and "constant DEPTH         : positive := 4;" in one
    assert "generic map (WIDTH => t_data'length, DEPTH => DEPTH - 1)" in two and "payload5 : process" in two
    assert "generic map (WIDTH => t_data'length, DEPTH => DEPTH)" in one and "payload5" not in one
    for data in ("p_key", "p_index", "p_state", r"\w+_record6"):
        assert not re.search(rf"^ +{data} +<= \(others => '0'\);", two, re.M), data
    assert f"STALL_MARGIN  : positive := {STALL_MARGIN + 1};" in two
    assert f"STALL_MARGIN  : positive := {STALL_MARGIN};" in one and STALL_MARGIN + 1 < OUTPUT_FIFO_DEPTH
    assert len(re.findall(r"w_data => \w+_record6, w_en => \w+_record6_valid", two)) == len(side["queries"])


@pytest.mark.parametrize("query", [MARATHON, NETWORK, ROOT / "examples" / "mshape" / "mshape.sql"],
                         ids=lambda p: p.stem)
def test_the_three_cycle_update_in_the_vhdl(query, tmp_path):
    # --update-cycles 3: each table registers its lookup twice (UPDATE_CYCLES 3) and says whether the
    # framer's tuple shares a bucket with either of the two tuples before it (`adjacent`, and `conflict`
    # at a SPACING of 2, without --hazards stall), the top takes the framer's tuple into a register stage
    # of its own (`front`), whose key the tables hash, the payload reaches the lookup through a line of
    # four stages and is registered at the fifth and the sixth, and the record is registered twice: the
    # latency of the Verilog top with the three-cycle update, in the same sidecar
    from cepc.hw.top import STALL_MARGIN

    three = compile_vhdl(query, tmp_path / "three.vhd", "--update-cycles", "3")
    side = json.loads((tmp_path / "three.json").read_text())
    assert side["options"]["update_cycles"] == 3 and side["latency_cycles"] == 15
    tables = len(re.findall(r"^  \w+_partitioner : entity work\.cepc_top_table_partitioner$", three, re.M))
    assert tables == len(side["queries"]) >= 1
    assert three.count("UPDATE_CYCLES => 3)") == tables and "constant SPACING    : positive := 2;" in three
    assert three.count("conflict => ") == three.count("hold => hold,") == tables
    assert "f_ready <= not front_valid or takes;" in three and "accept  <= front_valid and takes;" in three
    assert re.search(r"^  \w+_next_key <= front_data\(", three, re.M) and "a_raw <= front_data;" in three
    assert "constant DEPTH         : positive := 6;" in three
    assert "generic map (WIDTH => t_data'length, DEPTH => DEPTH - 2)" in three
    assert "mid_data <= line_data;" in three and "t_data <= mid_data;" in three
    for data in ("r_key", "r_index", "r_state", "p_key", "p_index", "p_state", "front_data", "mid_data"):
        assert not re.search(rf"^ +{data} +<= \(others => '0'\);", three, re.M), data
    assert f"STALL_MARGIN  : positive := {STALL_MARGIN + 1};" in three
    # with --hazards stall, the spacing of the three-cycle update's (9)
    stall = compile_vhdl(query, tmp_path / "stall.vhd", "--update-cycles", "3", "--hazards", "stall")
    assert "constant SPACING    : positive := 9;" in stall and stall.count("HAZARD_STALL => true") == tables


def test_ghdl_simulation_refuses_a_dfa_before_building(tmp_path, capsys):
    out = tmp_path / "sim.csv"
    assert main(["sim", str(MARATHON), "--events", str(MARATHON.parent / "events.csv"), "-o", str(out),
                 "--simulator", "ghdl", "--automaton", "dfa"]) == 1
    message = capsys.readouterr().err
    assert "--automaton dfa is Verilog-only" in message and "--hdl verilog" in message
    assert not out.exists()


@needs_ghdl
@pytest.mark.parametrize("query", HARDWARE_EXAMPLES + [AWKWARD], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_ghdls_netlist_declares_every_name_once(query, tmp_path):
    # `cepc synth --hdl vhdl` builds from GHDL's Verilog netlist (cepc.synth.vhdl). GHDL 2.0 names an
    # instance's port net <label>_<port> even where the VHDL has a signal of that name (the top's count of
    # malformed packets was `framer_malformed`, beside the framer's `malformed` port): the netlist then
    # declares it twice, which Verilator refuses and Yosys merges. Every example, table and pipeline.
    from cepc.hw.top import Top
    from cepc.lang.check import check
    from cepc.lang.parse import parse_file
    from cepc.nfa.lower import lower
    from cepc.synth.vhdl import declared_twice, netlist

    design = lower(check(parse_file(query)))
    for i, (partitioner, partitions) in enumerate([("table", 256), ("pipeline", 3)]):
        top = Top(design, bus_width=8, partitions=partitions, partitioner=partitioner)
        path = netlist(design, top, tmp_path / str(i), {})
        text = path.read_text()
        assert re.search(r"^module cepc_vhdl$", text, re.M) and "endmodule" in text
        assert declared_twice(text) == {}


def test_a_name_declared_twice_in_a_netlist_is_found():
    from cepc.synth.vhdl import declared_twice

    text = ("module a\n  (input clk);\n  wire x;\n  reg [3:0] y;\nendmodule\n\n"
            "module b\n  (input clk);\n  reg [47:0] m;\n  wire n;\n  wire [47:0] m;\nendmodule\n")
    assert declared_twice(text) == {"b": ["m"]}


@needs_ghdl
@pytest.mark.parametrize("query, partitions, mode", [(MARATHON, 4096, 18), (MARATHON, 65536, 1),
                                                     (ROOT / "examples" / "finance" / "finance0" / "finance0.sql", 256, 36)],
                         ids=["marathon-4096", "marathon-direct", "finance0-256"])
def test_on_ecp5_the_table_is_dp16kd_cells_read_through_their_output_registers(query, partitions, mode, tmp_path):
    # `cepc synth --hdl vhdl` on an ECP5 board: GHDL keeps each DP16KD (a component without an entity)
    # as a cell; as_cells drops the empty module GHDL writes for it and gives its string generics back
    from cepc.hw.top import Top
    from cepc.lang.check import check
    from cepc.lang.parse import parse_file
    from cepc.nfa.lower import lower
    from cepc.synth.vhdl import netlist

    design = lower(check(parse_file(query)))
    top = Top(design, bus_width=8, partitions=partitions, partitioner="table", update_cycles=2)
    text = netlist(design, top, tmp_path, {}, primitives="ecp5").read_text()
    assert "module DP16KD" not in text and "module cepc_vhdl" in text
    cells = re.findall(r"^\s*DP16KD #\((.*?)\)\s*\n\s*\w+ \(", text, re.M | re.S)
    ways, banks = (1, 4) if mode == 1 else (4, 1)
    assert len(cells) >= ways * banks and len(cells) % (ways * banks) == 0
    # each bank's way takes its read address and its write from registers of its own beside it: a
    # module each in GHDL's netlist (cepc synth keeps them apart)
    copies = re.findall(r"^\s*(cepc_vhdl_replica_\d+) \w+ \(", text, re.M)
    assert len(copies) == 2 * ways * banks and len(set(copies)) == 2, copies
    for params in cells:
        assert f".DATA_WIDTH_B(32'b{mode:032b})" in params and '.REGMODE_B("OUTREG")' in params
        assert f'.REGMODE_A("{"OUTREG" if mode == 36 else "NOREG"}")' in params and '.GSR("AUTO")' in params
    # the generic VHDL infers the same memories instead (and the design file holds no model)
    plain = vhdl.render(design, top, "cepc_top", {})
    assert "DP16KD" not in plain
    assert "entity DP16KD is" not in (tmp_path / "cepc_vhdl.vhd").read_text()
    # with the model of the block RAM, for a simulator: analysed and elaborated without a warning
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "cepc_top.vhd").write_text(vhdl.render(design, top, "cepc_top", {}, "ecp5", models=True))
    assert "entity DP16KD is" in (sim / "cepc_top.vhd").read_text()
    for step in (["-a", *GHDL_STD, *GHDL_WARNINGS, "cepc_top.vhd"], ["-e", *GHDL_STD, *GHDL_WARNINGS, "cepc_top"]):
        done = ghdl(*step, cwd=sim)
        assert done.returncode == 0 and not [m for m in done.stderr.splitlines() if m and not m.startswith(" ")], \
            done.stderr


def test_as_cells_keeps_what_is_not_a_known_primitive():
    from cepc.synth.vhdl import as_cells

    empty = "module DP16KD\n  #(parameter\n    GSR)\n  (input CLKA,\n   output DOB0);\nendmodule\n\n"
    other = "module other\n  #(parameter\n    P)\n  (input a);\nendmodule\n\n"
    cell = ("  DP16KD #(\n    .DATA_WIDTH_A(32'b00000000000000000000000000100100),\n"
            "    .GSR(32'b01000001010101010101010001001111))\n    ram (\n    .CLKA(clk));\n")
    mine = "  other #(\n    .P(16'b0100000101000001))\n    u (\n    .a(x));\n"
    text = as_cells(empty + other + "module top\n  (input clk);\n" + cell + mine + "endmodule\n")
    assert "module DP16KD" not in text and "module other" in text
    assert '.GSR("AUTO")' in text and ".DATA_WIDTH_A(32'b00000000000000000000000000100100)" in text
    assert ".P(16'b0100000101000001)" in text  # not a primitive: as GHDL wrote it
