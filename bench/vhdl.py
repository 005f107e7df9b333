"""VHDL back end: simulation speed of the VHDL on GHDL beside the Verilog on Verilator.

Both run under the same cocotb bench (``cepc sim``: cocotbext-axi drives ``s_t*`` and takes
``m_t*``/``spill_t*``), on the same generated events; the match rows of the two must be
identical and equal to the reference matcher's (a differential check on the way). Reported per
case: build time, simulation wall time (builds excluded), tuples and clock cycles per
wall-second, and GHDL's rate as a fraction of Verilator's. GHDL runs with Debian's default
code generator (mcode) and, when the ``ghdl-llvm`` package is installed, with LLVM too
(``GHDL_BACKEND=llvm``).

Writes bench/results/vhdl.json and vhdl.md. Run: ``make bench-vhdl``.
"""

from __future__ import annotations

import json
import os
import shutil
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
BUILD = ROOT / "build" / "sim"  # shared with the tests: a design they built is not built again

# (name, query, events, keys, options)
CASES = [
    ("marathon, table (auto: 65,536 partitions, direct-indexed)", "examples/marathon/marathon.sql", 20_000, 50, {}),
    ("marathon, pipeline, 64 partitions", "examples/marathon/marathon.sql", 20_000, 50,
     {"partitioner": "pipeline", "partitions": 64}),
    ("network (2 queries), table (auto: hashed), 512-bit bus, stalls and backpressure",
     "examples/network/network.sql", 20_000, 50, {"bus_width": 512, "stall": 0.1, "backpressure": 0.2}),
    # partial-match registers: aggregates in DEFINE and MEASURES; WITHIN with its expiry
    ("mshape (aggregates, MEASURES), table (auto: hashed)", "examples/mshape/mshape.sql", 20_000, 50, {}),
    ("finance2 (WITHIN, MEASURES), pipeline, 16 partitions", "examples/finance/finance2/finance2.sql", 20_000, 16,
     {"partitioner": "pipeline", "partitions": 16}),
]
# (label, simulator, GHDL back end)
SIMULATORS = [("verilator", "verilator", None), ("ghdl", "ghdl", "mcode")]
if shutil.which("ghdl-llvm"):
    SIMULATORS.append(("ghdl_llvm", "ghdl", "llvm"))


def versions() -> dict:
    from importlib.metadata import version

    ghdl = subprocess.run(["ghdl", "--version"], capture_output=True, text=True).stdout.splitlines()
    return {"ghdl": ghdl[0] if ghdl else "?", "verilator": version("verilator"), "cocotb": version("cocotb")}


def bench_case(name: str, query: str, n: int, keys: int, options: dict) -> dict:
    checked = check(parse_file(ROOT / query))
    frame = generate(checked, n, keys, seed=3)
    want = events.match_rows(checked, frame, reference.Matcher(checked).run(frame))
    runs = {}
    for label, simulator, backend in SIMULATORS:
        if backend:
            os.environ["GHDL_BACKEND"] = backend  # Debian's ghdl runs this code generator
        result = simulate(checked, frame, SimOptions(simulator=simulator, build_root=BUILD, **options))
        assert result.counters["dropped"] == 0, f"{name}: the partitioner was too small"
        assert result.rows == want, f"{name}: {label} disagrees with the reference"
        runs[label] = {"build_seconds": round(result.build_seconds, 1), "seconds": round(result.seconds, 2),
                       "tuples_per_s": round(n / result.seconds), "cycles": result.cycles,
                       "cycles_per_s": round(result.cycles / result.seconds)}
    os.environ.pop("GHDL_BACKEND", None)
    ratios = {f"{label}_vs_verilator": round(runs[label]["tuples_per_s"] / runs["verilator"]["tuples_per_s"], 2)
              for label in runs if label != "verilator"}
    return {"case": name, "query": query, "tuples": n, "keys": keys, "matches": len(want), "options": options,
            **runs, **ratios}


def main() -> None:
    rows = []
    for case in CASES:  # the results files are rewritten after every case: an interrupted run keeps what it has
        rows.append(bench_case(*case))
        write(rows)


def write(rows: list[dict]) -> None:
    result = {"machine": {"cpu_count": os.cpu_count()}, "versions": versions(), "cases": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "vhdl.json").write_text(json.dumps(result, indent=2) + "\n")
    v = result["versions"]
    labels = [label for label, _, _ in SIMULATORS]
    names = {"verilator": "Verilator", "ghdl": "GHDL (mcode)", "ghdl_llvm": "GHDL (LLVM)"}
    lines = ["# VHDL back end: GHDL vs Verilator", "",
             f"The same cocotb bench (`cepc sim`) on the Verilog in Verilator {v['verilator']} "
             f"and on the VHDL in {v['ghdl']} "
             f"(cocotb {v['cocotb']}), {os.cpu_count()} cores shared with other jobs (so expect ±30 % between runs). "
             "Generated events; in every case all the match files are identical to each other and to the reference "
             "matcher's. Simulation time excludes the builds; rates are tuples (and clock cycles) per wall-second.",
             "",
             "| case | tuples | matches | " + " | ".join(f"{names[x]} build s | {names[x]} tuples/s (cycles/s)"
                                                     for x in labels)
             + " | " + " | ".join(f"{names[x]} / Verilator" for x in labels[1:]) + " |",
             "|---|---:|---:|" + "---:|---:|" * len(labels) + "---:|" * (len(labels) - 1)]
    for r in rows:
        cells = [f"{r[x]['build_seconds']} | {r[x]['tuples_per_s']:,} ({r[x]['cycles_per_s']:,})" for x in labels]
        ratios = [f"{r[f'{x}_vs_verilator']}×" for x in labels[1:]]
        lines.append(f"| {r['case']} | {r['tuples']:,} | {r['matches']:,} | " + " | ".join(cells) + " | "
                     + " | ".join(ratios) + " |")
    lines.append("")
    (RESULTS / "vhdl.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
