"""Throughput: cepc's hardware and golden model against the papers, the wire, and Apache Flink.

1. Hardware tuples/s = Fmax × tuples per cycle. Fmax is read from bench/results/synth.json or
   partitioner.json when the synthesis benchmarks wrote them; otherwise measured here: the
   marathon top (table partitioner, as ``cepc compile`` picks it for the ECP5-85F, 128-bit bus) in
   a harness that drives its inputs from an LFSR and XORs its outputs into one pin, through Yosys
   ``synth_ecp5`` and nextpnr-ecp5 (LFE5U-85F, CABGA381). Tuples per cycle are measured in
   ``amaranth.sim`` (a bus as wide as a tuple, no gaps, keys at random). Compared with Woods et
   al.'s 7.28 M tuples/s (gigabit Ethernet), CQPH's 156 M tuples/s (Oge et al.) and the line
   rates of 1, 10 and 100 GbE for 128-bit tuples (payload only).
2. Golden model events/s from bench/results/verification.json against Hirzel's 830 k events/s.
3. Side by side on the same events, a marathon-like query both accept (Flink SQL has no
   alternation): ``A NOTB* C`` per runner, SKIP PAST LAST ROW. cepc: the reference matcher and
   the fast (lock-step DFA) engine in-process, and ``cepc golden`` on Spark; Apache Flink SQL
   ``MATCH_RECOGNIZE`` in batch mode (PyPI ``apache-flink`` in bench/.venv-flink, created here when
   missing). The reported rows must agree. Flink's pattern is ``A NOTB*? C``: its greedy ``NOTB*``
   keeps a Queens tuple that NOTB also accepts instead of giving it to C, and finds no match at all;
   the reluctant quantifier ends each match at its first C, which is cepc's eager semantics.
4. Simulation speed (Verilator, cocotb) from verification.json.

Checks (exit 1): the table partitioner takes one tuple per cycle; the golden model and Flink (when
it ran) report the same matches as the reference.

Writes bench/results/throughput.json and throughput.md. Run: ``make bench-throughput``
(``--events N``, ``--no-flink``, ``--no-pnr``).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from amaranth.back import rtlil
from amaranth.hdl import Cat, Elaboratable, Module, Signal
from amaranth.sim import Simulator

from cepc import events, gen
from cepc.hw import sizing
from cepc.hw.top import Top
from cepc.lang.check import check
from cepc.lang.parse import parse, parse_file
from cepc.nfa import dfa, reference
from cepc.nfa.lower import lower

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FLINK_VENV = ROOT / "bench" / ".venv-flink"
MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"

WOODS_TUPLES_S = 7.28e6  # Woods et al. §7: gigabit Ethernet, 16-byte tuples
CQPH_TUPLES_S = 156e6  # Oge et al. §5
HIRZEL_EVENTS_S = 830e3  # Hirzel Table 6 (C++, 8 cores)
TUPLE_BITS = 128
LINE_RATES = {"1 GbE": 1e9, "10 GbE": 10e9, "100 GbE": 100e9}

# the marathon-like query both cepc and Flink accept: one branch of Woods' pattern
SIDE_QUERY = """CREATE STREAM marathon (
  time TIMESTAMP,
  checkpoint ENUM('Staten Island','Brooklyn','Queens','Bronx','Manhattan'),
  runner UINT16,
  speed UINT16
);
PARTITION BY runner
PATTERN ( A NOTB* C )
DEFINE
  A    AS checkpoint = 'Staten Island',
  NOTB AS checkpoint != 'Brooklyn',
  C    AS checkpoint = 'Queens';
"""
FLINK_SPEC = {"pattern": "A NOTB*? C",  # reluctant: see the module docstring
              "define": "A AS checkpoint = 'Staten Island', NOTB AS checkpoint <> 'Brooklyn', "
                        "C AS checkpoint = 'Queens'"}


def tool(name: str) -> str:
    exe = shutil.which(f"yowasp-{name}") or shutil.which(name)
    if exe is None:
        raise FileNotFoundError(name)
    return exe


# --- 1. hardware ----------------------------------------------------------------------------------


class Harness(Elaboratable):
    """The top with every input from a 127-bit LFSR and every output XOR-ed into one register."""

    def __init__(self, top: Top):
        self.top = top
        self.out = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.top = top = self.top
        width = len(top.s_tdata) + 4
        n = max(127, width)
        lfsr = Signal(n, init=1)
        m.d.sync += lfsr.eq(Cat(lfsr[126] ^ lfsr[125], lfsr[:-1]))  # x^127 + x^126 + 1
        m.d.comb += [top.s_tdata.eq(lfsr[:len(top.s_tdata)]), top.s_tkeep.eq(-1), top.s_tvalid.eq(1),
                     top.s_tlast.eq(lfsr[width - 4] & lfsr[width - 3]), top.m_tready.eq(~lfsr[width - 2]),
                     top.spill_tready.eq(~lfsr[width - 1])]
        outs = [top.s_tready, top.m_tdata, top.m_tvalid, top.m_tlast, top.spill_tdata, top.spill_tvalid,
                top.tuples_in, top.matches_out, top.dropped, top.malformed, top.evicted, top.overflow]
        m.d.sync += self.out.eq(Cat(*outs).xor())
        return m


def fmax_of_marathon(bus_width: int = 128) -> dict:
    """Synthesis and place and route of the marathon top; Fmax and resources."""
    checked = check(parse_file(MARATHON))
    design = lower(checked)
    choice = sizing.choose(design, sizing.DEVICES["ecp5-85f"], "auto", None)
    top = Top(design, bus_width=bus_width, partitions=choice.partitions, partitioner=choice.partitioner,
              ways=choice.ways)
    harness = Harness(top)
    il = rtlil.convert(harness, name="harness", ports=[harness.out], emit_src=False)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "h.il").write_text(il)
        t0 = time.perf_counter()
        proc = subprocess.run([tool("yosys"), "-q", "-p", "read_rtlil h.il; synth_ecp5 -top harness -json h.json; "
                               "tee -q -o stat.json stat -json"], cwd=d, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"yosys failed: {proc.stderr[-2000:]}")
        t1 = time.perf_counter()
        cells = json.loads((Path(d) / "stat.json").read_text())["modules"]["\\harness"]["num_cells_by_type"]
        proc = subprocess.run([tool("nextpnr-ecp5"), "--85k", "--package", "CABGA381", "--json", "h.json",
                               "--freq", "200", "--timing-allow-fail", "--seed", "1", "--report", "report.json"],
                              cwd=d, capture_output=True, text=True)
        t2 = time.perf_counter()
        if proc.returncode != 0:
            raise RuntimeError(f"nextpnr-ecp5 failed: {proc.stderr[-2000:]}")
        report = json.loads((Path(d) / "report.json").read_text())
    fmax = {k: v["achieved"] for k, v in report.get("fmax", {}).items()}
    if not fmax:
        found = re.findall(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz", proc.stderr)
        fmax = {k: float(v) for k, v in found}
    return {"design": f"examples/marathon (table partitioner, {choice.partitions} entries, {bus_width}-bit bus)",
            "device": "LFE5U-85F-CABGA381", "partitioner": choice.partitioner, "partitions": choice.partitions,
            "fmax_mhz": round(min(fmax.values()), 2), "lut4": cells.get("LUT4", 0), "ff": cells.get("TRELLIS_FF", 0),
            "bram": cells.get("DP16KD", 0), "synth_s": round(t1 - t0, 1), "pnr_s": round(t2 - t1, 1),
            "source": "measured here (synth_ecp5 + nextpnr-ecp5, seed 1)"}


def tuples_per_cycle(partitioner: str, n: int = 2000, keys: int = 50, seed: int = 1, packets: bool = False) -> float:
    """Tuples the marathon top takes per cycle with a bus as wide as a tuple and no gaps; all in one
    packet, or (``packets``) each tuple a packet of its own (``s_tlast`` on every beat)."""
    checked = check(parse_file(MARATHON))
    design = lower(checked)
    width = design.tuple.nbytes * 8
    top = Top(design, bus_width=width, partitions=64 if partitioner == "table" else 16, partitioner=partitioner)
    rng = random.Random(seed)
    members = design.tuple.field("checkpoint").members
    words = [design.tuple.pack({"time": i, "checkpoint": rng.choice(members), "runner": rng.randrange(keys),
                                "speed": 0}) for i in range(n)]
    span = {}

    async def source(ctx):
        ctx.set(top.m_tready, 1)
        ctx.set(top.spill_tready, 1)
        cycle = 0
        for i, w in enumerate(words):
            ctx.set(top.s_tdata, w)
            ctx.set(top.s_tkeep, -1)
            ctx.set(top.s_tlast, packets or i == n - 1)
            ctx.set(top.s_tvalid, 1)
            while not ctx.get(top.s_tready):
                await ctx.tick()
                cycle += 1
            await ctx.tick()  # taken on this edge
            cycle += 1
            if i == 0:
                span["first"] = cycle
        span["last"] = cycle

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(source)
    sim.run_until(1e-8 * (4 * n + 100))
    return round((n - 1) / max(1, span["last"] - span["first"]), 3)


# --- 3. side by side ------------------------------------------------------------------------------


def flink_python(log) -> Path | None:
    """bench/.venv-flink's interpreter, creating the venv (python -m venv + pip install apache-flink) if missing."""
    py = FLINK_VENV / "bin" / "python"
    ok = py.exists() and subprocess.run([py, "-c", "import pyflink"], capture_output=True).returncode == 0
    if not ok:
        log("creating bench/.venv-flink (pip install apache-flink; a few minutes) …")
        proc = subprocess.run([sys.executable, "-m", "venv", "--clear", FLINK_VENV], capture_output=True, text=True)
        if proc.returncode == 0:
            proc = subprocess.run([py, "-m", "pip", "install", "--quiet", "apache-flink"], capture_output=True,
                                  text=True)
        if proc.returncode != 0:
            return None
    return py


def side_by_side(n: int, keys: int, run_flink: bool, run_spark: bool, log) -> dict:
    checked = check(parse(SIDE_QUERY))
    frame = gen.generate(checked, n, keys, seed=1)
    out: dict = {"query": "PARTITION BY runner PATTERN ( A NOTB* C ), SKIP PAST LAST ROW", "events": n, "keys": keys}
    t0 = time.perf_counter()
    ref = reference.Matcher(checked).run(frame)
    t1 = time.perf_counter()
    ref_rows = sorted(m.row for m in ref)
    out["matches"] = len(ref_rows)
    out["reference"] = {"seconds": round(t1 - t0, 3), "events_per_s": round(n / (t1 - t0))}
    qm = reference.QueryMatcher(checked, 0)
    group = events.group_codes(frame, qm.query.partition_by)
    t0 = time.perf_counter()
    fast = dfa.FastMatcher(qm).match(frame, group, events.grouped_order(group))
    t1 = time.perf_counter()
    out["fast_engine"] = {"seconds": round(t1 - t0, 3), "events_per_s": round(n / (t1 - t0)),
                          "agrees": [int(r) for r in fast] == ref_rows}
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        if run_spark:
            query = d / "q.sql"
            query.write_text(SIDE_QUERY)
            gen.write_events(frame, d / "events.parquet")
            log("cepc golden (Spark) …")
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "cepc.cli", "golden", query, "--events", d / "events.parquet",
                                   "-o", d / "golden.csv"], capture_output=True, text=True)
            t1 = time.perf_counter()
            if proc.returncode == 0:
                golden = pd.read_csv(d / "golden.csv")
                out["golden_spark"] = {"command_s": round(t1 - t0, 2), "events_per_s": round(n / (t1 - t0)),
                                       "agrees": golden["seq"].tolist() == ref_rows,
                                       "note": "one `cepc golden` process, JVM start-up included"}
            else:
                out["golden_spark"] = {"status": "failed", "stderr": proc.stderr[-1000:]}
        if run_flink:
            py = flink_python(log)
            if py is None:
                out["flink"] = {"status": "unavailable", "reason": "pip install apache-flink failed in bench/.venv-flink"}
            else:
                csv = d / "flink.csv"
                flink_frame = pd.DataFrame({"seq": np.arange(n), "time": frame["time"].astype("int64"),
                                            "checkpoint": frame["checkpoint"], "runner": frame["runner"],
                                            "speed": frame["speed"]})
                flink_frame.to_csv(csv, index=False, header=False)
                (d / "spec.json").write_text(json.dumps(FLINK_SPEC))
                log("Flink MATCH_RECOGNIZE (batch) …")
                t0 = time.perf_counter()
                proc = subprocess.run([py, ROOT / "bench" / "flink_job.py", csv, d / "spec.json", d / "flink_out.csv"],
                                      capture_output=True, text=True)
                t1 = time.perf_counter()
                if proc.returncode != 0:
                    out["flink"] = {"status": "failed", "stderr": proc.stderr[-1500:]}
                else:
                    stats = json.loads(proc.stdout.strip().splitlines()[-1])
                    rows = pd.read_csv(d / "flink_out.csv")["last_seq"].tolist()
                    version = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('apache-flink'))"],
                                             capture_output=True, text=True).stdout.strip()
                    out["flink"] = {"version": version, "command_s": round(t1 - t0, 2), **stats,
                                    "events_per_s": round(n / (t1 - t0)),
                                    "query_events_per_s": round(n / stats["query_s"]),
                                    "agrees": sorted(rows) == ref_rows, "matches": len(rows),
                                    "note": "one Python process, JVM start-up included; batch mode, parallelism 2"}
    return out


# --- output -----------------------------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x / 1e6:,.2f} M" if x >= 1e6 else f"{x / 1e3:,.0f} k"


def markdown(r: dict) -> str:
    hw = r["hardware"]
    lines = ["# Throughput", "", f"Machine: {r['machine']}. Times from one run on a shared machine: compare "
             "ratios within a table, not seconds across runs.", "",
             "## Hardware vs the papers and the wire", "",
             f"{hw['fmax']['design']} on the {hw['fmax'].get('device', 'ECP5')}: Fmax {hw['fmax']['fmax_mhz']} MHz "
             f"({hw['fmax']['source']}); {hw['tuples_per_cycle']} tuples/cycle measured in amaranth.sim "
             f"(pipeline partitioner: {hw['pipeline_tuples_per_cycle']}; table with every tuple a packet of its own, "
             f"`s_tlast` on every beat: {hw['tuples_per_cycle_one_tuple_packets']}).", "",
             "| system | tuples/s | cepc hardware ÷ it |", "|---|---:|---:|"]
    rate = hw["tuples_per_s"]
    lines.append(f"| **cepc (table partitioner, ECP5)** | {fmt(rate)} | 1.00× |")
    for name, v in r["references"].items():
        lines.append(f"| {name} | {fmt(v)} | {rate / v:.2f}× |")
    lines += ["", "Line rates are payload only (128-bit tuples, no Ethernet/IP framing).", ""]
    g = r.get("golden")
    if g:
        lines += ["## Golden model (Spark) vs Hirzel", "",
                  "| events | warm ev/s | command ev/s | warm ÷ Hirzel (830 k, C++, 8 cores) |", "|---:|---:|---:|---:|"]
        for row in g:
            lines.append(f"| {row['events']:,} | {fmt(row['warm_events_per_s'])} | {fmt(row['command_events_per_s'])} | "
                         f"{row['warm_events_per_s'] / HIRZEL_EVENTS_S:.2f}× |")
        lines += ["", "From bench/results/verification.json (marathon, 1000 runners).", ""]
    s = r.get("side_by_side")
    if s:
        lines += [f"## Side by side: {s['query']}, {s['events']:,} events, {s['keys']} runners, {s['matches']:,} matches",
                  "", "| engine | seconds | events/s | same matches as the reference |", "|---|---:|---:|---|"]
        lines.append(f"| cepc reference matcher (in-process, 1 core) | {s['reference']['seconds']} | "
                     f"{fmt(s['reference']['events_per_s'])} | — |")
        fe = s["fast_engine"]
        lines.append(f"| cepc fast engine (lock-step DFA, in-process) | {fe['seconds']} | {fmt(fe['events_per_s'])} | "
                     f"{'yes' if fe['agrees'] else '**no**'} |")
        gs = s.get("golden_spark")
        if gs and "command_s" in gs:
            lines.append(f"| `cepc golden` (Spark local[*], whole command) | {gs['command_s']} | {fmt(gs['events_per_s'])} | "
                         f"{'yes' if gs['agrees'] else '**no**'} |")
        elif gs:
            lines.append(f"| `cepc golden` | failed | | {gs.get('stderr', '')[:200]} |")
        fl = s.get("flink")
        if fl and "command_s" in fl:
            lines.append(f"| Flink {fl['version']} MATCH_RECOGNIZE, batch (whole command) | {fl['command_s']} | "
                         f"{fmt(fl['events_per_s'])} | {'yes' if fl['agrees'] else '**no**'} ({fl['matches']:,}) |")
            lines.append(f"| Flink, query only (after JVM start-up and table definition) | {fl['query_s']} | "
                         f"{fmt(fl['query_events_per_s'])} | |")
        elif fl:
            lines.append(f"| Apache Flink | {fl['status']} | | {fl.get('reason', fl.get('stderr', ''))[:300]} |")
        lines.append("")
    sim = r.get("simulation")
    if sim:
        lines += ["## Simulation (Verilator + cocotb, from verification.json)", "",
                  f"{sim['tuples_per_s']:,} tuples/s, {sim['cycles_per_s']:,} cycles/s.", ""]
    lines += ["## Checks", "", "| check | result | detail |", "|---|---|---|"]
    for c in r["checks"]:
        lines.append(f"| {c['check']} | {'pass' if c['ok'] else '**FAIL**'} | {c['detail']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="events for the side-by-side run (default: 1M)")
    ap.add_argument("--keys", type=int, default=1000, help="runners (default: 1000)")
    ap.add_argument("--no-flink", action="store_true", help="skip Apache Flink")
    ap.add_argument("--no-spark", action="store_true", help="skip cepc golden on Spark")
    ap.add_argument("--no-pnr", action="store_true", help="do not place and route when no synthesis result exists")
    args = ap.parse_args()

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from automata import machine

    result: dict = {"machine": machine()}
    fmax = None
    for name in ("synth.json", "partitioner.json"):  # written by the synthesis benchmarks, when they ran
        path = RESULTS / name
        if path.exists():
            found = _fmax_from(json.loads(path.read_text()))
            if found:
                fmax = {**found, "source": f"bench/results/{name}"}
                break
    if fmax is None and not args.no_pnr:
        log("synthesis and place and route of the marathon top (a few minutes) …")
        fmax = fmax_of_marathon()
    log("tuples per cycle in amaranth.sim …")
    tpc = tuples_per_cycle("table")
    tpc_pipe = tuples_per_cycle("pipeline", n=400)
    tpc_packets = tuples_per_cycle("table", n=400, packets=True)
    hw = {"fmax": fmax or {"design": "marathon", "fmax_mhz": 0.0, "source": "not measured (--no-pnr)"},
          "tuples_per_cycle": tpc, "pipeline_tuples_per_cycle": tpc_pipe,
          "tuples_per_cycle_one_tuple_packets": tpc_packets}
    hw["tuples_per_s"] = hw["fmax"]["fmax_mhz"] * 1e6 * tpc
    result["hardware"] = hw
    refs = {"Woods et al. (Virtex-5, gigabit Ethernet)": WOODS_TUPLES_S, "CQPH (Oge et al.)": CQPH_TUPLES_S}
    for name, bits in LINE_RATES.items():
        refs[f"{name} line rate, 128-bit tuples"] = bits / TUPLE_BITS
    result["references"] = refs
    verification = RESULTS / "verification.json"
    if verification.exists():
        v = json.loads(verification.read_text())
        result["golden"] = v.get("golden", [])
        result["simulation"] = v.get("simulation", {}).get("free")
    log(f"side by side on {args.events:,} events …")
    result["side_by_side"] = side_by_side(args.events, args.keys, not args.no_flink, not args.no_spark, log)

    checks = [{"check": "table partitioner takes one tuple per cycle", "ok": tpc >= 0.99,
               "detail": f"{tpc} tuples/cycle (pipeline partitioner: {tpc_pipe})"}]
    s = result["side_by_side"]
    checks.append({"check": "fast engine reports the reference's matches", "ok": s["fast_engine"]["agrees"],
                   "detail": f"{s['matches']:,} matches"})
    if "golden_spark" in s:
        checks.append({"check": "cepc golden (Spark) reports the reference's matches",
                       "ok": bool(s["golden_spark"].get("agrees")), "detail": s["golden_spark"].get("status", "ran")})
    if "flink" in s:
        fl = s["flink"]
        checks.append({"check": "Flink MATCH_RECOGNIZE reports the reference's matches", "ok": bool(fl.get("agrees")),
                       "detail": fl.get("status", f"{fl.get('matches', 0):,} matches")})
    result["checks"] = checks
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    (RESULTS / "throughput.md").write_text(md)
    print(md)
    failed = [c for c in checks if not c["ok"]]
    for c in failed:
        print(f"check failed: {c['check']}: {c['detail']}", file=sys.stderr)
    return 1 if failed else 0


def _fmax_from(data) -> dict | None:
    """The ECP5-85F marathon table-partitioner design's Fmax in a synthesis result file (the most
    partitions, if several), else the first table-partitioner design's, if it has one."""
    rows = data if isinstance(data, list) else data.get("designs") or data.get("results") or data.get("rows") or []
    rows = [r for r in rows if isinstance(r, dict) and r.get("fmax_mhz") is not None
            and r.get("partitioner", "table") == "table"]
    if not rows:
        return None

    def rank(row):
        name = str(row.get("design", row.get("example", "")))
        return ("85F" in str(row.get("device", "")), "marathon" in name, row.get("partitions", 0))

    best = max(rows, key=rank)
    name = best.get("design") or f"examples/{best.get('example', '?')} on {best.get('device', '?')}"
    return {"design": str(name), "fmax_mhz": float(best["fmax_mhz"])}


if __name__ == "__main__":
    sys.exit(main())
