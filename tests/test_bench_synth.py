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

    def run_one(example, board, seed, build, partitions=None):
        if seed == 1:
            return {"example": example, "board": board, "error": error, "target_mhz": 50.0, "met": False,
                    "seconds": 90.0}
        return dict(placed)

    monkeypatch.setattr(bench, "run_one", run_one)
    row = bench.run_seeds("network", "icebreaker", [1, 3], tmp_path)
    assert row["fmax_mhz"] == 40.11 and row["seed"] == 3 and row["seconds"] == 390.0
    assert row["fmax_by_seed"] == {"1": None, "3": 40.11} and row["errors_by_seed"] == {"1": error}
    assert "40.1 (seed 1: failed, seed 3: 40.1)" in bench.markdown([row], "1,3")
