"""Front-end and reference-matcher benchmarks.

* parse + check + wiring NFA time for a pattern of N predicates (N = 10 … 1000);
* reference matcher throughput (events/s) on generated marathon events,
  1M events over 1000 keys, beside Hirzel's 830,000 events/s (DEBS 2012, C++, 8 cores)
  and the 85,000 events/s of a naive per-event ``applyInPandas`` loop measured here.

Writes bench/results/foundation.json and foundation.md. Run: ``make bench-foundation``
or ``.venv/bin/python bench/foundation.py [--events 1000000]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from cepc.gen import generate
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa import reference, wiring

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
HIRZEL_EVENTS_PER_S = 830_000
NAIVE_APPLY_IN_PANDAS = 85_000


def pattern_query(n: int) -> str:
    names = [f"P{i}" for i in range(n)]
    # a realistic mix: sequences, closures and alternations over one field
    parts = []
    for i in range(0, n, 4):
        group = names[i:i + 4]
        if len(group) == 4:
            parts.append(f"{group[0]} {group[1]}* ({group[2]} | {group[3]})")
        else:
            parts.extend(group)
    defines = ",\n  ".join(f"{p} AS v {'=' if i % 2 else '!='} {i % 250} AND w < {i + 1}" for i, p in enumerate(names))
    return f"CREATE STREAM s (t TIMESTAMP, k UINT16, v UINT8, w UINT16);\nPARTITION BY k\n" \
           f"PATTERN ( {' '.join(parts)} )\nDEFINE\n  {defines};\n"


def time_frontend(n: int, repeat: int = 5) -> dict:
    text = pattern_query(n)
    samples = {"parse": [], "check": [], "nfa": []}
    for _ in range(repeat):
        t0 = time.perf_counter()
        qf = parse(text)
        t1 = time.perf_counter()
        checked = check(qf)
        t2 = time.perf_counter()
        nfa = wiring.build(checked.queries[0])
        t3 = time.perf_counter()
        samples["parse"].append(t1 - t0)
        samples["check"].append(t2 - t1)
        samples["nfa"].append(t3 - t2)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {"predicates": n, "states": nfa.n_states, "edges": nfa.n_edges,
            **{f"{k}_s": round(v, 4) for k, v in med.items()}, "total_s": round(sum(med.values()), 4)}


def time_matcher(n_events: int, keys: int) -> dict:
    checked = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    frame = generate(checked, n_events, keys, seed=1)
    runs = []
    for _ in range(3):
        matcher = reference.Matcher(checked)
        t0 = time.perf_counter()
        matches = matcher.run(frame, np.arange(len(frame)))
        runs.append(time.perf_counter() - t0)
    best = min(runs)
    rate = n_events / best
    return {"query": "marathon", "events": n_events, "keys": keys, "matches": len(matches),
            "seconds": round(best, 3), "events_per_s": round(rate),
            "vs_hirzel_830k": round(rate / HIRZEL_EVENTS_PER_S, 2),
            "vs_naive_apply_in_pandas_85k": round(rate / NAIVE_APPLY_IN_PANDAS, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    args = ap.parse_args()

    frontend = [time_frontend(n) for n in (10, 50, 200, 1000)]
    matcher = time_matcher(args.events, args.keys)
    result = {"machine": {"cpu_count": __import__("os").cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()},
              "frontend": frontend, "reference_matcher": matcher}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "foundation.json").write_text(json.dumps(result, indent=2) + "\n")

    lines = ["# Front end and reference matcher", "",
             "Parse + check + wiring NFA (median of 5):", "",
             "| predicates | states | edges | parse s | check s | NFA s | total s |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in frontend:
        lines.append(f"| {r['predicates']} | {r['states']} | {r['edges']} | {r['parse_s']} | {r['check_s']} "
                     f"| {r['nfa_s']} | {r['total_s']} |")
    m = matcher
    lines += ["", f"Reference matcher, marathon query, {m['events']:,} events over {m['keys']:,} keys "
                  f"({m['matches']:,} matches), one core:", "",
              "| cepc reference | Hirzel C++ (8 cores) | naive applyInPandas | ratio vs Hirzel | ratio vs naive |",
              "|---:|---:|---:|---:|---:|",
              f"| {m['events_per_s']:,} ev/s | {HIRZEL_EVENTS_PER_S:,} ev/s | {NAIVE_APPLY_IN_PANDAS:,} ev/s "
              f"| {m['vs_hirzel_830k']}× | {m['vs_naive_apply_in_pandas_85k']}× |", ""]
    (RESULTS / "foundation.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
