"""Hardware compile benchmarks: compile time, emitted Verilog size, latency.

For every example that hardware supports and for patterns of 10 … 1000
predicates: seconds from query file to Verilog (parse, check, NFA, Amaranth
elaboration, Yosys), Verilog bytes, NFA states, and the tuple-to-record latency
in cycles (datapath + partitioner depth). Goal: < 2 s for 200 predicates.

Writes bench/results/hardware.json and hardware.md. Run: ``make bench-hardware``.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from cepc.emit import verilog
from cepc.hw.top import Top, latency
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa.lower import lower

from foundation import pattern_query

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
COMPILE_GOAL_S = 2.0


def compile_once(checked_source, name: str, partitions: int, bus_width: int = 64) -> dict:
    t0 = time.perf_counter()
    checked = check(checked_source())
    design = lower(checked)
    top = Top(design, bus_width=bus_width, partitions=partitions)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "top.v"
        verilog.emit(design, top, out, "verilog", "cepc_top", {"bus_width": bus_width, "partitions": partitions})
        size = out.stat().st_size
    seconds = time.perf_counter() - t0
    return {"design": name, "partitions": partitions, "bus_width": bus_width,
            "states": sum(q.nfa.n_states for q in design.queries),
            "predicates": sum(len(q.predicates) for q in design.queries),
            "compile_s": round(seconds, 3), "verilog_bytes": size,
            "latency_cycles": latency(design, partitions),
            "datapath_latency_cycles": latency(design, partitions) - (partitions if top.pipelined else 1)}


def main() -> None:
    rows = []
    for path in sorted((ROOT / "examples").rglob("*.sql")):
        text = path.read_text().upper()
        if "MEASURES" in text or "WITHIN" in text:
            continue  # aggregates and windows arrive in hardware with their issue
        rows.append(compile_once(lambda p=path: parse_file(p), path.relative_to(ROOT).as_posix(), 16))
    for n in (10, 50, 200, 1000):
        text = pattern_query(n)
        rows.append(compile_once(lambda t=text: parse(t), f"{n}-predicate pattern", 16))
    result = {"goal_compile_s_at_200_predicates": COMPILE_GOAL_S, "compiles": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hardware.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Compile to Verilog", "",
             f"Query file → flat Verilog (parse, check, NFA, Amaranth, Yosys); 16 partitions, 64-bit bus. "
             f"Goal: < {COMPILE_GOAL_S} s at 200 predicates.", "",
             "| design | predicates | NFA states | compile s | Verilog KiB | latency (cycles) | datapath latency |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['design']} | {r['predicates']} | {r['states']} | {r['compile_s']} | "
                     f"{r['verilog_bytes'] / 1024:.0f} | {r['latency_cycles']} | {r['datapath_latency_cycles']} |")
    (RESULTS / "hardware.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
