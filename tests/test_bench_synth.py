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

    def run_one(example, board, seed, build, partitions=None, router="auto", placer="heap"):
        routers.append((router, placer))
        if seed == 1:
            return {"example": example, "board": board, "error": error, "target_mhz": 50.0, "met": False,
                    "seconds": 90.0}
        return dict(placed)

    monkeypatch.setattr(bench, "run_one", run_one)
    row = bench.run_seeds("network", "icebreaker", [1, 3], tmp_path, router="router1", placer="static")
    assert routers == [("router1", "static")] * 2  # bench/synth.py --router and --placer, for every seed
    assert row["fmax_mhz"] == 40.11 and row["seed"] == 3 and row["seconds"] == 390.0
    assert row["fmax_by_seed"] == {"1": None, "3": 40.11} and row["errors_by_seed"] == {"1": error}
    assert "40.1 (seed 1: failed, seed 3: 40.1)" in bench.markdown([row], "1,3")


def test_a_row_routed_by_router1_on_ecp5_says_so():
    # router2 is the ECP5's first router: a row routed by router1 (--router router1, or after router2
    # congested) is marked; on the iCE40 router1 is the only router and goes unmarked
    bench = load_bench()
    row = {"example": "mshape", "board": "ulx3s-85f", "device": "LFE5U-85F", "partitions": 1024, "lut": 15697,
           "lut_percent": 18.8, "ff": 16920, "bram": 55, "carry": 2041, "fmax_mhz": 78.28, "target_mhz": 150.0,
           "met": False, "tuples_per_second_at_fmax": 78280000, "tuples_per_second_uart": 14634,
           "link_fmax_mhz": 139.9, "link_clock_mhz": 60.0, "seconds": 2920.1, "router": "router1"}
    assert "| 78.3, router1 |" in bench.markdown([row], "1")
    assert "| 78.3 |" in bench.markdown([dict(row, router="router2")], "1")
    assert "| 78.3, router1 |" in bench.markdown([dict(row, board="colorlight-5a-75b", device="LFE5U-25F")], "1")
    assert "| 78.3 |" in bench.markdown([dict(row, board="icebreaker", device="iCE40UP5K")], "1")
    # and one placed by nextpnr's static placer (--placer static) says that too
    assert "| 78.3, router1, static placer |" in bench.markdown([dict(row, placer="static")], "1")
    assert "| 78.3, router1 |" in bench.markdown([dict(row, placer="heap")], "1")
