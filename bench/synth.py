"""Synthesis benchmark: every example on an ECP5 and an iCE40 board, through `cepc synth`'s flow.

For each example and board: resources (LUTs or logic cells, flip-flops, block
RAM, carry cells), Fmax from nextpnr, whether the issue's target is met (ECP5
≥ 150 MHz on the ULX3S-85F, iCE40 ≥ 50 MHz on the iCEBreaker), and the
tuples per second that Fmax implies (a tuple every other cycle with the
pipeline partitioner). Writes bench/results/synth.json and synth.md and exits
1 if any target is missed or any design does not fit.

    python bench/synth.py [--boards ulx3s-85f,icebreaker] [--examples marathon,network,mshape] [--seeds 1,2]
    python bench/synth.py --hdl both ...   # the VHDL back end beside Amaranth's: synth-hdl.json and .md
    python bench/synth.py --hazards stall ...  # the tables forwarding nothing: synth-stall.json and .md
    python bench/synth.py --partitions 1024 --ways 2 ...  # one size for every row: synth-sized.json and .md
    python bench/synth.py --seeds 1,2,3,4 --jobs 2 ...  # two seeds built at once

With ``--hdl vhdl`` or ``both`` the design is (also) built from the VHDL back end, synthesised by
GHDL (`cepc synth --hdl vhdl`), and the results go to synth-hdl.json and synth-hdl.md, with each
example's VHDL figures as ratios of its Verilog ones where both were run.

nextpnr's placement varies with its seed by 10–20 % on these designs, so one seed is a poor
comparison: with several, a row gives the best seed's figures and lists every seed's Fmax.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cepc import __version__  # noqa: E402
from cepc.cli import _jobs  # noqa: E402  (--jobs as cepc synth takes it: a whole number from 1)
from cepc.errors import CepcError  # noqa: E402
from cepc.hw import sizing  # noqa: E402
from cepc.lang.check import check  # noqa: E402
from cepc.lang.parse import parse_file  # noqa: E402
from cepc.synth import flow  # noqa: E402

EXAMPLES = {"marathon": "examples/marathon/marathon.sql", "network": "examples/network/network.sql",
            "mshape": "examples/mshape/mshape.sql", "finance0": "examples/finance/finance0/finance0.sql",
            "finance2": "examples/finance/finance2/finance2.sql", "finance5": "examples/finance/finance5/finance5.sql"}
TARGETS_MHZ = {"ulx3s-85f": 150.0, "icebreaker": 50.0}  # the issue's targets (the board clock may be higher)


def run_one(example: str, board: str, seed: int, build: Path, partitions: int | None = None,
            router: str = "auto", placer: str = "auto", hdl: str = "verilog", hazards: str = "auto",
            fastest: bool = False, ways: int | None = None, apart: bool = False) -> dict:
    """One build at one seed (``apart``: in a directory of its own, seed-S, so that several run at once)."""
    checked = check(parse_file(ROOT / EXAMPLES[example]))
    out_dir = build / board / (example if hdl == "verilog" else f"{example}-{hdl}")
    opts = flow.SynthOptions(board=board, out_dir=out_dir / f"seed-{seed}" if apart else out_dir,
                             seeds=(seed,), allow_timing_fail=True, pack=False, partitions=partitions, ways=ways,
                             router=router, placer=placer, hdl=hdl, hazards=hazards, fastest=fastest)
    t0 = time.perf_counter()
    steps = []
    try:
        result = flow.synthesize(checked, opts, lambda s: steps.append(s))
    except CepcError as e:
        return {"example": example, "board": board, "hdl": hdl, "error": str(e), "target_mhz": TARGETS_MHZ[board],
                "met": False, "seconds": round(time.perf_counter() - t0, 1)}
    s = result.summary
    res = s["resources"]
    clock = s["clocks"][0]  # the design's (the host link's has a clock of its own)
    link = next((c for c in s["clocks"][1:] if "link_clk" in c["name"]), None)
    return {
        "example": example, "board": board, "hdl": hdl, "device": s["device"],
        "partitioner": s["options"]["partitioner"],
        "partitions": s["options"]["partitions"],
        **({"ways": s["options"]["ways"]} if "ways" in s["options"] else {}),  # (--ways, where a table takes it)
        "hazards": s["options"].get("hazards", "forward"),
        "lut": res["lut"]["used"], "lut_available": res["lut"]["available"], "lut_percent": res["lut"]["percent"],
        "ff": res["ff"]["used"], "bram": res["bram"]["used"], "bram_available": res["bram"]["available"],
        "carry": res["carry"]["used"],
        "fmax_mhz": clock["achieved_mhz"], "clock_mhz": s["options"]["clock_mhz"],
        "target_mhz": TARGETS_MHZ[board], "met": clock["achieved_mhz"] >= TARGETS_MHZ[board],
        "clock_met": clock["met"], "tuples_per_cycle": s["tuples_per_cycle"],
        "link_fmax_mhz": link["achieved_mhz"] if link else None, "link_clock_mhz": s["options"].get("link_clock_mhz"),
        "link_met": link["met"] if link else None,
        "tuples_per_second_at_fmax": s["tuples_per_second_at_fmax"],
        "tuples_per_second_uart": s["tuples_per_second_uart"],
        "critical_path": s["critical_paths"][0]["summary"] if s["critical_paths"] else None,
        "router": s["router"], "tmg_ripup": s.get("tmg_ripup"), "placer": s["placer"],
        # (--freq-max: every build's target and Fmax, the last one's clock the one the bitstream runs at)
        **({"freq_builds": s["freq_builds"], "tuples_per_second_at_clock": s["tuples_per_second_at_clock"]}
           if fastest else {}),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def run_seeds(example: str, board: str, seeds: list[int], build: Path, partitions: int | None = None,
              router: str = "auto", placer: str = "auto", hdl: str = "verilog", hazards: str = "auto",
              fastest: bool = False, ways: int | None = None, jobs: int = 1) -> dict:
    """The best of ``seeds`` (by Fmax), with every seed's Fmax in ``fmax_by_seed`` and its critical
    path in ``critical_path_by_seed`` (a design that misses on most seeds often misses on several
    paths, one per seed). ``jobs``: seeds built at once, each in a directory of its own."""
    def one(seed: int) -> dict:
        return dict(run_one(example, board, seed, build, partitions, router, placer, hdl, hazards, fastest, ways,
                            apart=jobs > 1), seed=seed)

    if jobs > 1:
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # (each build's tools are processes of their own)
            runs = list(pool.map(one, seeds))
    else:
        runs = [one(seed) for seed in seeds]
    best = max(runs, key=lambda r: r.get("fmax_mhz", -1.0))
    best["fmax_by_seed"] = {str(r["seed"]): r.get("fmax_mhz") for r in runs}  # (None: the seed failed)
    if len(runs) > 1:
        best["critical_path_by_seed"] = {str(r["seed"]): r.get("critical_path") for r in runs}
        failed = {str(r["seed"]): r["error"] for r in runs if "error" in r}
        if failed:  # (a design near the device's limit may be placed on some seeds and not others)
            best["errors_by_seed"] = failed
    best["seconds"] = round(sum(r["seconds"] for r in runs), 1)
    return best


# (synth.md is this benchmark's to rewrite; what each round of timing work changed and measured is kept
# apart, so that running it again loses none of that)
ROUNDS = "synth-rounds.md"


def rounds_note(rewritten: str) -> str:
    """The table's link to the log of rounds, naming the files the benchmark rewrites (``rewritten``)."""
    return (f"What each round of timing work changed, the critical paths it read cell by cell and the levers "
            f"it measured and did not keep: [{ROUNDS}]({ROUNDS}), written by hand (this benchmark rewrites only "
            f"{rewritten}).")


def sizing_text(partitions: int | None, ways: int | None) -> str | None:
    """The size every row was built at (``--partitions``, ``--ways``), as cepc synth's options; None: auto's."""
    options = ([f"--partitions {partitions}"] if partitions else []) + ([f"--ways {ways}"] if ways else [])
    return " ".join(options) or None


def partitions_cell(r: dict) -> str:
    """A row's partitions, and a hashed table's entries per bucket where the run asked for them."""
    return f"{r['partitions']} ({r['ways']}-way)" if r.get("ways") else f"{r['partitions']}"


def markdown(rows: list[dict], seed: int | str, sized: str | None = None) -> str:
    """synth.md: every row at the size ``--partitioner auto`` picks, or (synth-sized.md) at ``sized``, cepc
    synth's options for it (:func:`sizing_text`)."""
    size = (f"at the size `{sized}` asks for (rows of their own: synth.md's are at `--partitioner auto`'s size)" if sized else
            "on the partitioner and size `--partitioner auto` picks for the board's device")
    note = rounds_note("synth-sized.md and .json here" if sized else "this file and synth.json")
    lines = [
        "# Synthesis",
        "",
        f"`make bench-synth` (cepc {__version__}): every example through `cepc synth`'s flow (Yosys, nextpnr with "
        f"one thread and seed {seed} (the best of several, where a row lists them), router1 (`--router auto`; `, router2` marks a row routed by router2 with `{' '.join(flow.router_options('router2')[2:])}`); the placer `--placer auto` picks), {size}, at the board's clock. Targets (the issue's): "
        "Fmax ≥ 150 MHz on the ECP5-85F, ≥ 50 MHz on the iCE40UP5K. LUT: ECP5 LUT4s (TRELLIS_COMB), iCE40 logic "
        "cells; carry: CCU2C / SB_CARRY cells. Tuples/s: Fmax × tuples per cycle (½ with the pipeline partitioner, "
        "⅓ with its one element as `--slot-period auto` builds it). "
        "UART: what the 3 Mbaud host link carries. Link: the host link's own clock, Fmax of target (its "
        "domain is apart from the design's). Commit: what a row was measured at, where rows were merged from "
        "several runs.",
        "",
        "| example | board | partitions | LUT | FF | BRAM | carry | Fmax MHz | target | met | tuples/s at Fmax "
        "| UART tuples/s | link MHz | P&R s | commit |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['example']} | {r['board']} | | | | | | | {r['target_mhz']:g} | **no**: {r['error']} "
                         f"| | | | {r['seconds']} | {r.get('commit', '')} |")
            continue
        fmax = f"{r['fmax_mhz']:.1f}"
        if r.get("router") == "router2":  # (the default, --router auto, is router1 on every device)
            fmax += ", router2"
        if r.get("placer", "heap") != "heap":
            fmax += f", {r['placer']} placer"
        link = f"{r['link_fmax_mhz']:.0f} of {r['link_clock_mhz']:g}" if r.get("link_fmax_mhz") else ""
        if len(r.get("fmax_by_seed", {})) > 1:  # every seed's, the best first
            fmax += " (" + ", ".join(f"seed {k}: " + (f"{v:.1f}" if v is not None else "failed")
                                     for k, v in r["fmax_by_seed"].items()) + ")"
        lines.append(
            f"| {r['example']} | {r['board']} ({r['device']}) | {partitions_cell(r)} | {r['lut']:,} ({r['lut_percent']:.0f}%) "
            f"| {r['ff']:,} | {r['bram']} | {r['carry']} | {fmax} | {r['target_mhz']:g} "
            f"| {'yes' if r['met'] else '**no**'} | {r['tuples_per_second_at_fmax'] / 1e6:.1f} M "
            f"| {r['tuples_per_second_uart']:,} | {link} | {r['seconds']} | {r.get('commit', '')} |")
    return "\n".join(lines + critical_paths(rows) + ["", note]) + "\n"


def critical_paths(rows: list[dict], hdl: bool = False) -> list[str]:
    """The markdown list of the rows' critical paths (``hdl``: each labelled with the HDL it was built from)."""
    return ["", "Critical paths (nextpnr):", ""] + [
        f"* {r['example']} on {r['board']}{', ' + r['hdl'] if hdl else ''}: {r['critical_path']}"
        for r in rows if r.get("critical_path")]


def hdl_markdown(rows: list[dict], seed: int | str) -> str:
    """The VHDL back end's rows beside the Verilog ones of the same example and board: ratios."""
    lines = [
        "# Synthesis of the VHDL back end",
        "",
        f"`python bench/synth.py --hdl both` (cepc {__version__}): each example built from Amaranth's design "
        f"(Verilog) and from the VHDL back end's (`cepc synth --hdl vhdl`: GHDL synthesises the VHDL into a "
        f"Verilog netlist, and Yosys maps that as it maps the Amaranth design's RTLIL), inside the same host "
        f"link, with the same partitioner and size, router and placer options, at nextpnr seed {seed} (the best "
        f"of several, where they are listed). Ratios: VHDL / Verilog.",
        "",
        "| example | board | partitions | LUT Verilog | LUT VHDL | ratio | FF Verilog | FF VHDL | ratio "
        "| BRAM Verilog | BRAM VHDL | Fmax Verilog | Fmax VHDL | ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    pairs = {}
    for r in rows:
        pairs.setdefault((r["example"], r["board"]), {})[r["hdl"]] = r

    def ratio(a, b):
        return f"{b / a:.2f}×" if a and b is not None else ""

    for (example, board), by in pairs.items():
        v, h = by.get("verilog", {}), by.get("vhdl", {})
        if "error" in h or "error" in v:
            errors = "; ".join(f"{k}: {r['error']}" for k, r in by.items() if "error" in r)
            lut = f"{v['lut']:,}" if "lut" in v else ""
            ff = f"{v['ff']:,}" if "ff" in v else ""
            fmax = f"{v['fmax_mhz']:.1f}" if "fmax_mhz" in v else ""
            lines.append(f"| {example} | {board} | {v.get('partitions', '')} | {lut} | | | {ff} | | | {v.get('bram', '')} "
                         f"| | {fmax} | **{errors}** | |")
            continue
        lines.append(
            f"| {example} | {board} | {h.get('partitions', v.get('partitions', ''))} "
            f"| {v.get('lut', 0):,} | {h.get('lut', 0):,} | {ratio(v.get('lut'), h.get('lut'))} "
            f"| {v.get('ff', 0):,} | {h.get('ff', 0):,} | {ratio(v.get('ff'), h.get('ff'))} "
            f"| {v.get('bram', '')} | {h.get('bram', '')} "
            f"| {v.get('fmax_mhz', 0):.1f} | {h.get('fmax_mhz', 0):.1f} | {ratio(v.get('fmax_mhz'), h.get('fmax_mhz'))} |")
    return "\n".join(lines + critical_paths(rows, hdl=True)) + "\n"


def freq_max_markdown(rows: list[dict], seed: int | str) -> str:
    """--freq-max: the clock each example meets on each board, as `cepc synth --freq max` finds it."""
    lines = [
        "# Synthesis: the fastest clock each example meets (`--freq max`)",
        "",
        f"`python bench/synth.py --freq-max` (cepc {__version__}): `cepc synth --freq max`'s flow, seed {seed}: built "
        "at the board's clock, then, while the design's clock misses, again at the fastest clock the PLL makes at "
        f"least {flow.FASTEST_MARGIN:.0%} below what the last build reached ({flow.FASTEST_BUILDS} builds at most). "
        "Clock: the last build's, the one the bitstream runs at; tuples/s at it. Target: the issue's, against the "
        "last build's Fmax.",
        "",
        "| example | board | partitions | builds: target MHz → Fmax | clock MHz | met at it | tuples/s at it "
        "| issue's target | flow s |",
        "|---|---|---:|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['example']} | {r['board']} | | **no**: {r['error']} | | | | {r['target_mhz']:g} "
                         f"| {r['seconds']} |")
            continue
        builds = ", ".join(f"{b['target_mhz']:g} → {b['achieved_mhz']:.1f}" for b in r["freq_builds"])
        lines.append(f"| {r['example']} | {r['board']} | {r['partitions']} | {builds} | {r['clock_mhz']:g} "
                     f"| {'yes' if r['clock_met'] else '**no**'} | {r['tuples_per_second_at_clock']:,.0f} "
                     f"| {r['target_mhz']:g}: {'met' if r['met'] else '**missed**'} | {r['seconds']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boards", default=",".join(TARGETS_MHZ))
    p.add_argument("--examples", default=",".join(EXAMPLES))
    p.add_argument("--seeds", default="1", help="nextpnr seeds to try, comma-separated (each row: the best)")
    p.add_argument("--jobs", type=_jobs, default=1, help="seeds built at once, each in BUILD/BOARD/EXAMPLE/seed-S "
                   "(the same rows; the seconds each row gives are summed over its seeds, as one at a time)")
    p.add_argument("--partitions", type=int, help="partitions per query for every row (default: what "
                   "--partitioner auto picks for the board's device), to compare designs at one size; "
                   "written to synth-sized.json and .md")
    p.add_argument("--ways", type=int, choices=sizing.WAYS,
                   help="a hashed table's entries per bucket for every row, as cepc synth --ways (default: auto); "
                        "written to synth-sized.json and .md")
    p.add_argument("--router", choices=flow.ROUTER_CHOICES, default="auto",
                   help="nextpnr's router, as cepc synth --router (default: auto)")
    p.add_argument("--placer", choices=flow.PLACER_CHOICES, default="auto",
                   help="nextpnr's placer, as cepc synth --placer (default: auto)")
    p.add_argument("--hdl", choices=["verilog", "vhdl", "both"], default="verilog",
                   help="the design from Amaranth (verilog), the VHDL back end (vhdl) or each in turn (both); "
                        "vhdl and both write synth-hdl.json and .md (default: verilog)")
    p.add_argument("--hazards", choices=["auto", "forward", "stall"], default="auto",
                   help="the tables' writes in flight, as cepc synth --hazards (default: auto)")
    p.add_argument("--freq-max", action="store_true",
                   help="as cepc synth --freq max: each row the fastest clock the design meets, in "
                        "synth-freq-max.json and .md")
    p.add_argument("--build", default=str(ROOT / "build" / "bench-synth"))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args()
    seeds = [int(x) for x in args.seeds.split(",")]
    hdls = ["verilog", "vhdl"] if args.hdl == "both" else [args.hdl]
    rows = []
    for board in args.boards.split(","):
        for example in args.examples.split(","):
            for hdl in hdls:
                print(f"== {example} on {board} ({hdl})", file=sys.stderr, flush=True)
                row = run_seeds(example, board, seeds, Path(args.build), args.partitions, args.router, args.placer,
                                hdl, args.hazards, args.freq_max, args.ways, jobs=args.jobs)
                print(json.dumps(row), file=sys.stderr, flush=True)
                rows.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # (--hazards stall, --partitions, --ways: rows of their own, beside the default's)
    sized = sizing_text(args.partitions, args.ways)
    name = ("synth" if args.hdl == "verilog" else "synth-hdl") + ("-stall" if args.hazards == "stall" else "") + \
        ("-sized" if sized else "") + ("-freq-max" if args.freq_max else "")
    (out / f"{name}.json").write_text(json.dumps({"cepc_version": __version__, "seeds": seeds, "results": rows},
                                                 indent=2) + "\n")
    (out / f"{name}.md").write_text(freq_max_markdown(rows, args.seeds) if args.freq_max else
                                    markdown(rows, args.seeds, sized) if args.hdl == "verilog"
                                    else hdl_markdown(rows, args.seeds))
    missed = [r for r in rows if not r["met"]]
    for r in missed:
        why = r.get("error") or f"Fmax {r['fmax_mhz']:.1f} MHz < {r['target_mhz']:g} MHz"
        print(f"target missed: {r['example']} on {r['board']}: {why}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
