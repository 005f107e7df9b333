"""Partitioners side by side: the table partitioner at 1K/16K/64K partitions against Woods' pipeline.

The marathon query's compiled top (a bus as wide as a tuple, so one tuple a cycle can arrive) in
the harness of bench/throughput.py (every input from an LFSR, every output XOR-ed into one pin),
through Yosys (``synth_ecp5`` / ``synth_ice40``) and nextpnr (one thread, seed 1) for the
ECP5-85F (LFE5U-85F, CABGA381) and the iCE40UP5K (SG48). Tuples/s = Fmax × tuples per cycle
(table 1, pipeline ½: Woods injects a key every other cycle).

A configuration that does not fit is reported as such, with where that came from:

* table: the block RAM the table needs (``cepc.hw.sizing``, as the compiler rounds it) against the
  device's blocks — an upfront estimate, no tool run;
* pipeline: LUTs and flip-flops per element, measured by synthesising (Yosys only) the top with a
  16- and a 32-element pipeline, extrapolated to the count and compared with the device's cells
  (also upfront); a configuration that passes the estimate goes through the tools, and a tool's
  "does not fit" is reported as the tools' verdict;
* a place and route that takes longer than ``--timeout`` seconds (default 480) is stopped and
  reported as skipped.

    python bench/partitioner.py [--counts 1024,16384,65536] [--devices ecp5-85f,ice40up5k] [--timeout S]

Writes bench/results/partitioner.json and partitioner.md. Exit 1 if the table partitioner does
not fit 65,536 partitions on the ECP5-85F or a tool fails unexpectedly.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from amaranth.back import rtlil  # noqa: E402
from throughput import Harness, tool  # noqa: E402

from cepc import __version__  # noqa: E402
from cepc.hw import sizing  # noqa: E402
from cepc.hw.top import Top  # noqa: E402
from cepc.lang.check import check  # noqa: E402
from cepc.lang.parse import parse_file  # noqa: E402
from cepc.nfa.lower import lower  # noqa: E402

MARATHON = ROOT / "examples" / "marathon" / "marathon.sql"
RESULTS = ROOT / "bench" / "results"
SEED = 1

# what nextpnr places on: logic cells / LUT4s and flip-flops of each device
DEVICES = {
    "ecp5-85f": {"name": "ECP5-85F (LFE5U-85F-CABGA381)", "family": "ecp5", "lut": 83640, "ff": 83640,
                 "yosys": "synth_ecp5", "lut_cell": "LUT4", "ff_cells": ("TRELLIS_FF",), "bram_cell": "DP16KD",
                 "pnr": ["nextpnr-ecp5", "--85k", "--package", "CABGA381"]},
    "ice40up5k": {"name": "iCE40UP5K (SG48)", "family": "ice40", "lut": 5280, "ff": 5280,
                  "yosys": "synth_ice40", "lut_cell": "SB_LUT4",
                  "ff_cells": ("SB_DFF", "SB_DFFE", "SB_DFFSR", "SB_DFFR", "SB_DFFS", "SB_DFFESR", "SB_DFFER",
                               "SB_DFFES", "SB_DFFSS", "SB_DFFSE", "SB_DFFESS"),
                  "bram_cell": "SB_RAM40_4K", "pnr": ["nextpnr-ice40", "--up5k", "--package", "sg48"]},
}
TUPLES_PER_CYCLE = {"table": 1.0, "pipeline": 0.5}


def commit() -> str:
    """The commit measured, with ``+dirty`` when cepc/ has uncommitted changes."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    rev = git("rev-parse", "--short", "HEAD") or "unknown"
    return rev + ("+dirty" if git("status", "--porcelain", "--", "cepc") else "")


def design():
    return lower(check(parse_file(MARATHON)))


def harness_il(partitioner: str, partitions: int, ways: int | None = None) -> str:
    d = design()
    top = Top(d, bus_width=d.tuple.nbytes * 8, partitions=partitions, partitioner=partitioner, ways=ways)
    h = Harness(top)
    return rtlil.convert(h, name="harness", ports=[h.out], emit_src=False)


def yosys(il: str, dev: dict, workdir: Path, netlist: bool = True) -> dict:
    (workdir / "h.il").write_text(il)
    script = f"read_rtlil h.il; {dev['yosys']} -top harness" + (" -json h.json" if netlist else "") + \
        "; tee -q -o stat.json stat -json"
    proc = subprocess.run([tool("yosys"), "-q", "-p", script], cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"yosys failed: {proc.stderr[-2000:]}")
    cells = json.loads((workdir / "stat.json").read_text())["modules"]["\\harness"]["num_cells_by_type"]
    return {"lut": cells.get(dev["lut_cell"], 0), "ff": sum(cells.get(c, 0) for c in dev["ff_cells"]),
            "bram": cells.get(dev["bram_cell"], 0)}


def pipeline_cost(dev: dict) -> dict:
    """LUTs and flip-flops per pipeline element: synthesis (no place and route) at 16 and 32 elements."""
    got = {}
    for n in (16, 32):
        with tempfile.TemporaryDirectory() as d:
            got[n] = yosys(harness_il("pipeline", n), dev, Path(d), netlist=False)
    per = {k: (got[32][k] - got[16][k]) / 16 for k in ("lut", "ff")}
    base = {k: got[16][k] - 16 * per[k] for k in ("lut", "ff")}
    return {"per_element": per, "base": base, "measured": {str(k): v for k, v in got.items()}}


def place_and_route(dev: dict, workdir: Path, timeout: float) -> dict:
    cmd = [tool(dev["pnr"][0]), *dev["pnr"][1:], "--json", "h.json", "--freq", "200", "--timing-allow-fail",
           "--seed", str(SEED), "--threads", "1", "--report", "report.json", "--log", "nextpnr.log"]
    if dev["family"] == "ecp5":
        cmd += ["--router", "router2"]
    try:
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"place and route took longer than {timeout:.0f} s: stopped"}
    log = (workdir / "nextpnr.log").read_text(errors="replace") if (workdir / "nextpnr.log").exists() else ""
    if proc.returncode != 0:
        text = log + proc.stderr
        if re.search(r"(?i)unable to place|not enough|too many|exceeds|failed to find", text):
            last = [ln for ln in text.splitlines() if "ERROR" in ln]
            return {"fits": False, "why": f"the tools: {last[-1].strip() if last else 'nextpnr could not place it'}"}
        raise RuntimeError(f"nextpnr failed: {text[-2000:]}")
    report = json.loads((workdir / "report.json").read_text())
    fmax = [v["achieved"] for v in report.get("fmax", {}).values()]
    if not fmax:
        fmax = [float(v) for v in re.findall(r"Max frequency for clock\s+'[^']+':\s+([\d.]+) MHz", log)]
    crit = report.get("critical_paths") or []
    path = None
    if crit:
        segs = crit[0].get("path", [])
        if segs:
            path = f"{segs[0].get('from', {}).get('cell', '?')} → {segs[-1].get('to', {}).get('cell', '?')} " \
                   f"({sum(s.get('delay', 0) for s in segs):.2f} ns, {len(segs)} segments)"
    return {"fmax_mhz": round(min(fmax), 2), "critical_path": path}


def run(dev_key: str, partitioner: str, count: int, cost: dict | None, timeout: float, build: Path) -> dict:
    dev = DEVICES[dev_key]
    d = design()
    row = {"design": f"examples/marathon ({partitioner} partitioner, {count} partitions)", "device": dev["name"],
           "device_key": dev_key, "partitioner": partitioner, "partitions": count,
           "tuples_per_cycle": TUPLES_PER_CYCLE[partitioner]}
    ways = None
    if partitioner == "table":
        choice = sizing.choose(d, sizing.DEVICES[dev_key], "table", count)
        blocks = sum(t.blocks for t in choice.tables)
        t = choice.tables[0]
        ways = t.ways
        row.update({"partitions": t.entries, "table": "direct-indexed" if t.direct else f"hashed, {t.ways}-way",
                    "entry_bits": t.entry_bits, "bram_estimate": blocks})
        avail = sizing.DEVICES[dev_key].blocks
        if blocks > avail:
            row.update({"fits": False, "why": f"upfront estimate: the table needs {blocks} "
                        f"{sizing.DEVICES[dev_key].block}s, the device has {avail}"})
            return row
    else:
        est = {k: round(cost["base"][k] + count * cost["per_element"][k]) for k in ("lut", "ff")}
        row["estimate"] = est
        over = [k for k in ("lut", "ff") if est[k] > dev[k]]
        if over:
            row.update({"fits": False, "why": "upfront estimate: " + ", ".join(
                f"~{est[k]:,} {k.upper()}s (about {cost['per_element'][k]:.0f} per element) of {dev[k]:,}"
                for k in over)})
            return row
    work = build / dev_key / f"{partitioner}-{count}"
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    row.update(yosys(harness_il(partitioner, count, ways), dev, work))
    row["synth_s"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    got = place_and_route(dev, work, timeout)
    row["pnr_s"] = round(time.perf_counter() - t0, 1)
    row.update(got)
    if "fmax_mhz" in got:
        row["fits"] = True
        row["tuples_per_second"] = round(got["fmax_mhz"] * 1e6 * row["tuples_per_cycle"])
    return row


def markdown(rows: list[dict], costs: dict, rev: str) -> str:
    lines = [
        "# Partitioners: table vs pipeline",
        "",
        f"`make bench-partitioner` (cepc {__version__}, commit {rev}): the marathon query's compiled top (bus as wide as a "
        "tuple) in an LFSR harness, Yosys and nextpnr (one thread, seed 1, target 200 MHz). Tuples/s = Fmax × "
        "tuples per cycle (table 1, pipeline ½). LUT: ECP5 LUT4s / iCE40 SB_LUT4s after synthesis; BRAM: "
        "DP16KD / SB_RAM40_4K (estimated blocks where the table does not fit); ~: estimated from the cost per "
        "pipeline element below. \"Does not fit\" says whether the tools or an upfront estimate said so.",
        "",
        "| device | partitioner | partitions | table | BRAM | LUT | FF | Fmax MHz | tuples/s | note |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        table = r.get("table", "")
        if r.get("fits") is False or "skipped" in r:
            note = f"**does not fit** ({r['why']})" if r.get("fits") is False else f"skipped: {r['skipped']}"
            bram = r.get("bram", r.get("bram_estimate", ""))
            if "lut" in r:  # synthesised: Yosys's counts
                lut, ff = f"{r['lut']:,}", f"{r['ff']:,}"
            elif "estimate" in r:
                lut, ff = f"~{r['estimate']['lut']:,}", f"~{r['estimate']['ff']:,}"
            else:
                lut = ff = ""
            lines.append(f"| {r['device']} | {r['partitioner']} | {r['partitions']:,} | {table} | {bram} "
                         f"| {lut} | {ff} | — | — | {note} |")
            continue
        lines.append(f"| {r['device']} | {r['partitioner']} | {r['partitions']:,} | {table} | {r['bram']} "
                     f"| {r['lut']:,} | {r['ff']:,} | {r['fmax_mhz']:.1f} | {r['tuples_per_second'] / 1e6:.1f} M "
                     f"| P&R {r['pnr_s']} s |")
    lines += ["", "Pipeline partitioner cost per element (Yosys, 16 vs 32 elements), basis of the estimates:", ""]
    for k, c in costs.items():
        lines.append(f"* {DEVICES[k]['name']}: {c['per_element']['lut']:.1f} LUT, {c['per_element']['ff']:.1f} FF "
                     f"per element (+ {c['base']['lut']:.0f} LUT, {c['base']['ff']:.0f} FF for the rest of the top)")
    crit = [r for r in rows if r.get("critical_path")]
    if crit:
        lines += ["", "Critical paths (nextpnr):", ""]
        lines += [f"* {r['device']}, {r['partitioner']} {r['partitions']:,}: {r['critical_path']}" for r in crit]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--counts", default="1024,16384,65536")
    p.add_argument("--devices", default=",".join(DEVICES))
    p.add_argument("--partitioners", default="table,pipeline")
    p.add_argument("--timeout", type=float, default=480.0, help="seconds of place and route before giving up")
    p.add_argument("--build", default=str(ROOT / "build" / "bench-partitioner"))
    p.add_argument("--out", default=str(RESULTS), help="directory for partitioner.json and partitioner.md")
    args = p.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    rows, costs = [], {}
    for dev_key in args.devices.split(","):
        for partitioner in args.partitioners.split(","):
            if partitioner == "pipeline" and dev_key not in costs:
                costs[dev_key] = pipeline_cost(DEVICES[dev_key])
            for count in counts:
                print(f"== {partitioner} {count} on {dev_key}", file=sys.stderr, flush=True)
                row = run(dev_key, partitioner, count, costs.get(dev_key), args.timeout, Path(args.build))
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rev = commit()
    (out / "partitioner.json").write_text(json.dumps(
        {"cepc_version": __version__, "commit": rev, "seed": SEED, "pipeline_cost": costs, "results": rows}, indent=2) + "\n")
    (out / "partitioner.md").write_text(markdown(rows, costs, rev))
    bad = [r for r in rows if r["partitioner"] == "table" and r["device_key"] == "ecp5-85f"
           and r["partitions"] >= 65536 and not r.get("fits")]
    if bad:
        print("the table partitioner does not fit 65,536 partitions on the ECP5-85F", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
