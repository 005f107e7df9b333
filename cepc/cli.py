"""The ``cepc`` command line (SPEC §5): parses arguments, calls the stages, prints."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import __version__
from .errors import CepcError, ToolError, UsageError
from .hw.devices import DEFAULT_DEVICE, DEVICES
from .plan import DEFAULT_MAX_LENGTH
from .synth.flow import PLACER_CHOICES, ROUTER_CHOICES, STATIC_FF_SHARE

UPDATE_CYCLES = ("auto", "1", "2", "3")  # --update-cycles (cepc.hw.top.update_cycles_for)
WAYS = ("auto", "4", "2", "1")  # --ways (cepc.hw.sizing.choose)
HAZARDS = ("auto", "forward", "stall")  # --hazards (cepc.hw.top.hazards_for)


def _load(path: str):
    """Parse and check a query file, printing its warnings to stderr."""
    from .lang.check import check
    from .lang.parse import parse_file

    checked = check(parse_file(path))
    for w in checked.warnings:
        print(w.format(), file=sys.stderr)
    return checked


P_COUNTERS = ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow", "rx_frames",
              "rx_crc_errors", "rx_rejected", "tx_frames")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}{'es' if word.endswith(('s', 'ch')) else 's'}"


# --- subcommands -----------------------------------------------------------------------


def cmd_check(args) -> int:
    from .lang import ast
    from .nfa import wiring

    checked = _load(args.query)
    s = checked.stream
    bits = s.width
    nbytes = (bits + 7) // 8
    print(f"{args.query}: stream {s.name}: {_plural(len(s.fields), 'field')}, {_plural(bits, 'bit')} per tuple "
          f"({_plural(nbytes, 'byte')} on the wire)")
    for f in s.fields:
        print(f"  {f.name:<16} {str(f.type):<24} {f.type.width:>3} bits")
    for q in checked.queries:
        nfa = wiring.build(q)
        clauses = []
        if q.partition_by:
            clauses.append("PARTITION BY " + ", ".join(q.partition_by))
        clauses.append("AFTER MATCH " + q.after_match.upper())
        if q.within is not None:
            clauses.append(f"WITHIN {q.within}")
        print(f"query {q.name}: " + ", ".join(clauses))
        print(f"  pattern     ( {ast.format_pattern(q.pattern)} )")
        print(f"  NFA         {nfa.n_states} states, {nfa.n_edges} edges, {len(nfa.start)} start, "
              f"{len(nfa.accept)} accepting")
        print(f"  predicates  {nfa.n_preds}: {' '.join(nfa.preds) or '(none)'}")
        if q.order_by:
            print(f"  time field  {q.order_by}")
        if q.measures:
            print(f"  measures    {', '.join(m.alias for m in q.measures)}")
    return 0


def cmd_graph(args) -> int:
    from .nfa import wiring

    checked = _load(args.query)
    queries = [q for q in checked.queries if args.name is None or q.name == args.name]
    if not queries:
        raise UsageError(f"no query named {args.name!r}; the file has " + ", ".join(q.name for q in checked.queries))
    dot = wiring.to_dot([wiring.build(q) for q in queries])
    out = Path(args.output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt in ("dot", "gv"):
        out.write_text(dot)
        return 0
    if fmt not in ("svg", "png", "pdf"):
        raise UsageError(f"graph output must end in .dot, .svg, .png or .pdf, not {out.name!r}")
    exe = shutil.which("dot")
    if exe is None:
        raise ToolError("graphviz 'dot' is not installed (make setup installs it: apt-get install graphviz); "
                        "write a .dot file instead")
    cmd = [exe, f"-T{fmt}", "-o", str(out)]
    proc = subprocess.run(cmd, input=dot, text=True, capture_output=True)
    if proc.returncode != 0:
        raise ToolError("graphviz failed to draw the NFA", cmd, proc.stderr[-2000:])
    return 0


def cmd_match(args) -> int:
    from . import events
    from .nfa import reference

    checked = _load(args.query)
    t0 = time.perf_counter()
    frame = events.load_events(args.events, checked.stream)
    events.check_order(frame, checked, args.events)
    t1 = time.perf_counter()
    matches = reference.Matcher(checked).run(frame)
    t2 = time.perf_counter()
    events.write_matches(args.output, checked, events.match_rows(checked, frame, matches))
    rate = len(frame) / (t2 - t1) if t2 > t1 else float("inf")
    print(f"{_plural(len(frame), 'event')}, {_plural(len(matches), 'match')} → {args.output} "
          f"(load {t1 - t0:.2f} s, match {t2 - t1:.2f} s, {rate:,.0f} events/s)", file=sys.stderr)
    return 0


def cmd_compile(args) -> int:
    from .emit import emit
    from .emit.vhdl import is_identifier, unsupported
    from .hw import sizing
    from .hw.top import Top, check_options
    from .nfa import powerset
    from .nfa.lower import lower

    hdl = args.hdl or {".v": "verilog", ".il": "rtlil", ".rtlil": "rtlil", ".vhd": "vhdl",
                       ".vhdl": "vhdl"}.get(Path(args.output).suffix.lower(), "verilog")
    if hdl == "vhdl" and not is_identifier(args.top):
        raise UsageError(f"--top must be a VHDL identifier, not {args.top!r}")
    if not args.top.isidentifier():
        raise UsageError(f"--top must be a Verilog identifier, not {args.top!r}")
    try:
        check_options(args.bus_width, args.partitions if args.partitions is not None else 1, "table",
                      args.evict_after)
    except ValueError as e:
        raise UsageError(str(e)) from None
    t0 = time.perf_counter()
    checked = _load(args.query)
    try:
        design = lower(checked, args.max_match_length)
        if args.automaton == "dfa":
            design = powerset.design_dfa(design, args.dfa_encoding)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.no_decoder and args.automaton == "dfa":
        raise UsageError("--no-decoder applies to the NFA; a DFA reads the shared decoder's predicate vector")
    if hdl == "vhdl" and unsupported(design, not args.no_decoder):
        raise UsageError(unsupported(design, not args.no_decoder))
    device = sizing.DEVICES[args.device]
    try:
        choice = sizing.choose(design, device, args.partitioner, args.partitions, evict=bool(args.evict_after),
                               ways=_ways(args.ways))
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(sizing.describe(choice, device, design), file=sys.stderr)
    cycles = _update_cycles(design, choice.partitioner, args.update_cycles)
    hazards = _hazards(choice.partitioner, args.hazards)
    top = Top(design, bus_width=args.bus_width, partitions=choice.partitions, partitioner=choice.partitioner,
              evict_after=args.evict_after, ways=choice.ways, decoder=not args.no_decoder, update_cycles=cycles,
              hazards=hazards)
    options = {"bus_width": args.bus_width, "partitions": choice.partitions, "partitioner": choice.partitioner,
               "device": args.device, "automaton": args.automaton}
    if args.automaton == "dfa":
        options["dfa_encoding"] = args.dfa_encoding
        for q in design.queries:
            print(f"query {q.name}: DFA of {q.dfa.n_states} states ({q.nfa.n_states} NFA states), "
                  f"{q.dfa.encoding} in {q.dfa.width} bits", file=sys.stderr)
    if args.no_decoder:
        options["decoder"] = False
    if args.evict_after:
        options["evict_after"] = args.evict_after
    if _ways(args.ways):
        options["ways"] = choice.ways
    if args.max_match_length:
        options["max_match_length"] = args.max_match_length
    side = emit(design, top, Path(args.output), hdl, args.top, options)
    rate = "one tuple every other cycle" if top.pipelined else "one tuple per cycle"
    if top.hazards == "stall":
        rate += (f" (--hazards stall: a tuple waits while a key of its bucket is among the {top.stall_spacing} "
                 "before it)")
    elif top.update_cycles == 2:
        rate += " (two-cycle update: a tuple of the bucket of the one before waits a cycle)"
    elif top.update_cycles == 3:
        rate += " (three-cycle update: a tuple of the bucket of either of the two before waits)"
    print(f"{args.output}: {hdl}, top {args.top}, {len(design.queries)} quer{'y' if len(design.queries) == 1 else 'ies'}, "
          f"{choice.partitions} partitions ({choice.partitioner}), {args.bus_width}-bit input, {rate}, "
          f"latency {top.latency} cycles; layout in {side} ({time.perf_counter() - t0:.2f} s)", file=sys.stderr)
    return 0


def cmd_golden(args) -> int:
    from .golden import spark

    checked = _load(args.query)
    print(f"starting Spark ({args.master}) …", file=sys.stderr)
    stats = spark.golden(checked, args.events, args.output, master=args.master)
    rate = stats.events / stats.seconds if stats.seconds else float("inf")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in (stats.phases or {}).items())
    print(f"{_plural(stats.events, 'event')}, {_plural(stats.matches, 'match')} → {args.output} "
          f"(Spark {stats.seconds:.1f} s: {phases}; {rate:,.0f} events/s)", file=sys.stderr)
    return 0


def cmd_sim(args) -> int:
    from .simulate import main_sim

    return main_sim(args)


def _freq(text: str) -> float | str:
    """--freq: MHz, or ``max``."""
    if text.strip().lower() == "max":
        return "max"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a clock in MHz or max, not {text!r}") from None


def _jobs(text: str) -> int:
    """--jobs: seeds placed and routed at once, a whole number from 1."""
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"a whole number from 1, not {text!r}")
    return jobs


def _seeds(text: str) -> tuple[int, ...]:
    """--seed: a seed, or several (``1,2,3``, ``1-5``, ``1-3,7``), each tried once, in order."""
    seeds = []
    for part in text.split(","):
        bounds = part.strip().split("-")
        try:
            low, high = int(bounds[0]), int(bounds[-1])
        except ValueError:
            low = high = None
        if low is None or len(bounds) > 2 or low < 0 or high < low:
            raise argparse.ArgumentTypeError(f"a seed (a whole number from 0), or seeds such as 1,2,3 or 1-5, "
                                             f"not {text!r}")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return tuple(seeds)


def cmd_synth(args) -> int:
    import json

    from rich.console import Console

    from .synth import flow

    console = Console(stderr=True)
    checked = _load(args.query)
    fastest = args.freq == "max"
    opts = flow.SynthOptions(board=args.board, out_dir=Path(args.output) if args.output else None,
                             freq_mhz=None if fastest else args.freq, fastest=fastest,
                             baud=args.baud, partitioner=args.partitioner, partitions=args.partitions,
                             ways=_ways(args.ways), evict_after=args.evict_after,
                             max_length=args.max_match_length, seeds=args.seed, jobs=args.jobs, router=args.router, placer=args.placer,
                             allow_timing_fail=args.allow_timing_fail, update_cycles=args.update_cycles,
                             hazards=args.hazards, hdl=args.hdl, slot_period=args.slot_period)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if len(args.seed) > 1 and args.jobs == 1 and cores > 1:
        n = min(cores, len(args.seed))
        console.print(f"note: {len(args.seed)} seeds one at a time; --jobs {n} would place and route {n} at once on "
                      f"this machine's {cores} cores", highlight=False, soft_wrap=True)
    t0 = time.perf_counter()
    with console.status(f"synthesising {args.query} for {args.board}") as status:
        def progress(step):
            if step.startswith(("note:", "partitioner:")):  # (kept whole: scripts and tests search for it)
                console.print(step, highlight=False, soft_wrap=True)
            status.update(f"{args.board}: {step} [{time.perf_counter() - t0:.0f} s]")
        result = flow.synthesize(checked, opts, progress)
    summary = result.summary
    if args.report:
        Path(args.report).write_text(json.dumps(summary, indent=2) + "\n")
    _print_synth(console, summary, args)
    flow.check_timing(result)
    return 0


def _print_synth(console, s: dict, args) -> None:
    o = s["options"]
    console.print(f"{s['board']} ({s['device']} {s['package']}): {s['query']}, {o['partitions']} partitions, "
                  f"clock {o['clock_mhz']:g} MHz (host link {o.get('link_clock_mhz', o['clock_mhz']):g} MHz), "
                  f"UART {o['baud']:,} baud (÷{o['baud_divisor']})", highlight=False)
    names = {"lut": "LUTs" if s["family"] == "ecp5" else "logic cells", "ff": "flip-flops", "bram": "block RAM",
             "carry": "carry cells", "lutram": "LUT RAM", "dsp": "DSP", "io": "I/O", "pll": "PLL", "spram": "SPRAM"}
    for key, name in names.items():
        r = s["resources"].get(key)
        if r is None or (r["used"] == 0 and key in ("dsp", "lutram", "spram")):
            continue
        pct = f" of {r['available']:,} ({r['percent']:.1f}%)" if r["available"] else ""
        console.print(f"  {name:<12} {r['used']:>7,}{pct}", highlight=False)
    for c in s["clocks"]:
        verdict = "[green]met[/green]" if c["met"] else "[red]MISSED[/red]"
        console.print(f"  Fmax {c['name']}: {c['achieved_mhz']:.1f} MHz, target {c['target_mhz']:g} MHz: {verdict}")
    if s.get("endpoints"):  # (every endpoint that misses the design's clock, by register)
        console.print(f"  {s['endpoints']['summary']}", highlight=False)
        for line in s["endpoints"].get("paths", ()):  # (the worst path into each of the worst registers)
            console.print(f"    {line}", highlight=False)
    per_cycle = s["tuples_per_cycle"]  # (1, ½ or ⅓: a tuple every cycle, every other or every third)
    rate = f"{per_cycle:g} tuple/cycle" if per_cycle >= 0.5 else f"1 tuple / {round(1 / per_cycle)} cycles"
    console.print(f"  {rate}: {s['tuples_per_second_at_fmax'] or 0:,} tuples/s at Fmax, "
                  f"{s['tuples_per_second_at_clock']:,} at the clock; the UART carries {s['tuples_per_second_uart']:,}",
                  highlight=False)
    if s.get("seeds"):
        from .synth.flow import seeds_text
        console.print(f"  nextpnr seeds {seeds_text(s['seeds'], o['seed'])}", highlight=False)
    if s["bitstream"]:
        builds = s.get("freq_builds") or [{"seconds": sum(s["seconds"].values())}]  # (--freq max: every build's)
        console.print(f"bitstream {s['bitstream']} ({sum(b['seconds'] for b in builds):.0f} s)"
                      + (f"; report {args.report}" if args.report else ""), highlight=False)


def cmd_run(args) -> int:
    from rich.console import Console

    from . import events, host
    from .simulate import compare, decode_record, record_rows

    console = Console(stderr=True)
    checked = _load(args.query)
    frame = events.load_events(args.events, checked.stream)
    events.check_order(frame, checked, args.events)
    design, design_id, record_bytes = host.design_of(checked, args.max_match_length)
    payloads = [design.tuple.to_bytes(r) for r in frame.to_dict("records")]
    opts = host.RunOptions(port=args.port, baud=args.baud, timeout=args.timeout, retry=args.retry,
                           frame_bytes=args.frame_bytes)
    with console.status(f"{args.port}: connecting") as status:
        result = host.run(payloads, design.tuple.nbytes, record_bytes, design_id, opts,
                          lambda s: status.update(f"{args.port}: {s}"))
    rows = record_rows(checked, design, [decode_record(design, w) for w in result.records])
    events.write_matches(args.output, checked, rows)
    c, h = result.status.counters, result.host
    rate = len(frame) / result.seconds if result.seconds else float("inf")
    print(f"{len(frame)} tuples, {len(rows)} matches → {args.output} ({result.seconds:.1f} s, {rate:,.0f} tuples/s); "
          "board: " + ", ".join(f"{k} {c[k]}" for k in P_COUNTERS) +
          f"; host: {h['frames']} frames, {h['sent']} sent, {h['retransmitted']} sent again, "
          f"{h['bad']} bad frames received, {h['lost']} lost", file=sys.stderr)
    incomplete = []
    if c["tuples_in"] != len(frame):
        incomplete.append(f"the board took {c['tuples_in']} of {len(frame)} tuples")
    if c["matches_out"] != len(result.records):
        incomplete.append(f"the board sent {c['matches_out']} records, {len(result.records)} arrived")
    if c["dropped"] != len(result.spilled):
        incomplete.append(f"the board spilled {c['dropped']} tuples, {len(result.spilled)} arrived")
    if incomplete:
        print("error: the result is incomplete: " + "; ".join(incomplete), file=sys.stderr)
        return 1
    if c["dropped"]:
        print(f"warning: {c['dropped']} tuples did not fit the partitioner (spilled); results are not exact — "
              f"synthesise with more --partitions", file=sys.stderr)
    if args.compare:
        keys, measures = events.match_columns(checked)
        report = compare(keys + ["seq", "query"] + measures, rows, Path(args.compare), frame)
        if report:
            print(report, file=sys.stderr)
            return 1
        print(f"identical to {args.compare}", file=sys.stderr)
    return 0


def cmd_gen(args) -> int:
    from . import gen

    checked = _load(args.query)
    model = gen.choose_model(checked, args.model)
    frame = gen.generate(checked, args.n, args.keys, args.seed, skew=args.skew, noise=args.noise, model=model)
    gen.write_events(frame, args.output)
    print(f"{len(frame)} events over {args.keys} keys ({model} model) → {args.output}", file=sys.stderr)
    return 0


# --- argument parsing ----------------------------------------------------------------------


def _ways(asked: str) -> int | None:
    """--ways as sizing.choose takes it (None: auto)."""
    return None if asked == "auto" else int(asked)


def _update_cycles(design, partitioner: str, asked: str) -> int:
    """--update-cycles as the top takes it (the same for every HDL)."""
    from .hw.top import update_cycles_for

    if asked in ("2", "3") and partitioner != "table":
        raise UsageError(f"--update-cycles {asked} is the table partitioner's (--partitioner table)")
    return update_cycles_for(design, partitioner, asked)


def _hazards(partitioner: str, asked: str) -> str:
    """--hazards as the top takes it (the same for every HDL)."""
    from .hw.top import hazards_for

    if asked == "stall" and partitioner != "table":
        raise UsageError("--hazards stall is the table partitioner's (--partitioner table)")
    return hazards_for(asked)


def _partition_options(c) -> None:
    c.add_argument("--partitioner", choices=["auto", "table", "pipeline"], default="auto",
                   help="stream partitioner: table (block RAM, one tuple per cycle) or pipeline (Woods et al. §6, "
                        "one tuple every other cycle); auto picks the table wherever it fits --device, and says so "
                        "(default: auto)")
    c.add_argument("--partitions", type=int, metavar="N",
                   help="concurrent partitions per query (default: auto; the pipeline's default is 16)")
    c.add_argument("--device", choices=sorted(DEVICES), default=DEFAULT_DEVICE,
                   help=f"target device, for sizing the partition tables (default: {DEFAULT_DEVICE})")
    c.add_argument("--ways", choices=WAYS, default="auto",
                   help="entries per bucket of a hashed table, searched in parallel: fewer ways, less logic per "
                        "lookup and a faster clock, but a bucket fills sooner (its key's tuples are then dropped); "
                        "auto: 4, fewer where wide entries fit more partitions that way (default: auto)")
    c.add_argument("--update-cycles", choices=UPDATE_CYCLES, default="auto",
                   help="cycles a key's update takes in the table: 1, or 2 (its lookup and the update each "
                        "get a cycle, for a faster clock; a tuple whose key shares a bucket with the tuple "
                        "just before it waits a cycle), or 3 (the conditions of the key's state a cycle of "
                        "their own: a smaller design, a faster clock; a tuple of the bucket of either of the two "
                        "before it waits); auto: 3 with the table for keyed queries with "
                        "partial-match registers, 1 otherwise (default: auto)")
    c.add_argument("--hazards", choices=HAZARDS, default="auto",
                   help="how the table gives a key the update of a tuple of its bucket still in flight: forward "
                        "(from the writes in flight: a tuple every cycle, whatever its key) or stall (the tuple "
                        "waits until block RAM has the update: no forwarding logic, a smaller design with wide "
                        "partial matches; a run of one key takes a tuple per 8 cycles, 9 with the two-cycle "
                        "update, 10 with the three-cycle one; distinct keys still one a cycle); auto: forward "
                        "(default: auto)")


def _automaton_options(c) -> None:
    c.add_argument("--automaton", choices=["nfa", "dfa"], default="nfa",
                   help="nfa: the wiring NFA, one flip-flop per predicate occurrence (Woods et al. §4.5); dfa: its "
                        "powerset construction, for comparison (state explosion, §4.2; no aggregates, MEASURES or "
                        "WITHIN) (default: nfa)")
    c.add_argument("--dfa-encoding", choices=["onehot", "binary"], default="onehot",
                   help="state encoding of --automaton dfa: one flip-flop per DFA state, or a binary state number "
                        "(default: onehot)")
    c.add_argument("--no-decoder", action="store_true",
                   help="evaluate each NFA state's predicate on its own instead of in the shared predicate decoder "
                        "(Woods et al. Fig. 12; for comparison)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cepc", description="Compile complex-event-processing pattern queries "
                                "into FPGA hardware.")
    p.add_argument("--version", action="version", version=f"cepc {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    c = sub.add_parser("check", help="parse and check a query file, print a summary")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.set_defaults(func=cmd_check)

    c = sub.add_parser("graph", help="draw the NFA of each query (.dot, .svg, .png, .pdf)")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="output file; its suffix picks the format")
    c.add_argument("--query", dest="name", metavar="NAME", help="draw only this query (default: all)")
    c.set_defaults(func=cmd_graph)

    c = sub.add_parser("match", help="run the reference matcher in-process (no Spark) and write matches")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("--events", metavar="E", required=True, help="events file (.csv or .parquet)")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="match file to write (.csv)")
    c.set_defaults(func=cmd_match)

    c = sub.add_parser("compile", help="compile a query file to hardware (Verilog, VHDL, RTLIL)")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="HDL file to write; a .json sidecar with the wire formats goes beside it")
    c.add_argument("--hdl", choices=["verilog", "vhdl", "rtlil"],
                   help="output language (default: from the suffix of -o, else verilog)")
    _partition_options(c)
    c.add_argument("--bus-width", type=int, metavar="W", default=64,
                   help="input bus width in bits, a multiple of 8 from 8 to 512 (default: 64)")
    c.add_argument("--evict-after", type=int, metavar="CYCLES",
                   help="free a partition's element at most CYCLES after it was allocated, counted in `evicted` "
                        "(default: never; loses partial matches older than that)")
    c.add_argument("--max-match-length", type=int, metavar="L",
                   help="longest match a query with aggregates, MEASURES or WITHIN tracks when its pattern is "
                        "unbounded: sizes COUNT and SUM registers; longer partial matches are dropped and counted "
                        f"in `overflow` (default: {DEFAULT_MAX_LENGTH})")
    _automaton_options(c)
    c.add_argument("--top", metavar="NAME", default="cepc_top", help="name of the top module (default: cepc_top)")
    c.set_defaults(func=cmd_compile)

    c = sub.add_parser("golden", help="compute the golden match file on Spark")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("--events", metavar="E", required=True,
                   help="events: a .csv or .parquet file, or a directory of them (taken in name order)")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="match file to write (.csv)")
    c.add_argument("--master", metavar="URL", default="local[*]",
                   help="Spark master (default: local[*], embedded; spark://host:7077 for a cluster)")
    c.set_defaults(func=cmd_golden)

    c = sub.add_parser("sim", help="simulate the compiled design on an events file (cocotb + Verilator or GHDL)")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("--events", metavar="E", required=True, help="events file (.csv or .parquet)")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="match file to write (.csv)")
    c.add_argument("--compare", metavar="FILE", help="match file to compare with (exit 1 and show the first difference)")
    c.add_argument("--simulator", choices=["verilator", "ghdl"], default="verilator",
                   help="HDL simulator: verilator runs the Verilog, ghdl the VHDL (default: verilator)")
    c.add_argument("--waves", metavar="W.fst", help="write an FST waveform")
    _partition_options(c)
    c.add_argument("--bus-width", type=int, metavar="W", default=64, help="input bus width in bits (default: 64)")
    c.add_argument("--evict-after", type=int, metavar="CYCLES", help="as for compile (default: never)")
    c.add_argument("--max-match-length", type=int, metavar="L",
                   help=f"as for compile (default: {DEFAULT_MAX_LENGTH})")
    _automaton_options(c)
    c.add_argument("--packet-tuples", type=int, metavar="T", default=64,
                   help="tuples per AXI-Stream packet (default: 64)")
    c.add_argument("--stall", type=float, metavar="P", default=0.0,
                   help="probability of a gap in s_tvalid each cycle (default: 0)")
    c.add_argument("--backpressure", type=float, metavar="P", default=0.0,
                   help="probability that m_tready/spill_tready is low each cycle (default: 0)")
    c.add_argument("--seed", type=int, metavar="S", default=0, help="seed of the random gaps (default: 0)")
    c.set_defaults(func=cmd_sim)

    c = sub.add_parser("synth", help="synthesise for a board (Yosys, nextpnr, bitstream; all from PyPI)")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("--board", metavar="NAME", required=True,
                   help="ulx3s-85f, ulx3s-45f, ulx3s-25f, ulx3s-12f, icebreaker, colorlight-5a-75b")
    c.add_argument("-o", "--output", metavar="DIR", help="build directory (default: build/synth/BOARD)")
    c.add_argument("--report", metavar="R.json", help="also write the report (resources, Fmax, timing) here")
    c.add_argument("--freq", type=_freq, metavar="MHZ|max",
                   help="clock the PLL makes, the timing target (default: the board's, 150 on ECP5, 51 on iCE40); "
                        "max: the board's, then, while the design misses it, built again at the fastest clock the "
                        "PLL makes at least 3%% below what it reached (3 builds at most)")
    c.add_argument("--baud", type=int, metavar="B", help="host link baud rate (default: the board's, 3000000 "
                   "on boards with an FTDI)")
    c.add_argument("--partitioner", choices=["auto", "table", "pipeline"], default="auto",
                   help="as for compile; auto sizes the table for the board's device (default: auto)")
    c.add_argument("--partitions", type=int, metavar="N",
                   help="concurrent partitions per query (default: auto for the table; the board's for the "
                        "pipeline, 256 on ULX3S-85F, 16 on iCEBreaker)")
    c.add_argument("--ways", choices=WAYS, default="auto", help="as for compile (default: auto)")
    c.add_argument("--evict-after", type=int, metavar="CYCLES", help="as for compile (default: never)")
    c.add_argument("--max-match-length", type=int, metavar="L", help="as for compile")
    c.add_argument("--update-cycles", choices=UPDATE_CYCLES, default="auto", help="as for compile (default: auto)")
    c.add_argument("--hazards", choices=HAZARDS, default="auto", help="as for compile (default: auto)")
    c.add_argument("--slot-period", choices=("auto", "2", "3"), default="auto",
                   help="Woods' pipeline of one element (--partitioner pipeline --partitions 1): a tuple every 2 "
                        "cycles, or every 3, its conditions' compares and their join then a cycle each; auto: 3 "
                        "for such a pipeline whose keyed query compares the tuple with its partial matches, in "
                        "Verilog, else 2 (default: auto)")
    c.add_argument("--hdl", choices=["verilog", "vhdl"], default="verilog",
                   help="the design's source: Amaranth's (verilog), or the VHDL back end's, synthesised by "
                        "GHDL before Yosys maps it (vhdl); the host link is Amaranth's either way "
                        "(default: verilog)")
    c.add_argument("--seed", type=_seeds, metavar="S", default=(1,),
                   help="nextpnr's placement seed, or several (1,2,3 or 1-5): placed and routed at each in turn, "
                        "on the same netlist, until one meets the clock; the first that meets it is kept, else "
                        "the fastest (default: 1)")
    c.add_argument("--jobs", type=_jobs, metavar="N", default=1,
                   help="with several seeds: place and route N of them at once, each nextpnr on a core of its own "
                        "(the seed kept and the report are the same as one at a time; default: 1)")
    c.add_argument("--router", choices=ROUTER_CHOICES, default="auto",
                   help="nextpnr's router; auto: router1 (on the ECP5-85F it beat router2 on every seed, "
                        "marathon and network); router2: timing-driven, with --tmg-ripup, stopped with an error "
                        "if it congests (default: auto)")
    c.add_argument("--placer", choices=PLACER_CHOICES, default="auto",
                   help="nextpnr's placer: heap (analytic) or static (electrostatic: on the ECP5-85F it routes "
                        f"designs heap's placement leaves congested, such as finance2); auto: on ECP5 static "
                        f"where the design takes more than {round(STATIC_FF_SHARE * 100)}%% of the device's flip-flops, "
                        "else heap (default: auto)")
    c.add_argument("--allow-timing-fail", action="store_true",
                   help="write the bitstream even if timing is missed (still exits 1)")
    c.set_defaults(func=cmd_synth)

    c = sub.add_parser("run", help="stream events through a board running a synthesised query (UART host link)")
    c.add_argument("query", metavar="Q.sql", help="query file (the one the bitstream was built from)")
    c.add_argument("--port", metavar="PORT", required=True,
                   help="serial port: /dev/ttyUSB0, a pty, or a pyserial URL such as socket://host:port")
    c.add_argument("--events", metavar="E", required=True, help="events file (.csv or .parquet)")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="match file to write (.csv)")
    c.add_argument("--compare", metavar="FILE", help="match file to compare with (exit 1 and show the first difference)")
    c.add_argument("--baud", type=int, metavar="B", default=3_000_000, help="baud rate (default: 3000000)")
    c.add_argument("--timeout", type=float, metavar="S", default=10.0,
                   help="give up after S seconds without progress (default: 10)")
    c.add_argument("--retry", type=float, metavar="S", default=0.5,
                   help="send unacknowledged frames again after S seconds (default: 0.5)")
    c.add_argument("--frame-bytes", type=int, metavar="N", default=240,
                   help="tuple bytes per frame, at most (default: 240)")
    c.add_argument("--max-match-length", type=int, metavar="L", help="as for synth")
    c.set_defaults(func=cmd_run)

    c = sub.add_parser("gen", help="generate synthetic events whose values make the patterns match")
    c.add_argument("query", metavar="Q.sql", help="query file")
    c.add_argument("-n", type=int, metavar="N", default=1000, help="number of events (default: 1000)")
    c.add_argument("--keys", type=int, metavar="K", default=16, help="number of partition keys (default: 16)")
    c.add_argument("--seed", type=int, metavar="S", default=0, help="random seed (default: 0)")
    c.add_argument("--skew", type=float, metavar="Z", default=0.0,
                   help="Zipf exponent of key popularity; 0 is uniform (default: 0)")
    c.add_argument("--noise", type=float, metavar="P", default=0.1,
                   help="pattern model: share of tuples drawn without regard to the patterns (default: 0.1)")
    c.add_argument("--model", choices=["auto", "pattern", "series"], default="auto",
                   help="pattern: walk each key through the automata so the patterns match; series: market-like "
                        "data (random walks for fields whose history DEFINE reads, heavy tails for fields compared "
                        "with literals); auto: series when every query has an aggregate in DEFINE (default: auto)")
    c.add_argument("-o", "--output", metavar="FILE", required=True, help="events file to write (.csv or .parquet)")
    c.set_defaults(func=cmd_gen)
    return p


def _terminated(signum, frame):
    # SIGTERM (a job's time limit, `kill`) unwinds like Ctrl-C, so the tools cepc started stop too
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    previous = None
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _main(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(args) -> int:
    try:
        return args.func(args)
    except CepcError as e:
        print(e.format(), file=sys.stderr)
        return 1
    except OSError as e:  # a file we were told to read or write
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
