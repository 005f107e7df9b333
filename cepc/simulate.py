"""``cepc sim``: compile, build with Verilator or GHDL, run the cocotb bench, decode, compare.

Verilator simulates the Verilog (Amaranth → Yosys); GHDL the VHDL of
:mod:`cepc.emit.vhdl`. Both run the same bench. Builds are cached under
``build/sim/<hash>/`` by the query text, the compile options, the simulator and
the cepc version, so re-running a regression recompiles nothing.
The cocotb bench (``sim/cepc_bench.py``) only moves bytes; packing the events
and decoding the records happens here, through the same
:class:`~cepc.plan.TuplePlan` and JSON sidecar a host program would use.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import __version__, events, tools
from .errors import ToolError, UsageError
from .lang.check import Checked

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "sim"
TOP = "cepc_top"
SIMULATORS = ("verilator", "ghdl")


@dataclass
class SimOptions:
    bus_width: int = 64
    partitions: int | None = None  # None: as cepc compile chooses
    ways: int | None = None  # a hashed table's (--ways); None: as cepc compile chooses
    partitioner: str = "auto"
    device: str = "ecp5-85f"
    evict_after: int | None = None
    max_length: int | None = None
    packet_tuples: int = 64
    stall: float = 0.0
    backpressure: float = 0.0
    seed: int = 0
    waves: Path | None = None
    simulator: str = "verilator"
    automaton: str = "nfa"  # or dfa (--automaton)
    dfa_encoding: str = "onehot"
    decoder: bool = True  # False: --no-decoder
    update_cycles: str = "auto"  # --update-cycles: auto, 1, 2 or 3
    hazards: str = "auto"  # --hazards: auto, forward or stall
    build_root: Path = field(default_factory=lambda: Path("build") / "sim")
    timing: bool = False  # record the cycles of packet ends and records (SimResult.timing)
    # GHDL only: the VHDL with the device primitives `cepc synth --hdl vhdl` instantiates ("ecp5": the
    # table's banks as DP16KDs), simulated with the behavioural model of them the file then holds
    primitives: str | None = None


@dataclass
class SimResult:
    rows: list[list[str]]
    counters: dict
    spilled: list[dict]
    seconds: float
    build_seconds: float
    input_cycles: int  # clock cycles from the first input beat offered to the last one taken
    cycles: int = 0  # clock cycles from the end of reset to the end of the drain
    timing: dict = field(default_factory=dict)  # with SimOptions.timing: cycles of "last_beats" and "records"
    update_cycles: int = 1  # the table's update as compiled (SimOptions.update_cycles, auto resolved)
    hazards: str = "forward"  # the table's, as compiled (SimOptions.hazards, auto resolved)


def _design_hash(checked: Checked, opts: SimOptions) -> str:
    h = hashlib.sha256()
    h.update(checked.source.text.encode())
    # their builds differ: GHDL's code generator; the optimisation of Verilator's model
    backend = tools.ghdl_backend() if opts.simulator == "ghdl" else os.environ.get("CEPC_VERILATOR_OPT_FAST", "")
    h.update(json.dumps([__version__, _amaranth_version(), opts.bus_width, opts.partitions, opts.ways, opts.partitioner, opts.device,
                         opts.evict_after, opts.max_length, opts.waves is not None, opts.simulator,
                         backend, opts.automaton, opts.dfa_encoding, opts.decoder, opts.update_cycles,
                         opts.primitives, opts.hazards]).encode())
    h.update((BENCH_DIR / "cepc_bench.py").read_bytes())
    h.update(_compiler_digest())
    return h.hexdigest()[:16]


def _amaranth_version() -> str:
    """The emitted Verilog is Amaranth's (and its Yosys'): another version is another design."""
    from importlib.metadata import version

    return version("amaranth")


KEEP_BUILDS = 24  # cached builds kept under a build root (each some 50 MB; the newest are kept)


def prune_builds(root: Path, keep: int = KEEP_BUILDS) -> list[Path]:
    """Delete all but the ``keep`` most recently used build directories under ``root``; a build in
    use (its lock held by a running simulation) is never deleted. Every change to the compiler is a
    new build, so without this the cache grows without bound. Returns the directories deleted."""
    # only cepc's own builds: directories with the lock file every build takes
    builds = sorted((d for d in root.iterdir() if (d / ".lock").is_file()), key=lambda d: d.stat().st_mtime,
                    reverse=True)
    deleted = []
    for old in builds[keep:]:
        try:
            with open(old / ".lock") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # in use: skip it
                shutil.rmtree(old, ignore_errors=True)
                deleted.append(old)
        except OSError:
            continue
    return deleted


def lock_build(work: Path):
    """Create ``work`` if needed and lock it for this process (a second simulation of the same build
    waits); marks it the newest build and prunes the older ones. Returns the open lock file. A build
    pruned by another process between its creation and the lock is created again."""
    while True:
        work.mkdir(parents=True, exist_ok=True)
        try:
            lock = open(work / ".lock", "w")
        except FileNotFoundError:  # pruned meanwhile
            continue
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.stat(work / ".lock").st_ino == os.fstat(lock.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        lock.close()  # the build was pruned while this process waited for it: again
    os.utime(work)  # used now: the newest, for prune_builds
    prune_builds(work.parent)
    return lock


@functools.cache
def _compiler_digest() -> bytes:
    """The compiler's own sources (and templates): a change to them is a new design, not a cached one."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for folder in (package, ROOT / "hdl_templates"):
        for path in sorted(p for p in folder.rglob("*") if p.suffix in (".py", ".lark", ".j2") and p.is_file()):
            h.update(str(path.relative_to(folder.parent)).encode())
            h.update(path.read_bytes())
    return h.digest()


def _source(opts: SimOptions, work: Path) -> Path:
    return work / (f"{TOP}.vhd" if opts.simulator == "ghdl" else f"{TOP}.v")


def _compile(checked: Checked, opts: SimOptions, work: Path):
    """The design as HDL for the simulator: Verilog for Verilator, VHDL for GHDL."""
    from .emit import emit
    from .hw import sizing
    from .hw.top import Top
    from .nfa import powerset
    from .nfa.lower import lower

    design = lower(checked, opts.max_length)
    if opts.automaton == "dfa":
        try:
            design = powerset.design_dfa(design, opts.dfa_encoding)
        except ValueError as e:
            raise UsageError(str(e)) from None
    if opts.simulator == "ghdl":
        from .emit.vhdl import unsupported

        if unsupported(design, opts.decoder):
            raise UsageError(unsupported(design, opts.decoder))
    try:
        choice = sizing.choose(design, sizing.DEVICES[opts.device], opts.partitioner, opts.partitions, ways=opts.ways,
                               evict=bool(opts.evict_after))
    except ValueError as e:
        raise UsageError(str(e)) from None
    from .cli import _hazards, _update_cycles

    cycles = _update_cycles(design, choice.partitioner, opts.update_cycles)
    hazards = _hazards(choice.partitioner, opts.hazards)
    top = Top(design, bus_width=opts.bus_width, partitions=choice.partitions, partitioner=choice.partitioner,
              evict_after=opts.evict_after, ways=choice.ways, decoder=opts.decoder, update_cycles=cycles,
              hazards=hazards)
    options = {"bus_width": opts.bus_width, "partitions": choice.partitions, "partitioner": choice.partitioner,
               "automaton": opts.automaton}
    if opts.evict_after:
        options["evict_after"] = opts.evict_after
    if opts.ways:
        options["ways"] = choice.ways
    if opts.max_length:
        options["max_match_length"] = opts.max_length
    # The build directory is named by a hash of everything the HDL is made from (the query, these
    # options, the compiler's sources, Amaranth's version): HDL emitted into it before is this design's.
    # Emitting the Verilog again (Amaranth, then Yosys) took 14-24 s of a partial-match example's build.
    emitted = work / ".emitted"
    source = _source(opts, work)
    if emitted.is_file() and emitted.read_text() == source.name and source.is_file():
        top._MustUse__silence = True  # (read for its latency and options: its HDL is the one emitted before)
        return design, top
    # written beside, then moved in only if changed: an unchanged design keeps its timestamps, so
    # the simulators' incremental builds (make, ghdl -m) have nothing to redo
    staged = work / "staged"
    staged.mkdir(exist_ok=True)
    try:
        emit(design, top, staged / _source(opts, work).name, "vhdl" if opts.simulator == "ghdl" else "verilog", TOP,
             options, opts.primitives, models=True)
    except ValueError as e:
        if not opts.primitives:
            raise
        # primitives for Verilator, or of a family the VHDL does not know
        raise UsageError(f"{e}: simulate them with GHDL" if opts.simulator != "ghdl" else str(e)) from None
    for new in staged.iterdir():
        old = work / new.name
        if old.exists() and old.read_bytes() == new.read_bytes():
            new.unlink()
        else:
            new.replace(old)
    emitted.write_text(source.name)
    return design, top


@dataclass
class _Build:
    """A simulator's cocotb runner, built, and the extra arguments its test step takes."""

    runner: object
    test_args: list[str] = field(default_factory=list)
    plusargs: list[str] = field(default_factory=list)
    waves: bool = False
    test_dir: Path | None = None  # where the simulator runs (default: the work directory)


def _build_verilator(opts: SimOptions, work: Path) -> _Build:
    exe, _ = tools.verilator()
    _verilator_env()
    from cocotb_tools.runner import get_runner

    runner = get_runner("verilator")
    build_args = _verilator_args(_source(opts, work), TOP)
    if opts.waves:
        build_args.append("--trace-fst")
    log = work / "build.log"
    try:
        runner.build(sources=[_source(opts, work)], hdl_toplevel=TOP, build_dir=work / "obj", build_args=build_args,
                     waves=opts.waves is not None, log_file=log)
    except (SystemExit, Exception) as e:  # the runner raises SystemExit or CalledProcessError on failure
        tail = log.read_text()[-3000:] if log.exists() else str(e)
        raise ToolError("Verilator failed to build the design", [exe, "--cc", str(_source(opts, work))], tail) from None
    return _Build(runner, waves=opts.waves is not None)


def _build_ghdl(opts: SimOptions, work: Path) -> _Build:
    exe = tools.ghdl()
    from cocotb_tools.runner import get_runner

    runner = get_runner("ghdl")
    obj = work / "obj"
    log = work / "build.log"
    try:
        # analysis (ghdl -i, -m) in obj/; the run elaborates from there
        runner.build(sources=[_source(opts, work)], hdl_toplevel=TOP, build_dir=obj, build_args=tools.GHDL_STD,
                     log_file=log)
    except (SystemExit, Exception) as e:
        tail = log.read_text()[-3000:] if log.exists() else str(e)
        raise ToolError("GHDL failed to analyse the design", [exe, "-a", *tools.GHDL_STD, str(_source(opts, work))],
                        tail) from None
    # numeric_std warns about the 'U' of signals not yet driven at time 0; that is noise
    plusargs = ["--ieee-asserts=disable-at-0"]
    if opts.waves:
        plusargs.append(f"--fst={work / 'dump.fst'}")  # GHDL's own FST writer (the runner's is GHW)
    # run where the analysis went: with GHDL's LLVM or GCC back end, `ghdl -m` linked the simulator there
    return _Build(runner, test_args=[*tools.GHDL_STD, f"--workdir={obj}"], plusargs=plusargs, test_dir=obj)


def simulate(checked: Checked, frame: pd.DataFrame, opts: SimOptions, packets: list[bytes] | None = None) -> SimResult:
    """Run ``frame`` through the compiled design in a real simulator; rows as in a match file.

    ``packets``, if given, are sent instead of ``frame`` packed into packets of
    ``opts.packet_tuples`` tuples: raw bytes, one AXI-Stream packet each (a
    packet that ends mid-tuple tests the framer's recovery).
    """
    if opts.simulator not in SIMULATORS:
        raise UsageError(f"unknown simulator {opts.simulator!r}; use {' or '.join(SIMULATORS)}")
    if not (BENCH_DIR / "cepc_bench.py").exists():
        raise ToolError(f"the cocotb bench is missing ({BENCH_DIR / 'cepc_bench.py'}); run cepc from its checkout")
    if opts.packet_tuples < 1:
        raise UsageError(f"--packet-tuples must be at least 1, not {opts.packet_tuples}")
    work = (opts.build_root / _design_hash(checked, opts)).resolve()
    # one run at a time per build directory: a second `cepc sim` of the same design (another
    # shell, a parallel test) waits for the first rather than rebuild or overwrite its files
    with lock_build(work):
        return _simulate(checked, frame, opts, work, packets)


def _simulate(checked: Checked, frame: pd.DataFrame, opts: SimOptions, work: Path,
              packets: list[bytes] | None) -> SimResult:
    t0 = time.perf_counter()
    design, top = _compile(checked, opts, work)
    build = (_build_ghdl if opts.simulator == "ghdl" else _build_verilator)(opts, work)
    t1 = time.perf_counter()

    if packets is None:
        rows = frame.to_dict("records")
        (work / "input.bin").write_bytes(b"".join(design.tuple.to_bytes(r) for r in rows))
    else:
        (work / "input.bin").write_bytes(b"".join(packets))
    result_path = work / "result.json"
    result_path.unlink(missing_ok=True)
    (work / "dump.fst").unlink(missing_ok=True)
    config = {
        "input": str(work / "input.bin"), "output": str(result_path), "tuple_bytes": design.tuple.nbytes,
        "packet_tuples": opts.packet_tuples, "stall": opts.stall, "backpressure": opts.backpressure,
        "seed": opts.seed, "drain_cycles": top.latency + 64, "timing": opts.timing,
    }
    if packets is not None:
        config["packet_bytes"] = [len(p) for p in packets]
    (work / "config.json").write_text(json.dumps(config))
    log = work / "run.log"
    if str(BENCH_DIR) not in sys.path:  # the runner hands this process's sys.path to the simulator
        sys.path.insert(0, str(BENCH_DIR))
    try:
        build.runner.test(test_module="cepc_bench", hdl_toplevel=TOP, test_dir=build.test_dir or work, build_dir=work / "obj",
                          extra_env={"CEPC_SIM_CONFIG": str(work / "config.json")}, test_args=build.test_args,
                          plusargs=build.plusargs, waves=build.waves, results_xml=str(work / "results.xml"),
                          log_file=log, seed=opts.seed)
    except (SystemExit, Exception):
        pass  # judged by the result file below
    if not result_path.exists():
        tail = log.read_text()[-3000:] if log.exists() else ""
        raise ToolError("the simulation did not finish", ["cocotb", "cepc_bench", opts.simulator], tail)
    t2 = time.perf_counter()
    if opts.waves:
        produced = work / "dump.fst"
        if not produced.exists():
            raise ToolError("the simulator wrote no waveform", [], "")
        shutil.copyfile(produced, opts.waves)

    out = json.loads(result_path.read_text())
    rows_out = record_rows(checked, design, [decode_record(design, word) for word in out["records"]])
    spilled = [design.tuple.unpack(w) for w in out["spilled"]]
    return SimResult(rows_out, out["counters"], spilled, t2 - t1, t1 - t0, out["input_cycles"], out["cycles"],
                     out["timing"], top.update_cycles, top.hazards)


def record_rows(checked: Checked, design, decoded: list[dict]) -> list[list[str]]:
    """Decoded match records as match-file rows (SPEC §5): sorted by seq, then query order."""
    order = {q.name: q.index for q in design.queries}
    keys, measures = events.match_columns(checked)
    return [[events.format_value(r[k]) if k in r else "" for k in keys] + [str(r["seq"]), r["query"]]
            + [events.format_value(r["measures"][name]) if name in r["measures"] else "" for name in measures]
            for r in sorted(decoded, key=lambda r: (r["seq"], order[r["query"]]))]


def decode_record(design, word: int) -> dict:
    """A match record (``m_tdata``) → {"query", "seq", key fields…, "measures": {name: value}},
    by the record layout."""
    from .hw.layouts import record_layout

    parts = {name: (f.offset, f.width) for name, f in record_layout(design)}

    def get(name):
        off, width = parts[name]
        return word >> off & ((1 << width) - 1)

    q = design.queries[get("query")]
    key_bits, out, off = get("key"), {"query": q.name, "seq": get("seq"), "measures": {}}, 0
    for k in q.key_fields:
        f = design.tuple.field(k)
        out[k] = f.decode(key_bits >> off & ((1 << f.width) - 1))
        off += f.width
    bits, off = (get("measures") if q.measures else 0), 0
    for meas in q.measures:
        value = bits >> off & ((1 << meas.width) - 1)
        off += meas.width
        if meas.field is not None:
            value = design.tuple.field(meas.field).decode(value)
        elif meas.kind == "int" and value >> (meas.width - 1):
            value -= 1 << meas.width
        out["measures"][meas.name] = value
    return out


def compare(header: list[str], got: list[list[str]], want_path: Path, frame: pd.DataFrame) -> str | None:
    """None if the match file at ``want_path`` equals ``got``; else a report of the first difference."""
    want_header, want = events.read_matches(want_path)
    if want_header != header:
        return f"headers differ: simulation {','.join(header)} vs {want_path} {','.join(want_header)}"
    if got == want:
        return None
    i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    lines = [f"simulation and {want_path} differ at row {i + 1} of {max(len(got), len(want))}:"]
    lines.append(f"  simulation: {','.join(got[i]) if i < len(got) else '(no more rows)'}")
    lines.append(f"  {want_path.name}: {','.join(want[i]) if i < len(want) else '(no more rows)'}")
    seq_col = header.index("seq")
    seqs = [int(r[seq_col]) for r in (got[i:i + 1] + want[i:i + 1])]
    if seqs:
        s = min(seqs)
        lo, hi = max(0, s - 3), min(len(frame), s + 2)
        lines.append(f"  tuples around seq {s}:")
        for j in range(lo, hi):
            values = ", ".join(f"{c}={frame[c].iloc[j]}" for c in frame.columns)
            lines.append(f"    {'>' if j == s else ' '} seq {j}: {values}")
    return "\n".join(lines)


def main_sim(args) -> int:
    """The ``cepc sim`` subcommand."""
    from .cli import _load

    checked = _load(args.query)
    frame = events.load_events(args.events, checked.stream)
    events.check_order(frame, checked, args.events)
    from .cli import _ways

    opts = SimOptions(bus_width=args.bus_width, partitions=args.partitions, ways=_ways(args.ways),
                      partitioner=args.partitioner,
                      device=args.device, evict_after=args.evict_after,
                      max_length=args.max_match_length, packet_tuples=args.packet_tuples, stall=args.stall, backpressure=args.backpressure,
                      seed=args.seed, waves=Path(args.waves) if args.waves else None, simulator=args.simulator,
                      automaton=args.automaton, dfa_encoding=args.dfa_encoding, decoder=not args.no_decoder,
                      update_cycles=args.update_cycles, hazards=args.hazards)
    if args.no_decoder and args.automaton == "dfa":
        raise UsageError("--no-decoder applies to the NFA; a DFA reads the shared decoder's predicate vector")
    result = simulate(checked, frame, opts)
    keys, measures = events.match_columns(checked)
    events.write_matches(args.output, checked, result.rows)
    c = result.counters
    rate = len(frame) / result.seconds if result.seconds else float("inf")
    per_cycle = len(frame) / result.input_cycles if result.input_cycles else 0
    print(f"{len(frame)} tuples, {len(result.rows)} matches → {args.output} (build {result.build_seconds:.1f} s, "
          f"run {result.seconds:.1f} s, {rate:,.0f} tuples/s; {result.input_cycles} cycles, "
          f"{per_cycle:.2f} tuples/cycle); counters: " +
          ", ".join(f"{k} {v}" for k, v in c.items()), file=sys.stderr)
    if c["dropped"]:
        print(f"warning: {c['dropped']} tuples did not fit the partitioner (spilled); results are not exact — "
              f"raise --partitions", file=sys.stderr)
    if c.get("overflow"):
        print(f"warning: at {c['overflow']} tuples a partial match outgrew --max-match-length and was dropped; "
              f"results are not exact — raise --max-match-length", file=sys.stderr)
    if args.compare:
        report = compare(keys + ["seq", "query"] + measures, result.rows, Path(args.compare), frame)
        if report:
            print(report, file=sys.stderr)
            return 1
        print(f"identical to {args.compare}", file=sys.stderr)
    return 0


class LinkSimulation:
    """The host link of a query (:class:`~cepc.hw.hostlink.HostLink`, what a board runs, less its
    PLL and pins) in Verilator under ``sim/cepc_link_bench.py``, behind a pseudo-terminal.

    ``with LinkSimulation(checked) as port:`` builds the design (cached like
    :func:`simulate`), starts the simulation in a thread and yields the pty's
    path, which ``cepc run --port`` opens as a serial port. The design's clock
    is 100 MHz, the link's 50 MHz (two domains, as on a board), and the UART
    runs at ``50 MHz / divisor``. ``counts`` holds the bytes the bench moved
    each way once the block has ended. ``held``: records and spills cross as
    on an iCE40 (HostLink's ``held``); by default as on an ECP5, in registers.
    ``hdl="vhdl"``: the design inside the link is the VHDL back end's, as GHDL synthesises it for
    ``cepc synth --hdl vhdl`` (its Verilog netlist, built with the link's). The Verilog design is built
    as ``cepc synth`` builds it (Top's ``late_measures``), taking a tuple every ``slot_period`` cycles
    (3: Woods' pipeline of one element, as ``cepc synth`` builds it on the iCE40).
    """

    CLOCK_HZ = 100_000_000
    LINK_HZ = 50_000_000
    TOP = "cepc_link"

    def __init__(self, checked: Checked, *, partitions: int = 8, divisor: int = 4, buffer_bytes: int = 512,
                 buffer_frames: int = 4, corrupt_in_every: int = 0, corrupt_out_every: int = 0,
                 build_root: Path | None = None, max_seconds: float = 600, held: bool = False,
                 hdl: str = "verilog", slot_period: int = 2):
        self.checked = checked
        self.slot_period = slot_period
        self.held = held
        self.hdl = hdl
        self.partitions, self.divisor = partitions, divisor
        self.buffer_bytes, self.buffer_frames = buffer_bytes, buffer_frames
        self.corrupt = (corrupt_in_every, corrupt_out_every)
        self.build_root = build_root or Path("build") / "sim"
        self.max_seconds = max_seconds
        self.counts: dict | None = None
        self.sources: list[Path] = []  # what Verilator builds: the link's Verilog (and the VHDL's netlist)
        self._thread = None

    def _build(self) -> tuple[Path, object]:
        from .emit.verilog import _flat_verilog
        from .nfa.lower import lower
        from .synth.flow import link_design
        from .synth.vhdl import MODULE

        h = hashlib.sha256()
        h.update(self.checked.source.text.encode())
        h.update(json.dumps([__version__, "link", self.partitions, self.divisor, self.buffer_bytes,
                             self.buffer_frames, self.held, self.hdl, self.slot_period]).encode())
        for f in ("cepc_link_bench.py",):
            h.update((BENCH_DIR / f).read_bytes())
        h.update(_compiler_digest())
        work = (self.build_root / f"link-{h.hexdigest()[:16]}").resolve()
        # one simulation at a time per build directory (its pty, stop and done files are shared)
        self._lock = lock_build(work)
        source = work / f"{self.TOP}.v"
        self.sources = sources = [source] + ([work / f"{MODULE}.v"] if self.hdl == "vhdl" else [])
        if not all(s.exists() for s in sources):
            ld = link_design(lower(self.checked), partitions=self.partitions, clock_hz=self.CLOCK_HZ,
                             link_hz=self.LINK_HZ, baud=self.LINK_HZ // self.divisor, buffer_bytes=self.buffer_bytes,
                             buffer_frames=self.buffer_frames, held=self.held, hdl=self.hdl, netlist_dir=work,
                             late_measures=True, slot_period=self.slot_period)  # (as `cepc synth` builds it)
            source.write_text(_flat_verilog(ld.link, self.TOP))
        _verilator_env()
        from cocotb_tools.runner import get_runner

        runner = get_runner("verilator")
        log = work / "build.log"
        try:
            runner.build(sources=sources, hdl_toplevel=self.TOP, build_dir=work / "obj",
                         build_args=_verilator_args(source, self.TOP), log_file=log)
        except (SystemExit, Exception):
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise ToolError("Verilator failed to build the host link", ["verilator", str(source)], tail) from None
        return work, runner

    def __enter__(self) -> str:
        import threading

        work, runner = self._build()
        files = {k: work / f"{k}.txt" for k in ("pty", "stop", "done")}
        for f in files.values():
            f.unlink(missing_ok=True)
        config = {"divisor": self.divisor, "clock_ns": 1e9 / self.CLOCK_HZ, "link_ns": 1e9 / self.LINK_HZ,
                  "pty_file": str(files["pty"]), "stop_file": str(files["stop"]),
                  "done_file": str(files["done"]), "corrupt_in_every": self.corrupt[0],
                  "corrupt_out_every": self.corrupt[1], "max_seconds": self.max_seconds}
        (work / "link.json").write_text(json.dumps(config))
        if str(BENCH_DIR) not in sys.path:
            sys.path.insert(0, str(BENCH_DIR))

        def run():
            try:
                runner.test(test_module="cepc_link_bench", hdl_toplevel=self.TOP, test_dir=work,
                            build_dir=work / "obj", extra_env={"CEPC_LINK_CONFIG": str(work / "link.json")},
                            results_xml=str(work / "results.xml"), log_file=work / "run.log")
            except (SystemExit, Exception):
                pass  # judged by the done file

        self._work, self._files = work, files
        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 120
        while not files["pty"].exists():  # the bench writes it whole, then renames it
            if not self._thread.is_alive() or time.monotonic() > deadline:
                tail = (work / "run.log").read_text()[-3000:] if (work / "run.log").exists() else ""
                raise ToolError("the host link simulation did not start", ["cocotb", "cepc_link_bench"], tail)
            time.sleep(0.05)
        return files["pty"].read_text().strip()

    def __exit__(self, *exc) -> None:
        try:
            self._files["stop"].write_text("stop")
            self._thread.join(timeout=60)
            if self._files["done"].exists():
                self.counts = json.loads(self._files["done"].read_text())
        finally:
            self._lock.close()


def _verilator_args(source: Path, top: str) -> list[str]:
    """What every Verilator build of cepc's takes (the design's and the host link's): warnings not
    fatal, X's as 0, and only ``top``'s ports public."""
    return ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0", *_ports_only(source, top)]


def _ports_only(source: Path, top: str) -> list[str]:
    """Verilator arguments that make only ``top``'s ports visible to cocotb (VPI).

    cocotb's runner builds with ``--public-flat-rw``: every signal of the flattened design public,
    each registered in Verilator's symbol table and kept from its optimisations. On a partial-match
    design that is tens of thousands of signals, and most of the C++ build (finance2: 36 s of C++
    against 5.5 s with the ports alone). The benches drive and read ports only; waves are traced
    apart from VPI (``--trace-fst``), so they still show every signal. A control file beside the
    source names the ports, read from the module header Yosys writes."""
    header = re.search(rf"^module\s+{re.escape(top)}\s*\(([^;]*)\)\s*;", source.read_text(), re.M)
    if header is None:
        raise ToolError(f"no module {top} in {source}", [str(source)])
    vlt = source.with_name(f"{top}_ports.vlt")
    vlt.write_text("`verilator_config\n" + "".join(
        f'public_flat_rw -module "{top}" -var "{port.strip()}"\n' for port in header.group(1).split(",")))
    return ["--no-public-flat-rw", str(vlt)]


def _verilator_env() -> None:
    """Point this process (and the cocotb runner's children) at the Verilator that tools.verilator finds."""
    exe, env = tools.verilator()
    os.environ["VERILATOR_ROOT"] = env.get("VERILATOR_ROOT", os.environ.get("VERILATOR_ROOT", ""))
    os.environ["PATH"] = env["PATH"]
    # The PyPI wheel's verilated.mk leaves the precompiled-header include flag empty, which
    # breaks the C++ build; a make variable override passed through MAKEFLAGS restores it.
    if "CFG_CXXFLAGS_PCH_I" not in os.environ.get("MAKEFLAGS", ""):
        os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    # Every build compiles Verilator's runtime and cocotb's VPI glue again (most of a small design's
    # build time); with ccache (make setup installs it) only the first does. verilated.mk takes
    # OBJCACHE from the environment.
    if "OBJCACHE" not in os.environ and shutil.which("ccache"):
        os.environ["OBJCACHE"] = "ccache"
    # CEPC_VERILATOR_OPT_FAST (e.g. -O0) trades the model's speed for a quicker C++ build: the test
    # suite's streams are short, its designs many (verilated.mk's default is -Os)
    opt = os.environ.get("CEPC_VERILATOR_OPT_FAST")
    if opt and "OPT_FAST=" not in os.environ.get("MAKEFLAGS", ""):
        os.environ["MAKEFLAGS"] = (os.environ.get("MAKEFLAGS", "") + f" OPT_FAST={opt}").strip()


__all__ = ["simulate", "compare", "main_sim", "SimOptions", "decode_record", "record_rows", "LinkSimulation"]
