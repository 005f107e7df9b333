"""VHDL back end: simulation speed of the VHDL on GHDL beside the Verilog on Verilator.

Both run under the same cocotb bench (``cepc sim``: cocotbext-axi drives ``s_t*`` and takes
``m_t*``/``spill_t*``), on the same generated events; the match rows of the two must be
identical and equal to the reference matcher's (a differential check on the way). Reported per
case: build time, simulation wall time (builds excluded), tuples and clock cycles per
wall-second, and GHDL's rate as a fraction of Verilator's.

Writes bench/results/vhdl.json and vhdl.md. Run: ``make bench-vhdl``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from cepc import events
from cepc.gen import generate
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa import reference
from cepc.simulate import SimOptions, simulate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BUILD = ROOT / "build" / "bench-vhdl"

# (name, query, events, keys, options)
CASES = [
    ("marathon, 64 partitions", "examples/marathon/marathon.sql", 20_000, 50, {"partitions": 64}),
    ("marathon, 256 partitions", "examples/marathon/marathon.sql", 20_000, 200, {"partitions": 256}),
    ("network (2 queries), 512-bit bus, stalls and backpressure", "examples/network/network.sql", 20_000, 50,
     {"partitions": 64, "bus_width": 512, "stall": 0.1, "backpressure": 0.2}),
]
SIMULATORS = ("verilator", "ghdl")


def versions() -> dict:
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            return "?"

    from cepc import tools

    exe, env = tools.verilator()
    import cocotb

    return {"ghdl": first_line(["ghdl", "--version"]),
            "verilator": subprocess.run([exe, "--version"], capture_output=True, text=True, env=env).stdout.strip(),
            "cocotb": cocotb.__version__}


def bench_case(name: str, query: str, n: int, keys: int, options: dict) -> dict:
    checked = check(parse_file(ROOT / query))
    frame = generate(checked, n, keys, seed=3)
    want = events.match_rows(checked, frame, reference.Matcher(checked).run(frame))
    runs = {}
    for simulator in SIMULATORS:
        result = simulate(checked, frame, SimOptions(simulator=simulator, build_root=BUILD, **options))
        assert result.counters["dropped"] == 0, f"{name}: the partitioner was too small"
        assert result.rows == want, f"{name}: {simulator} disagrees with the reference"
        runs[simulator] = {"build_seconds": round(result.build_seconds, 1), "seconds": round(result.seconds, 2),
                           "tuples_per_s": round(n / result.seconds), "cycles": result.cycles,
                           "cycles_per_s": round(result.cycles / result.seconds)}
    return {"case": name, "query": query, "tuples": n, "keys": keys, "matches": len(want), "options": options,
            **runs, "ghdl_vs_verilator": round(runs["ghdl"]["tuples_per_s"] / runs["verilator"]["tuples_per_s"], 2)}


def main() -> None:
    rows = [bench_case(*case) for case in CASES]
    result = {"machine": {"cpu_count": os.cpu_count()}, "versions": versions(), "cases": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vhdl.json").write_text(json.dumps(result, indent=2) + "\n")
    v = result["versions"]
    lines = ["# VHDL back end: GHDL vs Verilator", "",
             f"The same cocotb bench (`cepc sim`) on the VHDL in {v['ghdl']} and on the Verilog in Verilator "
             f"{v['verilator'].split()[1] if v['verilator'] else '?'} (cocotb {v['cocotb']}), "
             f"{os.cpu_count()} cores shared with other jobs. Generated events; in every case the two match files "
             "are identical and equal to the reference matcher's. Simulation time excludes the builds.", "",
             "| case | tuples | matches | Verilator build s | Verilator tuples/s | Verilator cycles/s "
             "| GHDL build s | GHDL tuples/s | GHDL cycles/s | GHDL / Verilator |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ver, gh = r["verilator"], r["ghdl"]
        lines.append(f"| {r['case']} | {r['tuples']:,} | {r['matches']:,} | {ver['build_seconds']} "
                     f"| {ver['tuples_per_s']:,} | {ver['cycles_per_s']:,} | {gh['build_seconds']} "
                     f"| {gh['tuples_per_s']:,} | {gh['cycles_per_s']:,} | {r['ghdl_vs_verilator']}× |")
    lines.append("")
    (RESULTS / "vhdl.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
