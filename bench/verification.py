"""Verification-flow benchmarks: the golden model on Spark, and simulation speed.

* ``cepc golden`` events/second on generated marathon events, 1M and (with
  ``--large``) 10M over 1000 runners, on this machine's cores:
  - *command*: the wall time of one ``cepc golden`` process, JVM start-up,
    class loading, JIT and Python workers included (what a user waits for);
  - *warm*: the best of three runs in one Spark session (what a test suite
    or a notebook that reuses its session sees);
  beside the in-process engines on the same events (the reference matcher and
  the lock-step DFA the Spark tasks run, one core each), Hirzel's 830,000
  events/s (DEBS 2012, C++, 8 cores) and the 85,000 events/s of a naive
  ``applyInPandas`` loop;
* simulated tuples per wall-second under cocotb + Verilator (``cepc sim``),
  with the clock cycles the design took;
* with ``--make-sim``, the wall time of the whole ``make sim`` regression.

Writes bench/results/verification.json and verification.md.
Run: ``make bench-verification`` (``ARGS="--large --make-sim"`` for everything).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cepc import events
from cepc.gen import generate, write_events
from cepc.golden import spark as golden
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa import dfa, reference
from cepc.simulate import SimOptions, simulate

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
QUERY = ROOT / "examples" / "marathon" / "marathon.sql"
HIRZEL = 830_000
NAIVE = 85_000


def in_process(checked, frame) -> tuple[float, float, int]:
    """Events/second of the reference matcher and of the fast engine, one core; match count."""
    t0 = time.perf_counter()
    ref = reference.Matcher(checked).run(frame)
    t1 = time.perf_counter()
    qm = reference.QueryMatcher(checked, 0)
    group = events.group_codes(frame, qm.query.partition_by)
    fast = dfa.FastMatcher(qm).match(frame, group, events.grouped_order(group))
    t2 = time.perf_counter()
    assert [int(r) for r in fast] == [m.row for m in ref], "fast engine and reference disagree"
    return len(frame) / (t1 - t0), len(frame) / (t2 - t1), len(ref)


def bench_golden(checked, sizes: list[int], keys: int, work: Path) -> list[dict]:
    paths, runs = {}, []
    for n in sizes:
        paths[n] = work / f"events_{n}.parquet"
        frame = generate(checked, n, keys, seed=1)
        write_events(frame, paths[n])
        ref_rate, fast_rate, matches = in_process(checked, frame)
        runs.append({"events": n, "keys": keys, "reference_matches": matches,
                     "reference_events_per_s": round(ref_rate), "fast_engine_events_per_s": round(fast_rate)})
        del frame
    for r in runs:  # each command starts its own JVM, before this process starts one
        n = r["events"]
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cepc.cli", "golden", str(QUERY), "--events", str(paths[n]),
                        "-o", str(work / f"command_{n}.csv")], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        r["command_s"] = round(time.perf_counter() - t0, 2)
    golden.session()
    for r in runs:
        n = r["events"]
        best = None
        for _ in range(3):
            stats = golden.golden(checked, paths[n], work / "golden.csv")
            assert stats.matches == r["reference_matches"], "golden and reference disagree"
            best = stats if best is None or stats.seconds < best.seconds else best
        assert (work / "golden.csv").read_bytes() == (work / f"command_{n}.csv").read_bytes()
        r.update({"matches": best.matches, "warm_s": round(best.seconds, 2),
                  "phases_warm_s": {k: round(v, 2) for k, v in best.phases.items()},
                  "command_events_per_s": round(n / r["command_s"]), "warm_events_per_s": round(n / best.seconds),
                  "warm_vs_hirzel": round(n / best.seconds / HIRZEL, 2),
                  "command_vs_hirzel": round(n / r["command_s"] / HIRZEL, 2),
                  "warm_vs_naive_apply_in_pandas": round(n / best.seconds / NAIVE, 1)})
    return runs


def bench_sim(checked, n: int) -> dict:
    frame = generate(checked, n, 50, seed=2)
    out = {"tuples": n}
    for name, stall, bp in (("free", 0.0, 0.0), ("stalls_backpressure", 0.1, 0.3)):
        result = simulate(checked, frame, SimOptions(partitions=64, stall=stall, backpressure=bp,
                                                     build_root=ROOT / "build" / "sim"))
        out[name] = {"seconds": round(result.seconds, 2), "tuples_per_s": round(n / result.seconds),
                     "cycles": result.input_cycles, "cycles_per_s": round(result.input_cycles / result.seconds),
                     "tuples_per_cycle": round(n / result.input_cycles, 3),
                     "build_seconds": round(result.build_seconds, 1)}
    assert result.rows == events.match_rows(checked, frame, reference.Matcher(checked).run(frame)), \
        "simulation disagrees with the reference"
    return out


def time_make_sim() -> float:
    t0 = time.perf_counter()
    subprocess.run(["make", "sim"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="also 10M events")
    ap.add_argument("--make-sim", action="store_true", help="also time the whole `make sim` regression")
    args = ap.parse_args()
    checked = check(parse_file(QUERY))
    sizes = [1_000_000] + ([10_000_000] if args.large else [])
    with tempfile.TemporaryDirectory() as d:
        runs = bench_golden(checked, sizes, 1000, Path(d))
    sim = bench_sim(checked, 20_000)
    make_sim = round(time_make_sim(), 1) if args.make_sim else None
    load = os.getloadavg()[0]
    result = {"machine": {"cpu_count": os.cpu_count(), "load_before_sim": round(load, 2),
                          "python": sys.version.split()[0]},
              "golden": runs, "simulation": sim, "make_sim_seconds": make_sim}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verification.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Verification flow", "",
             f"Golden model (`cepc golden`, Spark local[*], {os.cpu_count()} cores), marathon query, 1000 runners, "
             "Parquet events. *Command*: one `cepc golden` process, JVM start-up included; *warm*: the best of "
             "three jobs in one Spark session. In-process engines: one core, no Spark.", "",
             "| events | matches | command s | warm s | command ev/s | warm ev/s | warm / Hirzel (830k, C++, 8 cores) "
             "| warm / naive applyInPandas (85k) | reference ev/s | fast engine ev/s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['events']:,} | {r['matches']:,} | {r['command_s']} | {r['warm_s']} "
                     f"| {r['command_events_per_s']:,} | {r['warm_events_per_s']:,} | {r['warm_vs_hirzel']}× "
                     f"| {r['warm_vs_naive_apply_in_pandas']}× | {r['reference_events_per_s']:,} "
                     f"| {r['fast_engine_events_per_s']:,} |")
    last = runs[-1]["phases_warm_s"]
    lines += ["", f"Warm phases at {runs[-1]['events']:,} events: numbering {last['numbering']} s, "
                  f"Spark job (shuffle + matching) {last['matching']} s, sort + write {last['writing']} s.", "",
              f"Simulation (`cepc sim`, Verilator + cocotb + cocotbext-axi, marathon, 64 partitions, 64-bit bus, "
              f"{sim['tuples']:,} tuples):", "",
              "| run | tuples/s | cycles/s | tuples/cycle | seconds |", "|---|---:|---:|---:|---:|"]
    for name in ("free", "stalls_backpressure"):
        s = sim[name]
        lines.append(f"| {name.replace('_', ' + ')} | {s['tuples_per_s']:,} | {s['cycles_per_s']:,} "
                     f"| {s['tuples_per_cycle']} | {s['seconds']} |")
    if make_sim is not None:
        lines += ["", f"`make sim` (the whole hardware and golden regression): {make_sim} s."]
    lines.append("")
    (RESULTS / "verification.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
