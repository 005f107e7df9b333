"""Resource cost of aggregates: the same pattern with 0, 1, 2 and 4 aggregate registers.

A family of queries over Hirzel's trade stream that differ only in MEASURES — none; COUNT(*);
+ MAX(price); + FIRST(time), SUM(volume) — on a 3-state (``a b+ c``) and a 5-state
(``a b+ c d+ e``) pattern whose DEFINEs compare fields with constants (so the registers are the
measures' only). Each query's NFA core — :class:`~cepc.hw.nfa_core.NfaCore` without registers,
:class:`~cepc.hw.nfa_core.PartialMatchCore` with them — sits behind a registered tuple and the
predicate decoder, its partition payload (state vector + every state's registers) in a register
as the pipeline partitioner would hold it, match and measures out. Synthesis only (Yosys
``synth_ecp5`` and ``synth_ice40``, no place and route): LUTs and flip-flops, and the cost per
state per aggregate, (cells − cells without aggregates) ÷ (states × aggregates), and per
register bit. The payload width is also what the table partitioner stores per partition.

    python bench/aggregates.py

Writes bench/results/aggregates.json and aggregates.md. Exit 1 if a core's cost does not grow
with its registers (more aggregates must cost more flip-flops).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amaranth.back import rtlil  # noqa: E402
from amaranth.hdl import Elaboratable, Module, Signal  # noqa: E402

from cepc import __version__, tools  # noqa: E402
from cepc.hw.decoder import PredicateDecoder  # noqa: E402
from cepc.hw.layouts import tuple_layout  # noqa: E402
from cepc.hw.nfa_core import NfaCore, PartialMatchCore  # noqa: E402
from cepc.lang.check import check  # noqa: E402
from cepc.lang.parse import parse  # noqa: E402
from cepc.nfa.lower import lower  # noqa: E402

RESULTS = ROOT / "bench" / "results"
HEAD = """CREATE STREAM trades (time TIMESTAMP, symbol CHAR(4), price UINT32, volume UINT32);
NAME q
PARTITION BY symbol
"""
MEASURES = {
    0: "",
    1: "MEASURES COUNT(*) AS n\n",
    2: "MEASURES COUNT(*) AS n, MAX(price) AS peak\n",
    4: "MEASURES COUNT(*) AS n, MAX(price) AS peak, FIRST(time) AS started, SUM(volume) AS shares\n",
}
PATTERNS = {
    3: "PATTERN ( a b+ c )\nDEFINE a AS volume >= 5000, b AS price >= 1000, c AS price < 1000;\n",
    5: "PATTERN ( a b+ c d+ e )\nDEFINE a AS volume >= 5000, b AS price >= 1000, c AS price < 1000, "
       "d AS volume < 100, e AS volume >= 100;\n",
}
FAMILIES = {  # Yosys pass, LUT cell, flip-flop cells, carry cell
    "ecp5": ("synth_ecp5", "LUT4", ("TRELLIS_FF",), "CCU2C"),
    "ice40": ("synth_ice40", "SB_LUT4", ("SB_DFF", "SB_DFFE", "SB_DFFSR", "SB_DFFR", "SB_DFFS", "SB_DFFESR",
                                         "SB_DFFER", "SB_DFFES", "SB_DFFSS", "SB_DFFSE", "SB_DFFESS"), "SB_CARRY"),
}


class AggBench(Elaboratable):
    """Registered tuple → predicate decoder (registered) → core, payload in a register; match, measures out."""

    def __init__(self, q, layout):
        self.q, self.layout = q, layout
        self.tuple = Signal(layout)
        self.match = Signal()
        self.measures = Signal(max(1, q.measures_width))

    def elaborate(self, platform):
        m = Module()
        q = self.q
        t = Signal(self.layout)
        m.d.sync += t.eq(self.tuple)
        m.submodules.decoder = dec = PredicateDecoder(self.layout, list(q.predicates))
        preds = Signal(len(dec.preds))
        m.d.comb += dec.tuple.eq(t)
        m.d.sync += preds.eq(dec.preds)
        if q.tracks_matches:
            m.submodules.core = core = PartialMatchCore(q, self.layout)
            t2 = Signal(self.layout)  # the tuple beside its registered predicates
            m.d.sync += t2.eq(t)
            m.d.comb += core.tuple.eq(t2)
            m.d.sync += self.measures.eq(core.measures)
        else:
            m.submodules.core = core = NfaCore(q.nfa, len(q.predicates), q.skip)
        payload = Signal(len(core.state))
        m.d.comb += [core.preds.eq(preds), core.state.eq(payload)]
        m.d.sync += [payload.eq(core.next), self.match.eq(core.match)]
        return m


def query(states: int, aggregates: int) -> str:
    return HEAD + MEASURES[aggregates] + PATTERNS[states]


def synth(il: str, family: str) -> dict:
    pass_, lut, ffs, carry = FAMILIES[family]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "b.il").write_text(il)
        t0 = time.perf_counter()
        proc = subprocess.run([*tools.yowasp("yosys"), "-q", "-p",
                               f"read_rtlil b.il; {pass_} -top bench; tee -q -o stat.json stat -json"],
                              cwd=d, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"yosys failed:\n{proc.stderr[-3000:]}")
        cells = json.loads((Path(d) / "stat.json").read_text())["modules"]["\\bench"]["num_cells_by_type"]
    return {"lut": cells.get(lut, 0), "ff": sum(cells.get(c, 0) for c in ffs), "carry": cells.get(carry, 0),
            "synth_s": round(time.perf_counter() - t0, 1)}


def measure(families: list[str]) -> list[dict]:
    rows = []
    for states in PATTERNS:
        for k in MEASURES:
            d = lower(check(parse(query(states, k))))
            q = d.queries[0]
            layout = tuple_layout(d.tuple)
            b = AggBench(q, layout)
            il = rtlil.convert(b, name="bench", ports=[b.tuple.as_value(), b.match, b.measures], emit_src=False)
            regs = [f"{r.func}({r.width})" for r in q.registers] if q.tracks_matches else []
            row = {"states": q.nfa.n_states, "aggregates": k, "registers": regs,
                   # (a state's own: a LAST is kept once, QueryPlan.shared_registers; these patterns keep none)
                   "register_bits_per_state": q.state_register_width if q.tracks_matches else 0,
                   "payload_bits": q.payload_width if q.tracks_matches else q.state_width}
            for fam in families:
                print(f"== {states} states, {k} aggregates, {fam}", file=sys.stderr, flush=True)
                row[fam] = synth(il, fam)
            rows.append(row)
    for row in rows:  # the cost over the same pattern without aggregates
        base = next(r for r in rows if r["states"] == row["states"] and r["aggregates"] == 0)
        for fam in families:
            c, b0 = row[fam], base[fam]
            if row["aggregates"]:
                per = row["states"] * row["aggregates"]
                bits = row["states"] * row["register_bits_per_state"]
                c["per_state_per_aggregate"] = {k: round((c[k] - b0[k]) / per, 1) for k in ("lut", "ff")}
                c["per_state_register_bit"] = {k: round((c[k] - b0[k]) / bits, 2) for k in ("lut", "ff")}
    # the marginal cost of a state: the 5-state pattern over the 3-state one, less the same difference
    # without aggregates — the tuple and measures registers, shared by all states, cancel out
    lo, hi = min(PATTERNS), max(PATTERNS)
    at = {(r["states"], r["aggregates"]): r for r in rows}

    def grow(k: int, fam: str) -> dict:
        return {c: at[(hi, k)][fam][c] - at[(lo, k)][fam][c] for c in ("lut", "ff")}

    for row in rows:
        if row["states"] != hi or not row["aggregates"]:
            continue
        k = row["aggregates"]
        for fam in families:
            g, g0 = grow(k, fam), grow(0, fam)
            row[fam]["marginal_per_state_per_aggregate"] = {
                c: round((g[c] - g0[c]) / ((hi - lo) * k), 1) for c in ("lut", "ff")}
    return rows


def markdown(rows: list[dict], families: list[str]) -> str:
    lines = [
        "# Aggregates: resource cost",
        "",
        f"`make bench-aggregates` (cepc {__version__}): one pattern, MEASURES with 0, 1, 2 and 4 aggregates "
        "(COUNT(*); + MAX(price); + FIRST(time), SUM(volume)), DEFINEs against constants. The NFA core behind "
        "the predicate decoder with its partition payload (state vector + each state's registers) in a register; "
        "Yosys only (no place and route). Per state per aggregate: (cells − cells of the same pattern without "
        "aggregates) ÷ (states × aggregates); per bit: ÷ (states × register bits per state). Payload bits are "
        "also what the table partitioner keeps in block RAM per partition (plus its tag and time stamp).",
        "",
    ]
    for fam in families:
        lines += [f"## {fam.upper()} (`synth_{fam}`)", "",
                  "| states | aggregates | registers per state | payload bits | LUT | FF | carry "
                  "| LUT / state / agg | FF / state / agg | LUT / state / bit | FF / state / bit |",
                  "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            c = r[fam]
            psa, pb = c.get("per_state_per_aggregate"), c.get("per_state_register_bit")
            lines.append(f"| {r['states']} | {r['aggregates']} | {', '.join(r['registers']) or '—'} "
                         f"| {r['payload_bits']} | {c['lut']:,} | {c['ff']:,} | {c['carry']:,} "
                         f"| {psa['lut'] if psa else '—'} | {psa['ff'] if psa else '—'} "
                         f"| {pb['lut'] if pb else '—'} | {pb['ff'] if pb else '—'} |")
        lines.append("")
        lines += [f"Marginal cost of one more state ({max(PATTERNS)} states over {min(PATTERNS)}, less the same "
                  "difference without aggregates; shared tuple and measures registers cancel out):", ""]
        for r in rows:
            mg = r[fam].get("marginal_per_state_per_aggregate")
            if mg:
                lines.append(f"* {r['aggregates']} aggregate(s) ({', '.join(r['registers'])}): {mg['lut']} LUT, "
                             f"{mg['ff']} FF per state per aggregate")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--out", default=str(RESULTS))
    args = p.parse_args()
    families = args.families.split(",")
    rows = measure(families)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "aggregates.json").write_text(json.dumps({"cepc_version": __version__, "results": rows}, indent=2) + "\n")
    (out / "aggregates.md").write_text(markdown(rows, families))
    bad = []
    for fam in families:
        for states in PATTERNS:
            ffs = [r[fam]["ff"] for r in rows if r["states"] == states]
            if ffs != sorted(ffs) or len(set(ffs)) != len(ffs):
                bad.append(f"{fam}, {states} states: flip-flops {ffs} do not grow with the aggregates")
    for b in bad:
        print(f"check failed: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
