"""bench/synth.py's table: a seed that failed (nextpnr could not place a design near the device's
limit on it) is shown as failed, not a crash that loses the other seeds' figures."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_synth", ROOT / "bench" / "synth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_failed_seed_is_listed_as_failed(monkeypatch, tmp_path):
    bench = load_bench()
    placed = {"example": "network", "board": "icebreaker", "device": "iCE40UP5K", "partitions": 2, "lut": 4975,
              "lut_percent": 94.2, "ff": 3407, "bram": 26, "carry": 540, "fmax_mhz": 40.11, "target_mhz": 50.0,
              "met": False, "tuples_per_second_at_fmax": 20055000, "tuples_per_second_uart": 15385,
              "link_fmax_mhz": 38.1, "link_clock_mhz": 12.0, "critical_path": "24.93 ns", "seconds": 300.0}
    error = "nextpnr could not place the design on iCE40UP5K with --seed 1: it is at the device's limit"

    routers = []

    def run_one(example, board, seed, build, partitions=None, router="auto", placer="heap", hdl="verilog",
                hazards="auto", fastest=False, ways=None, apart=False):
        routers.append((router, placer, hdl, hazards, fastest, ways, apart))
        if seed == 1:
            return {"example": example, "board": board, "error": error, "target_mhz": 50.0, "met": False,
                    "seconds": 90.0}
        return dict(placed)

    monkeypatch.setattr(bench, "run_one", run_one)
    row = bench.run_seeds("network", "icebreaker", [1, 3], tmp_path, router="router1", placer="static", hazards="stall",
                          fastest=True, ways=2)
    # bench/synth.py --router, --placer, --hazards, --freq-max and --ways, every seed
    assert routers == [("router1", "static", "verilog", "stall", True, 2, False)] * 2
    assert row["fmax_mhz"] == 40.11 and row["seed"] == 3 and row["seconds"] == 390.0
    assert row["fmax_by_seed"] == {"1": None, "3": 40.11} and row["errors_by_seed"] == {"1": error}
    assert "40.1 (seed 1: failed, seed 3: 40.1)" in bench.markdown([row], "1,3")
    # --jobs 2: both seeds at once, each built apart (a directory of its own); the same row
    routers.clear()
    at_once = bench.run_seeds("network", "icebreaker", [1, 3], tmp_path, router="router1", placer="static",
                              hazards="stall", fastest=True, ways=2, jobs=2)
    assert at_once == row and routers == [("router1", "static", "verilog", "stall", True, 2, True)] * 2


def test_a_row_routed_by_router2_says_so():
    # router1 is the default (--router auto) on every device: a row routed by router2 (--router router2)
    # is marked
    bench = load_bench()
    row = {"example": "mshape", "board": "ulx3s-85f", "device": "LFE5U-85F", "partitions": 1024, "lut": 15697,
           "lut_percent": 18.8, "ff": 16920, "bram": 55, "carry": 2041, "fmax_mhz": 78.28, "target_mhz": 150.0,
           "met": False, "tuples_per_second_at_fmax": 78280000, "tuples_per_second_uart": 14634,
           "link_fmax_mhz": 139.9, "link_clock_mhz": 60.0, "seconds": 2920.1, "router": "router1"}
    assert "| 78.3 |" in bench.markdown([row], "1")
    assert "| 78.3, router2 |" in bench.markdown([dict(row, router="router2")], "1")
    assert "| 78.3 |" in bench.markdown([dict(row, board="icebreaker", device="iCE40UP5K")], "1")
    # and one placed by nextpnr's static placer (--placer static) says that too
    assert "| 78.3, static placer |" in bench.markdown([dict(row, placer="static")], "1")
    assert "| 78.3, router2, static placer |" in bench.markdown([dict(row, router="router2", placer="static")], "1")


def test_the_vhdl_rows_are_ratios_of_the_verilog_ones():
    # bench/synth.py --hdl both: each example's VHDL figures beside its Verilog ones (synth-hdl.md)
    bench = load_bench()
    verilog = {"example": "marathon", "board": "ulx3s-85f", "hdl": "verilog", "partitions": 65536, "lut": 2240,
               "ff": 1823, "bram": 29, "fmax_mhz": 156.3, "critical_path": "6.40 ns"}
    vhdl = dict(verilog, hdl="vhdl", lut=2873, ff=2755, bram=33, fmax_mhz=72.58, critical_path="13.78 ns")
    text = bench.hdl_markdown([verilog, vhdl], 1)
    assert ("| marathon | ulx3s-85f | 65536 | 2,240 | 2,873 | 1.28× | 1,823 | 2,755 | 1.51× | 29 | 33 "
            "| 156.3 | 72.6 | 0.46× |") in text
    assert "* marathon on ulx3s-85f, vhdl: 13.78 ns" in text
    # a VHDL design that does not fit: its error, beside the Verilog's figures
    failed = {"example": "network", "board": "icebreaker", "hdl": "vhdl", "error": "the design does not fit"}
    text = bench.hdl_markdown([dict(verilog, example="network", board="icebreaker", lut=4755, ff=3238, bram=30,
                                    fmax_mhz=48.14, partitions=256), failed], 1)
    assert "| network | icebreaker | 256 | 4,755 | | | 3,238 | | | 30 | | 48.1 | **vhdl: the design does not fit** | |" in text


def test_the_freq_max_rows_give_every_build_and_the_clock_met():
    # bench/synth.py --freq-max (synth-freq-max.md): each build's target and Fmax, the clock it ends at
    bench = load_bench()
    row = {"example": "finance0", "board": "ulx3s-85f", "partitions": 2048, "clock_mhz": 115.0, "clock_met": True,
           "fmax_mhz": 117.2, "target_mhz": 150.0, "met": False, "tuples_per_second_at_clock": 115000000,
           "seconds": 812.5, "freq_builds": [{"target_mhz": 150.0, "achieved_mhz": 118.83, "met": False},
                                             {"target_mhz": 115.0, "achieved_mhz": 117.2, "met": True}]}
    text = bench.freq_max_markdown([row], 1)
    assert ("| finance0 | ulx3s-85f | 2048 | 150 → 118.8, 115 → 117.2 | 115 | yes | 115,000,000 | 150: **missed** "
            "| 812.5 |") in text
    failed = {"example": "finance0", "board": "icebreaker", "error": "the design does not fit", "target_mhz": 50.0,
              "seconds": 0.4}
    assert "| finance0 | icebreaker | | **no**: the design does not fit | | | | 50 | 0.4 |" in bench.freq_max_markdown([failed], 1)


def test_running_the_benchmark_again_keeps_the_log_of_rounds(monkeypatch, tmp_path):
    # bench/synth.py rewrites synth.md and synth.json; the log of the timing work behind them
    # (synth-rounds.md, written by hand) is a file it never writes, and synth.md links to it
    bench = load_bench()
    out = tmp_path / "results"
    out.mkdir()
    log = "# Synthesis: the rounds of timing work\n\n## This round: measured by hand\n"
    (out / bench.ROUNDS).write_text(log)
    (out / "synth.md").write_text("# Synthesis\n\n(an older table)\n")
    row = {"example": "marathon", "board": "icebreaker", "device": "iCE40UP5K", "partitions": 4096, "lut": 3203,
           "lut_percent": 60.7, "ff": 2254, "bram": 30, "carry": 310, "fmax_mhz": 52.8, "target_mhz": 50.0,
           "met": True, "tuples_per_second_at_fmax": 52800000, "tuples_per_second_uart": 22500,
           "link_fmax_mhz": 44.0, "link_clock_mhz": 12.0, "critical_path": "18.92 ns", "seconds": 22.5}
    monkeypatch.setattr(bench, "run_seeds", lambda *args, **kwargs: dict(row))
    monkeypatch.setattr("sys.argv", ["synth.py", "--boards", "icebreaker", "--examples", "marathon",
                                     "--build", str(tmp_path / "build"), "--out", str(out)])
    assert bench.main() == 0
    assert (out / bench.ROUNDS).read_text() == log
    table = (out / "synth.md").read_text()
    assert "| marathon | icebreaker (iCE40UP5K) |" in table and "(an older table)" not in table
    assert f"]({bench.ROUNDS})" in table
    # and the repository's own: the table links to the log, which is there
    results = ROOT / "bench" / "results"
    assert f"]({bench.ROUNDS})" in (results / "synth.md").read_text()
    assert (results / bench.ROUNDS).read_text().startswith("# Synthesis: the rounds of timing work")


def test_a_size_asked_for_writes_rows_of_their_own(monkeypatch, tmp_path):
    # bench/synth.py --partitions N --ways W: every row at that size, passed to the flow, in synth-sized.md and
    # .json beside the default table (auto's size), which it leaves as it is
    bench = load_bench()
    out = tmp_path / "results"
    out.mkdir()
    (out / "synth.md").write_text("# Synthesis\n\n(auto's table)\n")
    row = {"example": "mshape", "board": "ulx3s-85f", "device": "LFE5U-85F", "partitions": 1024, "ways": 2,
           "lut": 8912, "lut_percent": 10.7, "ff": 14804, "bram": 47, "carry": 719, "fmax_mhz": 142.69,
           "target_mhz": 150.0, "met": False, "tuples_per_second_at_fmax": 142690000, "tuples_per_second_uart": 14634,
           "link_fmax_mhz": 151.9, "link_clock_mhz": 60.0, "critical_path": "7.01 ns", "seconds": 304.0}
    asked = []

    def run_seeds(example, board, seeds, build, partitions, router, placer, hdl, hazards, fastest, ways, jobs=1):
        asked.append((partitions, ways))
        return dict(row)

    monkeypatch.setattr(bench, "run_seeds", run_seeds)
    monkeypatch.setattr("sys.argv", ["synth.py", "--boards", "ulx3s-85f", "--examples", "mshape", "--partitions",
                                     "1024", "--ways", "2", "--build", str(tmp_path / "build"), "--out", str(out)])
    assert bench.main() == 1  # (142.7 MHz misses 150)
    assert asked == [(1024, 2)]
    assert (out / "synth.md").read_text() == "# Synthesis\n\n(auto's table)\n"
    table = (out / "synth-sized.md").read_text()
    assert "| mshape | ulx3s-85f (LFE5U-85F) | 1024 (2-way) | 8,912 (11%) |" in table
    assert "at the size `--partitions 1024 --ways 2` asks for" in table
    assert "synth-sized.md and .json" in table and "this file and synth.json" not in table
    assert (out / "synth-sized.json").exists() and not (out / "synth.json").exists()
    # a row of auto's size names no ways
    assert "| mshape | ulx3s-85f (LFE5U-85F) | 1024 | 8,912" in bench.markdown([{**row, "ways": None}], "1")
