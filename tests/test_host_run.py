"""`cepc run`, the real host tool, against the board's host link in Verilator behind a pty.

The simulated board is what a bitstream runs (cepc.hw.hostlink.HostLink: UART,
frame checks, receive buffer, compiled query), less its PLL and pins; the
cocotb bench (sim/cepc_link_bench.py) moves the UART bits between the pins
and a pseudo-terminal, which `cepc run --port` opens as a serial port.
Slow: each design is a Verilator build (cached under build/sim/).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from cepc.cli import main
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.simulate import LinkSimulation

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
BUILD = ROOT / "build" / "sim"
# the simulation runs far slower than a real UART: generous timeouts, 3 tuples per frame
RUN = ["--timeout", "120", "--retry", "5", "--frame-bytes", "40"]


def read(path: Path) -> list[list[str]]:
    with open(path, newline="") as fh:
        return list(csv.reader(fh))


def run(query: Path, port: str, out: Path, *extra: str) -> int:
    return main(["run", str(query), "--port", port, "--events", str(query.parent / "events.csv"), "-o", str(out),
                 *RUN, *extra])


# held: records cross to the link where the design's FIFOs hold them, as on an iCE40; vhdl: the
# design is the VHDL back end's as `cepc synth --hdl vhdl` builds it (GHDL's netlist of it)
@pytest.mark.parametrize("example,held,hdl", [("marathon/marathon.sql", False, "verilog"),
                                              ("network/network.sql", False, "verilog"),
                                              ("network/network.sql", True, "verilog"),
                                              ("network/network.sql", False, "vhdl")])
def test_run_streams_the_example_through_the_board(example, held, hdl, tmp_path, capsys):
    query = ROOT / "examples" / example
    sim = LinkSimulation(check(parse_file(query)), build_root=BUILD, held=held, hdl=hdl)
    with sim as port:
        assert run(query, port, tmp_path / "out.csv", "--compare", str(query.parent / "expected.csv")) == 0
    # the vhdl case's design is GHDL's netlist, which the link instantiates in place of Amaranth's top
    instantiated = re.search(r"^\s*cepc_vhdl\s+\S+\s*\(", sim.sources[0].read_text(), re.M) is not None
    assert instantiated == (hdl == "vhdl")
    assert [p.name for p in sim.sources[1:]] == (["cepc_vhdl.v"] if hdl == "vhdl" else [])
    assert read(tmp_path / "out.csv") == read(query.parent / "expected.csv")
    err = capsys.readouterr().err
    assert "identical to" in err
    assert re.search(r"board: tuples_in \d+, matches_out \d+, dropped 0, malformed 0", err)
    assert re.search(r"rx_crc_errors 0, rx_rejected 0", err) and "0 sent again" in err


def test_run_through_a_pipeline_of_one_element_taking_a_tuple_every_three_cycles(tmp_path, capsys):
    # mshape as `cepc synth` builds it for the iCEBreaker: Woods' pipeline of one element, a tuple every
    # three cycles, its conditions' compares in slices registered a cycle before their join (the Verilog
    # in Verilator, behind the host link, as on an iCE40). One symbol, so that one element holds it all:
    # 240 trades whose price rises and falls, against the reference matcher's matches (`cepc match`)
    import random

    query = ROOT / "examples" / "mshape" / "mshape.sql"
    rng = random.Random(3)
    price, lines = 40000, ["time,symbol,price,volume"]
    for i in range(240):
        price = max(1, price + rng.choice([-60, -15, 10, 20, 70, 90, 120]) - (300 if i % 9 == 8 else 0))
        lines.append(f"{1000 * i},IBM,{price},{rng.choice([1000, 6000])}")
    events, expected = tmp_path / "events.csv", tmp_path / "expected.csv"
    events.write_text("\n".join(lines) + "\n")
    assert main(["match", str(query), "--events", str(events), "-o", str(expected)]) == 0
    assert len(read(expected)) > 5
    with LinkSimulation(check(parse_file(query)), build_root=BUILD, held=True, partitions=1, slot_period=3) as port:
        assert main(["run", str(query), "--port", port, "--events", str(events), "-o", str(tmp_path / "out.csv"),
                     *RUN, "--compare", str(expected)]) == 0
    assert read(tmp_path / "out.csv") == read(expected)
    assert re.search(r"board: tuples_in 240, matches_out \d+, dropped 0, malformed 0", capsys.readouterr().err)


def test_line_noise_into_the_board_is_detected_and_sent_again(tmp_path, capsys):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    # every 151st byte the host sends has a bit flipped: about one frame in three is corrupt
    with LinkSimulation(check(parse_file(query)), build_root=BUILD, corrupt_in_every=151) as port:
        assert run(query, port, tmp_path / "out.csv", "--compare", str(query.parent / "expected.csv")) == 0
    err = capsys.readouterr().err
    crc_errors = int(re.search(r"rx_crc_errors (\d+)", err).group(1))
    resent = int(re.search(r"(\d+) sent again", err).group(1))
    assert crc_errors >= 1 and resent >= 1
    assert read(tmp_path / "out.csv") == read(query.parent / "expected.csv")


def test_a_board_built_from_another_query_is_refused(tmp_path, capsys):
    board_query = ROOT / "examples" / "marathon" / "marathon.sql"
    other = ROOT / "examples" / "network" / "network.sql"
    with LinkSimulation(check(parse_file(board_query)), build_root=BUILD) as port:
        assert run(other, port, tmp_path / "out.csv") == 1
    assert re.search(r"^error: the board runs another design \(id [0-9a-f]{8}; this query compiles to [0-9a-f]{8}\): "
                     r"synthesise this query for the board \(cepc synth\) and load it$", capsys.readouterr().err, re.M)


def test_no_board_on_the_port_is_a_clear_error(tmp_path, capsys):
    query = ROOT / "examples" / "marathon" / "marathon.sql"
    assert main(["run", str(query), "--port", str(tmp_path / "ttyNONE"), "--events", str(query.parent / "events.csv"),
                 "-o", str(tmp_path / "o.csv")]) == 1
    assert capsys.readouterr().err.startswith(f"error: cannot open {tmp_path / 'ttyNONE'}: ")
