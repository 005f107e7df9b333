"""Verification-flow benchmarks: golden model on Spark, and simulation speed.

* ``cepc golden`` events/second on generated marathon events (1M and, with
  ``--large``, 10M) on this machine's cores, beside the in-process reference
  matcher on the same events, Hirzel's 830,000 events/s (DEBS 2012, C++, 8
  cores) and the 85,000 events/s of a naive ``applyInPandas`` loop;
* simulated tuples per wall-second under cocotb + Verilator (``cepc sim``).

Writes bench/results/verification.json and verification.md.
Run: ``make bench-verification`` (add ``ARGS=--large`` for 10M events).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from cepc import events
from cepc.gen import generate, write_events
from cepc.golden import spark as golden
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa import reference
from cepc.simulate import SimOptions, simulate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
QUERY = ROOT / "examples" / "marathon" / "marathon.sql"
HIRZEL = 830_000
NAIVE = 85_000


def bench_golden(checked, n: int, keys: int, work: Path) -> dict:
    path = work / f"events_{n}.parquet"
    frame = generate(checked, n, keys, seed=1)
    write_events(frame, path)
    t0 = time.perf_counter()
    ref = reference.Matcher(checked).run(frame)
    ref_s = time.perf_counter() - t0
    golden.session()  # start Spark outside the measurement
    stats = golden.golden(checked, path, work / "golden.csv")
    rate = n / stats.seconds
    return {"events": n, "keys": keys, "matches": stats.matches, "reference_matches": len(ref),
            "golden_seconds": round(stats.seconds, 2), "golden_events_per_s": round(rate),
            "reference_events_per_s": round(n / ref_s), "vs_hirzel": round(rate / HIRZEL, 3),
            "vs_naive_apply_in_pandas": round(rate / NAIVE, 2)}


def bench_sim(checked, n: int, work: Path) -> dict:
    frame = generate(checked, n, 50, seed=2)
    result = simulate(checked, frame, SimOptions(partitions=64, build_root=ROOT / "build" / "sim"))
    want = events.match_rows(checked, frame, reference.Matcher(checked).run(frame))
    assert result.rows == want, "simulation disagrees with the reference"
    return {"tuples": n, "seconds": round(result.seconds, 2), "tuples_per_s": round(n / result.seconds),
            "build_seconds": round(result.build_seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also 10M events")
    args = ap.parse_args()
    checked = check(parse_file(QUERY))
    sizes = [1_000_000] + ([10_000_000] if args.large else [])
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        runs = [bench_golden(checked, n, 1000, work) for n in sizes]
        sim = bench_sim(checked, 20_000, work)
    result = {"machine": {"cpu_count": os.cpu_count()}, "golden": runs, "simulation": sim}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verification.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Verification flow", "",
             f"Golden model (`cepc golden`, Spark local[*], {os.cpu_count()} cores), marathon query, 1000 keys, "
             "Spark start-up excluded:", "",
             "| events | matches | golden s | golden ev/s | reference ev/s (1 core) | Hirzel C++ 8 cores "
             "| golden / Hirzel | golden / naive applyInPandas |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['events']:,} | {r['matches']:,} | {r['golden_seconds']} | {r['golden_events_per_s']:,} "
                     f"| {r['reference_events_per_s']:,} | {HIRZEL:,} | {r['vs_hirzel']}× "
                     f"| {r['vs_naive_apply_in_pandas']}× |")
    lines += ["", f"Simulation (`cepc sim`, Verilator + cocotb + cocotbext-axi): {sim['tuples']:,} tuples in "
                  f"{sim['seconds']} s = {sim['tuples_per_s']:,} tuples/s (build {sim['build_seconds']} s).", ""]
    (RESULTS / "verification.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
