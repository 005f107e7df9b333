"""``cepc synth``: a board top through Yosys, nextpnr and the bitstream packer, all from PyPI (YoWASP).

Amaranth's platform (``boards/``) writes the RTLIL, the Yosys script and the
pin constraints; this module runs the tools itself, one step at a time, so it
can show progress, keep each tool's log, and read the reports:

1. ``yosys``: ``synth_ecp5`` / ``synth_ice40``, then ``stat -json`` (cell counts);
2. ``nextpnr-ecp5`` / ``nextpnr-ice40``: place and route, one thread, with
   ``--report`` (utilisation, Fmax per clock, critical paths);
3. ``ecppack`` / ``icepack``: the bitstream — only when timing is met, unless
   ``allow_timing_fail``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__, protocol, tools
from ..errors import FitError, TimingError, ToolError, UsageError
from . import report as rep
from . import sta

ROOT = Path(__file__).resolve().parent.parent.parent
BOARDS_DIR = ROOT / "boards"
NAME = "cepc_board"

_boards: dict | None = None


def boards() -> dict[str, type]:
    """The board platforms of ``boards/`` by their ``cepc_name``."""
    global _boards
    if _boards is None:
        init = BOARDS_DIR / "__init__.py"
        if not init.exists():
            raise ToolError(f"the board definitions are missing ({BOARDS_DIR}); run cepc from its checkout")
        spec = importlib.util.spec_from_file_location("cepc_boards", init, submodule_search_locations=[str(BOARDS_DIR)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["cepc_boards"] = module
        spec.loader.exec_module(module)
        _boards = dict(module.BOARDS)
    return _boards


def board(name: str) -> type:
    known = boards()
    if name not in known:
        raise UsageError(f"unknown board {name!r}; cepc knows " + ", ".join(sorted(known)))
    return known[name]


def family(platform_cls: type) -> str:
    fam = getattr(platform_cls, "family", None)
    if fam == "ecp5" or str(getattr(platform_cls, "device", "")).startswith("LFE5"):
        return "ecp5"
    if str(getattr(platform_cls, "device", "")).startswith("iCE40"):
        return "ice40"
    raise UsageError(f"board {platform_cls.cepc_name!r}: cepc synthesises for ECP5 and iCE40 only")


@dataclass
class SynthOptions:
    board: str
    out_dir: Path | None = None  # default build/synth/<board>
    freq_mhz: float | None = None  # default: the board's
    baud: int | None = None
    partitioner: str = "auto"
    partitions: int | None = None
    ways: int | None = None  # a hashed table's entries per bucket (--ways); None: auto
    evict_after: int | None = None
    max_length: int | None = None
    # nextpnr's seeds, tried in turn on the same netlist until one meets every clock (see sweep_seeds)
    seeds: tuple[int, ...] = (1,)
    jobs: int = 1  # seeds placed and routed at once (one nextpnr, one thread, each)
    # --freq max: build at freq_mhz (or the board's), then, while the design's clock misses, again at
    # the fastest clock the PLL makes FASTEST_MARGIN or more below what it reached (FASTEST_BUILDS in all)
    fastest: bool = False
    router: str = "auto"  # nextpnr's router: auto (see routers()), router1 or router2
    placer: str = "auto"  # nextpnr's placer: auto (see placer_for()), heap or static
    update_cycles: str = "auto"  # a key's update: 1, 2 or 3 cycles (cepc.hw.top.update_cycles_for)
    hazards: str = "auto"  # a table's writes in flight: forward or stall (cepc.hw.top.hazards_for)
    slot_period: str = "auto"  # Woods' pipeline of one element: a tuple every 2 or 3 cycles (slot_period_for)
    hdl: str = "verilog"  # the design from Amaranth (verilog) or from the VHDL back end through GHDL (vhdl)
    allow_timing_fail: bool = False
    pack: bool = True


@dataclass
class LinkDesign:
    """A query's hardware behind the host link, with what the host needs to know."""

    design: object  # DesignPlan
    top: object  # Top
    link: object  # HostLink
    sidecar: dict
    design_id: int
    netlist: Path | None = None  # hdl="vhdl": GHDL's Verilog netlist of the design, which the link instantiates


ROUTER_CHOICES = ("auto", "router1", "router2")
# nextpnr's placers: HeAP (analytic, its default) or `static` (electrostatic, RePlAce's method). On the
# ECP5-85F, the same netlists at seed 1 with router1 (bench/results/synth-rounds.md): static placed and routed
# finance2 in 27 minutes, at 63.9 MHz, where HeAP's placement was still 33,728 arcs from routed after
# 69 minutes; on the designs HeAP's placement routes, HeAP's was faster (finance0 124.4 against 114.8 MHz,
# mshape 116.2 against 111.8). `auto` chooses between them by the share of the device's flip-flops the
# design takes (placer_for).
PLACER_CHOICES = ("auto", "heap", "static")
# ... static above this share (on ECP5). The examples on the ECP5-85F: finance2 26 % (21,931 of 83,640
# flip-flops, since its older writes' state is read from LUT RAM; at 34 %, 28,726, it routed on static
# placement only, and now HeAP's placement routes in minutes where router1 stalled on static's, 68,000
# arcs left after 25 minutes), mshape 22 %, finance5 19 %, finance0 18 % (each routed on both, faster on
# HeAP's), network and marathon less.
STATIC_FF_SHARE = 0.30
# --freq max: at most this many builds, each after the first at the fastest clock the PLL makes at or
# below FASTEST_MARGIN under what the last reached. A placement at another target reaches about what
# the one before did, but not to the percent: nextpnr's timing-driven placer, given a target it can
# just reach, tends to stop just short of it (marathon on the UP5K, asked for 100.5 MHz, reached 51.4;
# at 51 MHz then 50.8, and at 50.25 MHz 50.0).
FASTEST_BUILDS = 3
FASTEST_MARGIN = 0.03


def placer_for(family: str, choice: str, flip_flops: int, device) -> tuple[str, str]:
    """nextpnr's placer for a netlist of ``flip_flops`` on ``device`` (cepc.hw.devices.Device), and
    why: the one the user names, else (``auto``) on ECP5 the static placer where the design takes
    more than STATIC_FF_SHARE of the device's flip-flops, HeAP otherwise (and on iCE40)."""
    if choice not in PLACER_CHOICES:
        raise UsageError(f"unknown placer {choice!r}; use one of {', '.join(PLACER_CHOICES)}")
    if choice != "auto":
        return choice, "as asked"
    share = flip_flops / device.ffs if device.ffs else 0.0
    if family == "ecp5" and share > STATIC_FF_SHARE:
        return "static", (f"the design takes {share:.0%} of the device's flip-flops ({flip_flops:,}); HeAP's "
                          f"placement of designs above {STATIC_FF_SHARE:.0%} left router1 congested for hours")
    return "heap", f"the design takes {share:.0%} of the device's flip-flops"


def placer_again(log: str, choice: str, placer: str) -> str | None:
    """The placer to place again with, after nextpnr's ``log`` stopped with ``placer`` (``choice``: the
    user's --placer), or None. With ``auto``, where HeAP's legaliser gave up on a design that fits on
    paper, the static placer: finance0 on the UP5K (4,859 of its 5,280 logic cells, 657 carry cells in
    chains), which neither HeAP nor the annealing placer could place at seed 1, and the static placer
    placed and routed."""
    if choice == "auto" and placer == "heap" and rep.placement_failure(log) is None and rep.placement_at_limit(log):
        return "static"
    return None


def routers(family: str, choice: str = "auto") -> list[str | None]:
    """The nextpnr routers `cepc synth` tries in turn (None: nextpnr's default). ``auto``: router1
    alone, on ECP5 (``--router router1``) as on iCE40 (nextpnr's default there). On the ECP5-85F,
    the same netlists, seeds 1–5, with today's YoWASP nextpnr (0.11.1.0.post826): marathon 204.1 /
    186.2 / 195.2 / 192.9 / 188.6 MHz with router1, 156.3 / 157.0 / 161.5 / 173.3 / 163.4 with
    router2 and its timing-driven ripup; network 169.7 / 157.4 / 130.6 / 150.4 / 164.2 against
    149.2 / 150.1 / 122.3 / 148.6 / 150.7, each seed better and in less time
    (bench/results/synth-rounds.md). On the wide designs router2 congested and router1 routed them
    anyway (finance0, mshape, finance5); on the static placer's placement router2 hovered at about a
    dozen overused wires (finance0). So router1 on either placer. A router the user names is the only
    one tried: router2 with ``--router router2`` (place_and_route then watches it for congestion and a
    stalled ripup)."""
    if choice not in ROUTER_CHOICES:
        raise UsageError(f"unknown router {choice!r}; use one of {', '.join(ROUTER_CHOICES)}")
    if choice != "auto":
        return [choice]
    return ["router1"] if family == "ecp5" else [None]


def router_options(router: str | None, ripup: bool = True) -> list[str]:
    """nextpnr's options for ``router`` (None: its default, no option). router2 routes timing-driven
    with ripup (``--tmg-ripup``; ``ripup`` False: without): it rips up and reroutes the arcs that fail
    timing, not only those that overlap. network on the ECP5-85F, the same netlist (7de6682), seeds
    1–3: 115.0 / 134.5 / 135.1 MHz without, 146.3 / 151.1 / 149.5 with (seeds 4 and 5: 148.1, 144.5;
    bench/results/synth-rounds.md)."""
    if router is None:
        return []
    return ["--router", router] + (["--tmg-ripup"] if router == "router2" and ripup else [])


# iCE40 (synth_ice40 -dffe_min_ce_use): flip-flops with an enable shared by fewer than this use LUT logic
ICE40_MIN_CE_USE = 4

def ice40_timing(device: str) -> str:
    """synth_ice40's -device for an iCE40 part (Amaranth's name: iCE40UP5K, iCE40HX8K, iCE40LP1K, …):
    the timing ABC maps for."""
    for prefix, timing in (("iCE40UP", "u"), ("iCE40LP", "lp"), ("iCE40HX", "hx")):
        if device.startswith(prefix):
            return timing
    raise ValueError(f"no Yosys timing model for the iCE40 part {device}")


def ice40_synth_options(device: str) -> str:
    """synth_ice40's options for an iCE40 part: rare clock enables into LUTs (ICE40_MIN_CE_USE), ABC
    mapping for the part's timing (ice40_timing), and on the UltraPlus its DSPs (SB_MAC16) for
    products: finance5's MIN(price) * 1005 and its other products took 625 more of the UP5K's logic
    cells in LUTs (6,032 against 5,407 with four of its eight DSPs). marathon's and network's netlists,
    which multiply nothing, are the same either way."""
    timing = ice40_timing(device)
    return f"{'-dsp ' if timing == 'u' else ''}-dffe_min_ce_use {ICE40_MIN_CE_USE} -device {timing}"


def no_collisions_script() -> str:
    """Yosys commands for the memories marked NO_COLLISIONS (cepc.hw.ecp5: their word being written is
    never read in that cycle): a read during a write of its word may return anything, so Yosys maps
    them onto block RAM without emulating the old word in logic. (The memories are collected first, to
    carry their attribute onto the cell, which needs the processes converted; each has one read and
    one write port, so the mask is one bit.)"""
    from ..hw.ecp5 import NO_COLLISIONS

    return "proc\nmemory_collect\nsetparam -set RD_COLLISION_X_MASK 1'1 t:$mem_v2 a:{} %i".format(*NO_COLLISIONS)


def link_design(design, *, partitions: int, clock_hz: float, baud: int, buffer_bytes: int, buffer_frames: int,
                evict_after: int | None = None, options: dict | None = None, partitioner: str = "pipeline",
                ways: int | None = None, link_hz: float | None = None, held: bool | None = None,
                update_cycles: int = 1, hdl: str = "verilog", netlist_dir: Path | None = None,
                primitives: str | None = None, hazards: str = "forward",
                two_beat_fifos: tuple[str, ...] = (), late_measures: bool = False,
                slot_period: int = 2) -> LinkDesign:
    """The compiled top (8-bit bus, as the link feeds it) inside a :class:`~cepc.hw.hostlink.HostLink`:
    the design clocked at ``clock_hz``, the link at ``link_hz`` (default: the same), its UART at ``baud``;
    ``held``: as HostLink's (default: from the platform it is built for). ``hdl="vhdl"``: the design is
    the VHDL back end's, as GHDL synthesises it into ``netlist_dir`` (:mod:`cepc.synth.vhdl`), with the
    ``primitives`` of a device family instantiated (``"ecp5"``: the table's block RAM). ``late_measures``:
    :class:`~cepc.hw.top.Top`'s, for the Verilog (the VHDL's records are written as `cepc compile`'s are)."""
    link_hz = clock_hz if link_hz is None else link_hz
    from ..emit.verilog import sidecar
    from ..hw.hostlink import HostLink
    from ..hw.top import Top, check_options
    from ..hw.uart import divisor

    try:
        check_options(8, partitions, partitioner, evict_after)
        div = divisor(link_hz, baud)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if slot_period != 2 and hdl == "vhdl":
        raise UsageError("a tuple every three cycles (--slot-period 3) is the Verilog's; the VHDL back end's "
                         "pipeline takes one every other cycle")
    try:
        top = Top(design, bus_width=8, partitions=partitions, partitioner=partitioner, evict_after=evict_after,
                  ways=ways, update_cycles=update_cycles, hazards=hazards, two_beat_fifos=two_beat_fifos,
                  late_measures=late_measures and hdl == "verilog", count_pulses=hdl == "verilog",
                  slot_period=slot_period)
    except ValueError as e:
        raise UsageError(str(e)) from None
    side = sidecar(design, top, {"bus_width": 8, "partitions": partitions, "partitioner": partitioner,
                                 **(options or {}), **({"late_measures": True} if top.late_queries else {})})
    did = protocol.design_id(side)
    inner, netlist = top, None
    if hdl == "vhdl":
        from ..hw.netlist import NetlistTop
        from .vhdl import MODULE
        from .vhdl import netlist as vhdl_netlist

        netlist = vhdl_netlist(design, top, Path(netlist_dir or "."), side["options"], primitives=primitives)
        inner = NetlistTop(top, MODULE)
    elif hdl != "verilog":
        raise UsageError(f"the board's design is built from verilog or vhdl, not {hdl!r}")
    try:
        link = HostLink(inner, clock_hz=int(round(clock_hz)), link_hz=int(round(link_hz)), baud=baud, divisor=div,
                        buffer_bytes=buffer_bytes, buffer_frames=buffer_frames, design_id=did, held=held)
    except ValueError as e:
        top._MustUse__silence = inner._MustUse__silence = True  # (no board is made of them)
        raise UsageError(str(e)) from None
    side["host_link"] = {"protocol_version": protocol.VERSION, "design_id": did, "clock_hz": int(round(clock_hz)),
                         "link_clock_hz": int(round(link_hz)), "baud": baud, "divisor": div, "buffer_bytes": buffer_bytes, "buffer_frames": buffer_frames}
    return LinkDesign(design, top, link, side, did, netlist)


@dataclass
class SynthResult:
    report: rep.SynthReport
    summary: dict  # what --report writes
    bitstream: Path | None
    seconds: dict[str, float] = field(default_factory=dict)


Progress = Callable[[str], None]


class Cancelled(Exception):
    """A tool stopped because its result is no longer wanted (another seed met the clock first)."""


def _run(cmd: list[str], cwd: Path, log_path: Path, what: str, on_line: Callable[[str], None],
         watch: Path | None = None, cancel: threading.Event | None = None) -> str:
    """Run a tool with its output in ``log_path``; the lines of ``watch`` (the tool's own log,
    which it flushes as it goes; default ``log_path``) go to ``on_line`` while it runs.
    Returns the output; ToolError on failure; :class:`Cancelled` (the tool stopped) once ``cancel`` is set."""
    watch = watch or log_path
    if watch != log_path:
        watch.unlink(missing_ok=True)
    with open(log_path, "w") as log:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        except OSError as e:
            raise ToolError(f"cannot run {cmd[0]}: {e.strerror}", cmd) from None
        seen = 0
        partial = ""
        try:
            while True:
                finished = proc.poll() is not None
                if watch.exists():
                    with open(watch, errors="replace") as fh:
                        fh.seek(seen)
                        chunk = fh.read()
                        seen = fh.tell()
                    lines = (partial + chunk).split("\n")
                    partial = lines.pop()
                    for line in lines:
                        on_line(line)
                if finished:
                    break
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"{what} stopped")
                time.sleep(0.2)
        except BaseException:
            # Ctrl-C, a test's timeout, an error in on_line: the tool must not run on without us
            # (an orphaned nextpnr holds a core for as long as its router takes)
            proc.kill()
            proc.wait()
            raise
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise ToolError(f"{what} failed (exit status {proc.returncode}); the whole log is {log_path}", cmd,
                        _tail(text))
    return text


def _tail(text: str, n: int = 25) -> str:
    lines = text.rstrip("\n").splitlines()
    errors = [line for line in lines if "ERROR" in line or "Error" in line]
    tail = lines[-n:]
    return "\n".join(([*errors[-5:], "…"] if errors and errors[-1] not in tail else []) + tail)


_YOSYS_PASS = re.compile(r"^\d+(?:\.\d+)*\. Executing (.+?)(?: pass)?[ .(]")
_NEXTPNR_PHASES = [
    ("Info: Packing", "packing"), ("Info: Running main analytical placer", "placing (analytical)"),
    ("Info: Running simulated annealing placer", "placing (annealing)"), ("Info: Routing", "routing"),
    ("Info: Max frequency", "timing"), ("Info: Program finished", "done"),
]


_ROUTER2_ITER = re.compile(r"^Info:\s+iter=(\d+)\s+wires=\d+\s+overused=(\d+)(?:\s+overuse=\d+\s+tmgfail=(\d+))?")
# router1's progress table: iterations | routed, ripped-up arcs | ... | arcs still queued | times
_ROUTER1_ROW = re.compile(r"^Info:\s+\d+ \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|")


class RouteWatch:
    """Follows nextpnr's router2 through its log: each iteration's count of overused wires, and
    whether routing has stopped converging. A congested design's count stops falling and then
    climbs for hours (finance0 on the ECP5-85F, seed 4: 1,989 at iteration 21, 7,633 at 41), where
    one that routes falls to tens within about 25 iterations. It has diverged once no iteration for
    PATIENCE has set a new low and the count is at least FLOOR (finance0 at seed 1 also plateaus,
    at about 1.4 times its low of 890: no iteration of a run that routes has gone 25 without a new
    low above a few wires): then
    :meth:`line` raises FitError (through ``_run``, which stops nextpnr; :func:`place_and_route`
    then tries router1). router1 (the iCE40's, and the ECP5's second) logs a table instead, whose
    arcs still queued are shown and never taken for congestion.

    With ``--tmg-ripup`` router2 also rips up the arcs that fail timing (``tmgfail``), and nextpnr 0.11
    goes on doing so, once routing is legal, for as long as any fails: on a design far from its clock it
    never ends (the VHDL of marathon on the ECP5-85F, 71 MHz of 150: about 1,250 arcs failing from
    iteration 5 to 500 and on, its fewest 1,179 at iteration 5, no wire overused from iteration 80).
    When no wire is overused and no iteration for PATIENCE has set a new low of arcs failing timing,
    :meth:`line` raises :class:`RipupStalled` (:func:`place_and_route` then routes again without it)."""

    PATIENCE = 25
    FLOOR = 500

    def __init__(self, device: str = "", seed: int = 1, partitions: int = 0, log: Path | None = None,
                 board: str | None = None):
        self._device, self._seed, self._partitions, self._log = device, seed, partitions, log
        self._board = board
        self.iteration = self.overused = 0
        self.best = self.best_iteration = None
        self.ripup = True  # router2 rips up for timing (--tmg-ripup): whether a stall of it is looked for
        self.failing = None  # arcs failing timing (router2 with --tmg-ripup), the fewest, and when
        self.fewest_failing = self.fewest_failing_iteration = None

    @property
    def diverged(self) -> bool:
        return (self.best is not None and self.iteration - self.best_iteration >= self.PATIENCE
                and self.overused >= self.FLOOR)

    @property
    def ripup_stalled(self) -> bool:
        return (self.ripup and self.overused == 0 and bool(self.failing)
                and self.fewest_failing_iteration is not None
                and self.iteration - self.fewest_failing_iteration >= self.PATIENCE)

    def line(self, text: str, progress: Progress = lambda s: None) -> None:
        m = _ROUTER2_ITER.match(text)
        if not m:
            if r1 := _ROUTER1_ROW.match(text):
                progress(f"nextpnr: routing with router1, {int(r1.group(1)):,} arcs queued")
            return
        self.iteration, self.overused = int(m.group(1)), int(m.group(2))
        if self.best is None or self.overused < self.best:
            self.best, self.best_iteration = self.overused, self.iteration
        if m.group(3) is not None:
            self.failing = int(m.group(3))
            if self.fewest_failing is None or self.failing < self.fewest_failing:
                self.fewest_failing, self.fewest_failing_iteration = self.failing, self.iteration
        failing = f", {self.failing:,} arcs failing timing" if self.failing else ""
        progress(f"nextpnr: routing, iteration {self.iteration}: {self.overused:,} wires overused{failing}")
        if self.ripup_stalled:
            raise RipupStalled(f"{self.failing:,} arcs fail timing at iteration {self.iteration}, the fewest "
                               f"{self.fewest_failing:,} at iteration {self.fewest_failing_iteration}")
        if self.diverged:
            raise FitError(
                f"nextpnr could not route the design on {self._device} with --seed {self._seed}: it is "
                f"congested. The fewest wires overused were {self.best:,}, at iteration {self.best_iteration}; "
                f"at iteration {self.iteration} there are {self.overused:,}. Another --seed may route it, or "
                f"{smaller_hint(self._partitions, self._board)}; the log is {self._log}",
                bel="routing", detail=f"{self.overused:,} wires overused, the fewest {self.best:,}")


class RipupStalled(Exception):
    """router2's timing-driven ripup has stopped improving on a legal routing (:class:`RouteWatch`)."""


KEPT_LOG = "nextpnr-{}.log"  # a congested router's log, kept beside nextpnr.log
ROUTER2_LOG = KEPT_LOG.format("router2")
RIPUP_LOG = KEPT_LOG.format("router2-tmg-ripup")  # router2's, stopped where its timing-driven ripup stalled


def place_and_route(cmd: list[str], out: Path, routers: list[str | None], watch: Callable[[], RouteWatch],
                    progress: Progress = lambda s: None,
                    cancel: threading.Event | None = None) -> tuple[str, str | None, bool]:
    """nextpnr (``cmd``, logging to ``out``/nextpnr.log) with the first of ``routers`` (None: its
    default), and then the next while a router is found congested (:class:`RouteWatch`): on a design
    router2 cannot route its count of overused wires climbs, where router1 rips up and reroutes arc by
    arc, slower and steadier (finance0 on the ECP5-85F at seed 1: router2 congested, router1 routed it
    at 69.2 MHz). A congested router's log is kept (ROUTER2_LOG for router2's). Where router2's
    timing-driven ripup stalls on a legal routing (:class:`RipupStalled`), the same router places and
    routes again without it (its log kept as RIPUP_LOG). Returns nextpnr's output, the router that
    routed and whether it ripped up for timing. ``cancel``: as :func:`_run`'s."""
    for kept in [*ROUTER_CHOICES[1:], "router2-tmg-ripup"]:  # kept logs of an earlier run, whichever it tried
        (out / KEPT_LOG.format(kept)).unlink(missing_ok=True)
    attempts = [(router, True) for router in routers]
    while attempts:
        router, ripup = attempts.pop(0)
        w = watch()
        w.ripup = ripup

        def on_line(line: str, w: RouteWatch = w) -> None:
            for prefix, phase in _NEXTPNR_PHASES:
                if line.startswith(prefix):
                    progress(f"nextpnr: {phase}")
            w.line(line, progress)

        options = router_options(router, ripup)
        try:
            return (_run(cmd + options, out, out / "nextpnr.stdout.log", "nextpnr", on_line,
                         watch=out / "nextpnr.log", cancel=cancel), router, "--tmg-ripup" in options)
        except RipupStalled as e:
            (out / "nextpnr.log").replace(out / RIPUP_LOG)
            progress(f"nextpnr: {router}'s timing-driven ripup has stopped improving ({e}); placing and routing "
                     f"again without it")
            attempts.insert(0, (router, False))
        except FitError as e:
            if e.bel != "routing" or not attempts:
                raise
            (out / "nextpnr.log").replace(out / KEPT_LOG.format(router))
            progress(f"nextpnr: {router} is congested ({e.detail}); placing and routing again with "
                     f"{attempts[0][0]}")
    raise AssertionError("no router")  # unreachable: the loop returns or raises


def synthesize(checked, opts: SynthOptions, progress: Progress = lambda s: None) -> SynthResult:
    """Synthesise ``checked`` for ``opts.board``; raises FitError, TimingError or ToolError."""
    from ..hw import sizing
    from ..hw.top import slot_period_for
    from ..nfa.lower import lower

    plat_cls = board(opts.board)
    fam = family(plat_cls)
    routers(fam, opts.router)  # (a router or placer unknown is told now, not after Yosys)
    placer_for(fam, opts.placer, 0, sizing.DEVICES[plat_cls.cepc_device])
    out = Path(opts.out_dir or Path("build") / "synth" / opts.board)
    out.mkdir(parents=True, exist_ok=True)
    freq = float(opts.freq_mhz or plat_cls.cepc_freq_mhz)
    baud = int(opts.baud or plat_cls.cepc_baud)
    if freq <= 0:
        raise UsageError(f"--freq must be positive, not {freq:g}")
    platform = plat_cls()
    osc = platform.default_clk_frequency
    pll = board_pll(fam, osc, freq)
    if abs(pll.output_hz - freq * 1e6) > 0.02 * freq * 1e6:
        raise UsageError(f"the PLL cannot make {freq:g} MHz from the board's {osc / 1e6:g} MHz; the nearest is "
                         f"{pll.output_hz / 1e6:g} MHz")
    if abs(pll.output_hz - freq * 1e6) > 0.001 * freq * 1e6:
        progress(f"note: the PLL makes {pll.output_hz / 1e6:g} MHz, the nearest it can to {freq:g} MHz")
    pll = with_link(fam, pll, baud)
    try:
        design = lower(checked, opts.max_length)
    except ValueError as e:
        raise UsageError(str(e)) from None
    # the table partitioner sized for the board's device (half its block RAM, the rest for the
    # host link's buffer and the FIFOs), or Woods' pipeline with the board's default length
    device = sizing.DEVICES[plat_cls.cepc_device]
    pipeline_default = plat_cls.cepc_partitions if opts.partitioner == "pipeline" else None
    # (the FIFOs as full words, or where those do not fit, behind the pipeline partitioner, as two
    # halves a word; the VHDL back end's FIFOs are full words, its own)
    reserved = sizing.fitting_fifos(design, device, plat_cls.cepc_buffer_bytes,
                                    "table" if opts.hdl == "vhdl" else opts.partitioner)
    if reserved is None:  # no partitioning helps: say so before a minute of Yosys
        raise FitError(_reserved_message(design, device, sizing.reserved_blocks(design, device, plat_cls.cepc_buffer_bytes),
                                         sizing.reserved_blocks(design, device, plat_cls.cepc_buffer_bytes,
                                                                sizing.TWO_BEAT_FIFOS),
                                         opts.partitioner, opts.hdl))
    try:
        choice = sizing.choose(design, device, opts.partitioner, opts.partitions or pipeline_default,
                               evict=bool(opts.evict_after), reserved=reserved, ways=opts.ways)
    except ValueError as e:
        raise UsageError(str(e)) from None

    def period_of(choice) -> int:  # (the pipeline's cycles a tuple, as _place builds it)
        return slot_period_for(design, choice.partitioner, choice.partitions, opts.slot_period, opts.hdl)

    progress(sizing.describe(choice, device, design, period_of(choice)))
    if opts.hdl == "vhdl" and fam == "ice40":
        progress("note: " + vhdl_fifos_in_logic(design))

    def place(choice):
        return _place_fastest(design, choice, opts, plat_cls, fam, out, pll, baud, checked, progress)

    try:
        return place(choice)
    except FitError as e:
        # `auto` sizes the table by block RAM; whether its logic fits, only nextpnr knows (network's two
        # tables on the UP5K: 6,110 of its 5,280 logic cells). Then Woods' pipeline, a few flip-flops a
        # partition, which the user would otherwise have to ask for.
        asked = opts.partitioner != "auto" or opts.partitions is not None or opts.ways is not None
        if asked or choice.partitioner != "table" or e.bel not in LOGIC_BELS:
            raise
        tables = f"the tables of {choice.partitions:,} partitions"
        choice = sizing.fallback(design, device, reserved, f"{tables} do not fit: {e.detail}")
        progress(f"note: {tables} do not fit {plat_cls.device}: {e.detail}; Woods' pipeline partitioner "
                 f"instead, {choice.partitions} partitions")
        progress(sizing.describe(choice, device, design, period_of(choice)))
        return place(choice)


_ELABORATING = threading.Lock()


def extract(plan, out: Path) -> None:
    """The files of Amaranth's build ``plan`` (RTLIL, the Yosys script, the constraints) written into
    ``out``. (Amaranth's own ``BuildPlan.extract`` changes the process's working directory while it
    writes, so that two builds at once in threads, ``bench/synth.py --jobs``, wrote into each other's
    directories: a seed's Yosys found no script.)"""
    for name, content in plan.files.items():
        assert not Path(name).is_absolute() and ".." not in Path(name).parts, name  # (as Amaranth's)
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def board_pll(fam: str, osc_hz: float, mhz: float, at_most: bool = False):
    """The board's PLL at the clock nearest ``mhz`` (``at_most``: the fastest not above it); UsageError
    if it makes none."""
    from ..hw.pll import ecp5_pll, ice40_pll

    try:
        return (ecp5_pll if fam == "ecp5" else ice40_pll)(osc_hz, mhz * 1e6, at_most)
    except ValueError as e:
        raise UsageError(str(e)) from None


def with_link(fam: str, pll, baud: int):
    """``pll`` with the host link's clock: on ECP5 a second output (on iCE40 the oscillator, as it is)."""
    from ..hw.pll import with_link_clock

    if fam != "ecp5":
        return pll
    try:
        return with_link_clock(pll, baud)
    except ValueError as e:
        raise UsageError(str(e)) from None


def pll_at_most(fam: str, osc_hz: float, mhz: float, baud: int):
    """The board's PLL at the fastest clock it makes at or below ``mhz``, with the host link's clock."""
    return with_link(fam, board_pll(fam, osc_hz, mhz, at_most=True), baud)


def builds_text(builds: list[dict]) -> str:
    """--freq max's builds, for the user: each target and what it reached."""
    return ", ".join(f"{b['target_mhz']:g} MHz reached {b['achieved_mhz']:.1f}" for b in builds)


def _place_fastest(design, choice, opts: SynthOptions, plat_cls, fam: str, out: Path, pll, baud: int, checked,
                   progress: Progress) -> SynthResult:
    """:func:`_place`; with ``opts.fastest``, again while the design's clock misses, each time at the
    fastest clock the PLL makes FASTEST_MARGIN or more below what the last build reached (FASTEST_BUILDS
    in all). It writes the report (``report.json``), which gives every build's target and Fmax
    (``freq_builds``) and, where the clock is missed, the clock to ask for (``suggested_freq_mhz``)."""
    osc = pll.input_hz  # (the board's oscillator)
    builds = []
    result = _place(design, choice, opts, plat_cls, fam, out, pll, baud, checked, progress)
    while True:
        clock = result.report.clocks[0] if result.report.clocks else None  # (the design's: sorted first)
        reached = round(clock.achieved_mhz, 2) if clock else None
        builds.append({"target_mhz": round(pll.output_hz / 1e6, 3), "achieved_mhz": reached,
                       "met": result.report.timing_met, "seconds": round(sum(result.seconds.values()), 1)})
        suggested = None
        if clock is not None and not clock.met:
            try:
                suggested = pll_at_most(fam, osc, reached * (1 - FASTEST_MARGIN), baud)
            except UsageError:
                pass
            if suggested is not None and suggested.output_hz < suggested.link_hz:
                suggested = None  # (the host link's clock may not be faster than the design's: none lower)
        if not opts.fastest or suggested is None or len(builds) == FASTEST_BUILDS:
            break
        progress(f"note: --freq max: {pll.output_hz / 1e6:g} MHz missed (the design's clock reached "
                 f"{reached:.1f} MHz); building again at {suggested.output_hz / 1e6:g} MHz, the fastest "
                 f"the PLL makes at least {FASTEST_MARGIN:.0%} below that (build {len(builds) + 1} of at most "
                 f"{FASTEST_BUILDS})")
        try:
            again = _place(design, choice, opts, plat_cls, fam, out, suggested, baud, checked, progress)
        except (UsageError, FitError) as e:  # (nextpnr could not place it this time: the last build stands)
            progress(f"note: --freq max: not built at {suggested.output_hz / 1e6:g} MHz: {e}")
            suggested = None
            break
        pll, result = suggested, again
    summary = result.summary
    summary["suggested_freq_mhz"] = round(suggested.output_hz / 1e6, 3) if suggested else None
    if opts.fastest:
        summary["freq_builds"] = builds
        if result.report.timing_met and len(builds) > 1:
            progress(f"note: --freq max: timing met at {pll.output_hz / 1e6:g} MHz, build {len(builds)} "
                     f"({builds_text(builds[:-1])})")
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n")
    return result


def _place(design, choice, opts: SynthOptions, plat_cls, fam: str, out: Path, pll, baud: int, checked,
           progress: Progress) -> SynthResult:
    """The board top with ``choice``'s partitioner, through Yosys, nextpnr and the packer."""
    from ..cli import _hazards, _update_cycles
    from ..emit.verilog import fast_memory_init
    from ..hw.board_top import BoardTop
    from ..hw.devices import DEVICES
    from ..hw.replica import Replica
    from ..hw.top import slot_period_for
    from .vhdl import MODULE as VHDL_MODULE

    platform = plat_cls()
    partitions = choice.partitions
    options = {"board": opts.board}
    if opts.evict_after:
        options["evict_after"] = opts.evict_after
    if opts.ways:
        options["ways"] = choice.ways
    if opts.max_length:
        options["max_match_length"] = opts.max_length
    cycles = _update_cycles(design, choice.partitioner, opts.update_cycles)
    hazards = _hazards(choice.partitioner, opts.hazards)
    if opts.hdl == "vhdl":
        progress("ghdl: synthesising the VHDL")
    if choice.two_beat_fifos:
        options["two_beat_fifos"] = list(choice.two_beat_fifos)
    period = slot_period_for(design, choice.partitioner, partitions, opts.slot_period, opts.hdl)
    # (Amaranth's elaboration and its build plan, one build at a time in a process: bench/synth.py --jobs
    # builds seeds at once in threads, and two platforms preparing at once lost a clock from one's names)
    with _ELABORATING:
        ld = link_design(design, partitions=partitions, partitioner=choice.partitioner, ways=choice.ways,
                         update_cycles=cycles, hazards=hazards, hdl=opts.hdl, netlist_dir=out,
                         two_beat_fifos=choice.two_beat_fifos, late_measures=True, slot_period=period,
                         # the VHDL reads the ECP5's block RAM through its output register, as Amaranth's does
                         primitives="ecp5" if fam == "ecp5" else None,
                         clock_hz=pll.output_hz, link_hz=pll.link_hz, baud=baud,
                         buffer_bytes=plat_cls.cepc_buffer_bytes,
                         buffer_frames=plat_cls.cepc_buffer_frames, evict_after=opts.evict_after, options=options)
        (out / f"{NAME}.layout.json").write_text(json.dumps(ld.sidecar, indent=2) + "\n")

        seconds = {}
        t0 = time.perf_counter()
        progress("elaborating the board top (Amaranth)")
        # the registers that drive block RAM's pins, a copy per bank, are kept modules of their own so
        # that Yosys does not merge them back into one (cepc.hw.replica.Replica)
        # iCE40: a logic block's eight cells share one clock enable, so a flip-flop whose enable few others
        # share needs a block of its own; at 90 % of the UP5K's cells nextpnr's placer then found no room
        # for one (network: the arbiter's `turn`). Such enables go into the LUT instead.
        # iCE40: ABC maps for the timing of the device named (-device hx, lp or u; Yosys' default is the HX,
        # whose logic and routes are far faster than the UP5K's): for the UP5K it then keeps chains of
        # LUTs off the long paths (network's table: a compare through seven LUTs on the HX's timing)
        extra = {"synth_opts": ice40_synth_options(platform.device)} if fam == "ice40" else {}
        if ld.netlist is not None:  # read by Yosys beside the board top's RTLIL
            platform.add_file(ld.netlist.name, ld.netlist.read_text())
        with fast_memory_init():
            plan = platform.prepare(BoardTop(ld.link, pll), name=NAME, emit_src=False, **extra,
                                    script_after_read=f"setattr -mod -set keep_hierarchy 1 *.{Replica.PREFIX}*\n"
                                                      # (the VHDL's copies: GHDL writes a module per entity)
                                                      f"setattr -mod -set keep_hierarchy 1 {VHDL_MODULE}_replica_*\n"
                                                      + no_collisions_script(),
                                    script_after_synth=f"tee -q -o {NAME}.stat.json stat -json")
        extract(plan, out)
    seconds["elaborate"] = time.perf_counter() - t0

    # 1. Yosys
    t0 = time.perf_counter()
    yosys_cmd = [*tools.yowasp("yosys"), "-q", "-l", "yosys.log", f"{NAME}.ys"]

    def yosys_line(line):
        m = _YOSYS_PASS.match(line)
        if m:
            progress(f"yosys: {m.group(1)}")

    progress("yosys: reading the design")
    _run(yosys_cmd, out, out / "yosys.stdout.log", "Yosys", yosys_line, watch=out / "yosys.log")
    seconds["yosys"] = time.perf_counter() - t0
    stat = json.loads((out / f"{NAME}.stat.json").read_text())

    # 2. nextpnr
    # (its inputs are read from `out`; what it writes goes into the directory it runs in: `out`, or with
    # several seeds at once each seed's own, seeds/S)
    def pnr_command(where: Path) -> list[str]:
        src = "" if where == out else os.path.relpath(out, where) + "/"
        if fam == "ecp5":
            cmd = [*tools.yowasp("nextpnr-ecp5"), platform._nextpnr_device_options[platform.device],
                   "--package", platform._nextpnr_package_options[platform.package].upper(), "--speed",
                   platform.speed, "--lpf", f"{src}{NAME}.lpf", "--textcfg", f"{NAME}.config"]
        else:
            cmd = [*tools.yowasp("nextpnr-ice40"), platform._nextpnr_device_options[platform.device],
                   "--package", platform.package.lower() + platform._nextpnr_package_options.get(platform.device, ""),
                   "--pcf", f"{src}{NAME}.pcf", "--asc", f"{NAME}.asc"]
        return cmd + ["--json", f"{src}{NAME}.json", "--report", "nextpnr-report.json", "--sdf", f"{NAME}.sdf",
                      "--threads", "1", "--timing-allow-fail", "--log", "nextpnr.log"]

    flip_flops = sum(n for cell, n in rep.yosys_cells(stat).items() if cell == "TRELLIS_FF" or cell.startswith("SB_DFF"))
    placer, why = placer_for(fam, opts.placer, flip_flops, DEVICES[plat_cls.cepc_device])
    if opts.placer == "auto" and placer != "heap":
        progress(f"note: nextpnr's {placer} placer: {why} (--placer heap to use HeAP)")
    tried = routers(fam, opts.router)
    placers = [placer]  # (the placer of the seeds to come: see route)

    def route(seed: int, where: Path = out, cancel: threading.Event | None = None,
              say: Progress = progress) -> Routed:
        """nextpnr at ``seed``, run in ``where``: its report, read (``cancel``: see :func:`_run`)."""
        report_path = where / "nextpnr-report.json"
        report_path.unlink(missing_ok=True)
        say("nextpnr: reading the netlist")
        used = placers[-1]
        try:
            log, router, ripup = place_and_route(pnr_command(where) + ["--placer", used, "--seed", str(seed)],
                                                 where, tried,
                                                 lambda: RouteWatch(platform.device, seed, partitions,
                                                                    where / "nextpnr.log", opts.board),
                                                 say, cancel=cancel)
        except ToolError as e:
            text = (where / "nextpnr.stdout.log").read_text(errors="replace")
            fit = placement_error(text, platform.device, partitions, seed, opts.board)
            again = placer_again(text, opts.placer, used)
            if fit and again:  # (then for every seed after this one too)
                say(f"note: nextpnr's HeAP placer could not place the design at the device's limit with "
                    f"--seed {seed}; the {again} placer instead (--placer heap to keep HeAP)")
                if placers[-1] != again:  # (another seed, placed at once, may have said so already)
                    placers.append(again)
                return route(seed, where, cancel, say)
            if fit and opts.hdl == "vhdl" and fam == "ice40":
                fit = FitError(f"{fit}; {vhdl_fifos_in_logic(design)}", bel=fit.bel, detail=fit.detail)
            if fit:
                raise fit from None
            raise e
        if not report_path.exists():
            raise ToolError("nextpnr wrote no report", pnr_command(where), _tail(log))
        nreport = json.loads(report_path.read_text())
        clock_name, link_name = _clocks(nreport)
        targets = {name: round(hz / 1e6, 3) for name, hz in ((clock_name, pll.output_hz),
                                                             (link_name, pll.link_hz)) if name}
        parsed = rep.parse(nreport, stat, board=opts.board, family=fam, device=platform.device,
                           package=platform.package, targets_mhz=targets or None)
        # the design's clock first (its Fmax is the one that counts tuples), then its critical path
        parsed.clocks.sort(key=lambda c: c.name != clock_name)
        parsed.critical_paths.sort(key=lambda p: p.clock != clock_name)
        routed = Routed(seed, parsed, router, ripup)
        sdf = where / f"{NAME}.sdf"
        if routed.clock is not None and not routed.clock.met and sdf.exists():
            # (every endpoint that misses the design's clock, from the delays nextpnr timed)
            routed.endpoints = sta.endpoints(sdf.read_text(), 1000 / routed.clock.target_mhz)
        return routed

    t0 = time.perf_counter()
    placed = f"{NAME}.config" if fam == "ecp5" else f"{NAME}.asc"
    routed, runs = sweep_seeds(opts.seeds, route, out, [placed, "nextpnr-report.json", f"{NAME}.sdf", "nextpnr.log",
                                                        "nextpnr.stdout.log"], progress, jobs=opts.jobs)
    seconds["nextpnr"] = time.perf_counter() - t0
    parsed, router, ripup = routed.report, routed.router, routed.ripup

    summary = _summary(parsed, ld, opts, pll, partitions, baud, checked, routed.seed)
    if routed.endpoints is not None:  # (the design's clock missed: where)
        summary["endpoints"] = routed.endpoints.to_json()
        summary["endpoints"]["summary"] = routed.endpoints.summary()
        summary["endpoints"]["paths"] = routed.endpoints.paths()  # (the worst path into each of the worst four)
    if runs:  # (several seeds: each one's clock, in the order tried)
        summary["seeds"] = runs
    summary["router"] = router or "router1"  # nextpnr-ice40's default
    summary["tmg_ripup"] = ripup  # (router2's timing-driven ripup, unless it stalled)
    if placers[-1] != placer:  # (HeAP could not place it: see route)
        placer, why = placers[-1], "HeAP could not place the design at the device's limit"
    summary["placer"] = placer
    summary["placer_reason"] = why
    bitstream = None
    timing_ok = parsed.timing_met
    if timing_ok or opts.allow_timing_fail:
        if opts.pack:
            t0 = time.perf_counter()
            progress("packing the bitstream")
            if fam == "ecp5":
                bitstream = out / f"{NAME}.bit"
                cmd = [*tools.yowasp("ecppack"), "--compress", "--input", f"{NAME}.config", "--bit", bitstream.name]
            else:
                bitstream = out / f"{NAME}.bin"
                cmd = [*tools.yowasp("icepack"), f"{NAME}.asc", bitstream.name]
            _run(cmd, out, out / "pack.log", "the bitstream packer", lambda line: None)
            seconds["pack"] = time.perf_counter() - t0
    summary["bitstream"] = str(bitstream) if bitstream else None
    summary["seconds"] = {k: round(v, 2) for k, v in seconds.items()}
    return SynthResult(parsed, summary, bitstream, seconds)  # (report.json: _place_fastest writes it)


@dataclass
class Routed:
    """One placement and routing: the seed, nextpnr's report read, the router and whether it ripped up."""

    seed: int
    report: rep.SynthReport
    router: str | None
    ripup: bool
    endpoints: sta.Endpoints | None = None  # where the design's clock missed, every endpoint (sta)

    @property
    def clock(self) -> rep.ClockTiming | None:
        """The design's clock (the parsed report sorts it first)."""
        return self.report.clocks[0] if self.report.clocks else None

    def rank(self) -> tuple[bool, float]:
        """Which of two placements is kept: one that meets every clock, then the faster design clock."""
        return self.report.timing_met, self.clock.achieved_mhz if self.clock else 0.0


def seed_run(r: Routed) -> dict:
    """A seed's line in the report's ``seeds``: the design's clock and its critical path."""
    path = r.report.critical_paths[0].summary() if r.report.critical_paths else None
    return {"seed": r.seed, "achieved_mhz": round(r.clock.achieved_mhz, 2) if r.clock else None,
            "met": r.report.timing_met, "critical_path": path,
            **({"endpoints_failing": r.endpoints.failing} if r.endpoints is not None else {})}


def seeds_text(runs: list[dict], kept: int | None = None) -> str:
    """Each seed tried and what its design clock reached, for the user."""
    def one(r):
        what = "failed" if "error" in r else "no clock" if r["achieved_mhz"] is None else f"{r['achieved_mhz']:.1f} MHz"
        return f"{r['seed']}: {what}" + (" (kept)" if r["seed"] == kept else "")
    return ", ".join(one(r) for r in runs)


def sweep_seeds(seeds: tuple[int, ...], route: Callable[..., Routed], out: Path, artefacts: list[str],
                progress: Progress = lambda s: None, jobs: int = 1) -> tuple[Routed, list[dict]]:
    """Place and route at each of ``seeds`` in turn (``route``, on the same netlist) until one meets
    every clock. nextpnr's placement, and so its Fmax, moves with the seed (finance0 on the ECP5-85F:
    144.3, 142.3, 133.5, 132.6, 140.1 MHz at seeds 1-5), so a design a little short of its clock may
    meet it at another. Kept: the first to meet, else the fastest design clock; its files (``artefacts``,
    written into ``out``) are left there, and every seed's are kept in ``out``/seeds/S. A seed that
    nextpnr cannot place or route is told and passed over; if none is, the first one's error is
    raised. Returns the run kept and each seed's line for the report (none, for one seed).

    With ``jobs`` above one, that many seeds are placed and routed at once, each in its own directory
    (``route(seed, where, cancel, say)``), and read in the seeds' order: the seeds tried, the one kept and
    the report are those of the sweep one at a time; once a seed meets the clock, the seeds after it are
    stopped (those running) or never started."""
    if len(seeds) == 1:
        return route(seeds[0]), []
    kept_dir = out / "seeds"
    shutil.rmtree(kept_dir, ignore_errors=True)
    if jobs > 1:
        return _sweep_at_once(seeds, route, out, artefacts, progress, jobs)
    tally = _Tally(progress)
    for i, seed in enumerate(seeds):
        progress(f"nextpnr: seed {seed} ({i + 1} of {len(seeds)})")
        try:
            r = route(seed)
        except (FitError, ToolError) as e:
            tally.failed(seed, e)
            continue
        (kept_dir / str(seed)).mkdir(parents=True)
        for name in artefacts:
            if (out / name).exists():
                shutil.copy2(out / name, kept_dir / str(seed) / name)
        if tally.placed(r):
            break
        if i + 1 < len(seeds):
            progress(f"note: nextpnr seed {seed}: timing missed{_reached(r)}; placing and routing again at seed "
                     f"{seeds[i + 1]}")
    best = tally.kept()
    if best.seed != tally.runs[-1]["seed"]:  # (the last seed's files are in `out`: the kept one's go back)
        for name in artefacts:
            if (kept_dir / str(best.seed) / name).exists():
                shutil.copy2(kept_dir / str(best.seed) / name, out / name)
    return best, tally.runs


class _Tally:
    """A sweep's seeds as they are read, in order: each one's line for the report, the placement kept (the
    first to meet every clock, else the fastest design clock) and the first error."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.runs: list[dict] = []
        self.best: Routed | None = None
        self.first_error: Exception | None = None

    def failed(self, seed: int, e: Exception) -> None:
        """``seed`` could not be placed or routed: told, and passed over."""
        self.runs.append({"seed": seed, "error": str(e)})
        self.first_error = self.first_error or e
        self.progress(f"note: nextpnr seed {seed}: {e}")

    def placed(self, r: Routed) -> bool:
        """``r`` placed and routed; whether it meets every clock (then no seed after it is wanted)."""
        self.runs.append(seed_run(r))
        if self.best is None or r.rank() > self.best.rank():
            self.best = r
        return r.report.timing_met

    def kept(self) -> Routed:
        """The placement kept, or the first seed's error where none was placed."""
        if self.best is None:
            raise self.first_error
        return self.best


def _reached(r: Routed) -> str:
    """What a placement's design clock reached, for a note."""
    return f" (the design's clock reached {r.clock.achieved_mhz:.1f} of {r.clock.target_mhz:g} MHz)" if r.clock else ""


def _sweep_at_once(seeds: tuple[int, ...], route: Callable[..., Routed], out: Path, artefacts: list[str],
                   progress: Progress, jobs: int) -> tuple[Routed, list[dict]]:
    """:func:`sweep_seeds` with ``jobs`` seeds placed and routed at once, each in ``out``/seeds/S."""
    kept_dir = out / "seeds"
    cancel = {seed: threading.Event() for seed in seeds}
    tally = _Tally(progress)
    futures = {}  # (filled once the pool has them: what the `finally` stops)

    def one(seed: int) -> Routed:
        if cancel[seed].is_set():
            raise Cancelled("not started")
        where = kept_dir / str(seed)
        where.mkdir(parents=True)
        # (each seed's steps, told apart: the seed in the line)
        return route(seed, where, cancel[seed], lambda step: progress(
            step.replace("nextpnr: ", f"nextpnr seed {seed}: ", 1) if step.startswith("nextpnr: ") else step))

    progress(f"nextpnr: {len(seeds)} seeds, {jobs} at a time")
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="nextpnr")
    try:
        futures.update({seed: pool.submit(one, seed) for seed in seeds})
        for seed in seeds:
            try:
                r = futures[seed].result()
            except (FitError, ToolError) as e:
                tally.failed(seed, e)
                shutil.rmtree(kept_dir / str(seed), ignore_errors=True)  # (as one at a time: no files kept)
                continue
            if tally.placed(r):
                break
            progress(f"note: nextpnr seed {seed}: timing missed{_reached(r)}")
    finally:  # (a seed met the clock, or Ctrl-C: the seeds after stop, and none is left running)
        tried = {run["seed"] for run in tally.runs}
        for seed in seeds:
            if seed not in tried:
                cancel[seed].set()
                if seed in futures:
                    futures[seed].cancel()
        pool.shutdown(wait=True)
        for seed in seeds:  # (the seeds stopped leave nothing behind)
            if seed not in tried:
                shutil.rmtree(kept_dir / str(seed), ignore_errors=True)
    best = tally.kept()
    for name in artefacts:  # (the kept placement's files where the packer and the user look)
        (out / name).unlink(missing_ok=True)
        if (kept_dir / str(best.seed) / name).exists():
            shutil.copy2(kept_dir / str(best.seed) / name, out / name)
    return best, tally.runs


# A design clock missed by at most this share, at one seed, may be met at another: the timing error says so
# (finance0 on the ECP5-85F: 142.4, 150.9, 141.7, 150.3, 149.8 MHz at seeds 1-5 against 150; the examples'
# seeds spread by 6-25 %, bench/results/synth.md)
SEED_REACH = 0.10


def check_timing(result: SynthResult) -> None:
    """Raise TimingError naming the clock, the achieved and target frequency and the critical path."""
    bad = [c for c in result.report.clocks if not c.met]
    if not bad:
        return
    c = bad[0]
    path = next((p for p in result.report.critical_paths if p.clock == c.name), None)
    short = c.achieved_mhz / c.target_mhz - 1
    by = f"{short:+.0%}" if abs(short) >= 0.01 else f"{short:+.1%}"  # (not "-0%")
    msg = (f"timing missed on {result.report.device}: clock {c.name!r} reaches {c.achieved_mhz:.1f} MHz, "
           f"the target is {c.target_mhz:.1f} MHz ({by})")
    if path:
        msg += f"; critical path {path.summary()}"
    late = result.summary.get("endpoints")
    if late and c is result.report.clocks[0]:  # (the design's clock: every endpoint that misses it)
        msg += f"; {late['summary']}"
    runs = result.summary.get("seeds")
    if runs:
        msg += f"; at nextpnr's seeds {seeds_text(runs, result.summary['options']['seed'])}"
    elif c is result.report.clocks[0] and short >= -SEED_REACH:
        msg += (f"; that is within {SEED_REACH:.0%}, and nextpnr's placement seed moves the clock by as much: "
                f"--seed 1-5 places and routes at each in turn until one meets it")
    builds = result.summary.get("freq_builds")
    if builds and len(builds) > 1:
        msg += f"; --freq max built {len(builds)} times ({builds_text(builds)})"
    lower = result.summary.get("suggested_freq_mhz")  # (set only where the design's clock, bad[0], missed)
    if lower:
        msg += (f"; lower --freq: {lower:g} MHz is the fastest the PLL makes at least {FASTEST_MARGIN:.0%} below "
                f"what this placement reached (a placement at another target reaches a little more or less), "
                f"and --freq max builds at such a clock until it is met")
    else:
        msg += "; lower --freq"
    if result.bitstream:  # --allow-timing-fail
        msg += f" (the bitstream was written anyway, as --allow-timing-fail asks: {result.bitstream})"
    else:
        msg += " (the bitstream was not written; --allow-timing-fail writes it anyway)"
    raise TimingError(msg)


def _clocks(nreport: dict) -> tuple[str | None, str | None]:
    """The names nextpnr gives the board top's two clocks: the design's (``clk``) and the host
    link's (``link_clk``), each None if not found."""
    names = list(nreport.get("fmax", {}))
    link = next((n for n in names if "link_clk" in n), None)
    design = next((n for n in names if n != link and n.endswith("clk")), None)
    return design, link


LOGIC_BELS = {"TRELLIS_COMB", "TRELLIS_SLICE", "TRELLIS_FF", "ICESTORM_LC"}  # (not block RAM, I/O or DSPs)
BEL_NAMES = {"TRELLIS_COMB": "LUTs", "TRELLIS_SLICE": "slices", "TRELLIS_FF": "flip-flops", "DP16KD": "block RAMs",
             "ICESTORM_LC": "logic cells", "ICESTORM_RAM": "block RAMs", "TRELLIS_RAMW": "LUT RAM cells",
             "MULT18X18D": "multipliers", "ICESTORM_DSP": "DSPs", "TRELLIS_IO": "I/O pins", "SB_IO": "I/O pins"}


def vhdl_fifos_in_logic(design) -> str:
    """Why the VHDL back end's design is larger on an iCE40: its output FIFOs are LUT RAM."""
    from ..hw.layouts import record_layout
    from ..hw.top import OUTPUT_FIFO_DEPTH

    # (hdl_templates/top.vhd.j2: a FIFO of RECORD_BITS per query, one of TUPLE_WIDTH)
    bits = OUTPUT_FIFO_DEPTH * (len(design.queries) * record_layout(design).size + design.tuple.nbytes * 8)
    return (f"the VHDL back end's output FIFOs are LUT RAM, which the iCE40 does not have, so their {bits:,} bits "
            f"are flip-flops and multiplexers here; --hdl verilog puts them in block RAM")


def larger_boards(board: str) -> list[str]:
    """The boards whose device is larger than ``board``'s (more flip-flops), smallest first (by flip-flops,
    then block RAM)."""
    from ..hw.devices import DEVICES

    devices = {name: DEVICES[cls.cepc_device] for name, cls in boards().items()}
    size = devices[board].ffs
    return sorted((name for name, d in devices.items() if d.ffs > size),
                  key=lambda name: (devices[name].ffs, devices[name].blocks, name))


def smaller_hint(partitions: int, board: str | None = None) -> str:
    """What may make a design fit that does not: fewer partitions, or, with one already, a smaller
    query or a board with a larger device (``board``'s larger ones, where given)."""
    if partitions > 1:
        return f"use fewer --partitions (now {partitions})"
    larger = larger_boards(board) if board else []
    where = f" ({', '.join(larger)})" if larger else ""
    return (f"use a smaller query (fewer or narrower MEASURES and aggregates) or a board with a larger "
            f"device{where}: it has one partition already")


def placement_error(log: str, device: str, partitions: int, seed: int, board: str | None = None) -> FitError | None:
    """The error for a nextpnr log that stopped because the design does not fit ``device``, or fits on
    paper but could not be placed with ``seed`` (None if it stopped for another reason). ``board``:
    the board's name, for the larger ones to suggest where fewer partitions cannot help."""
    failure = rep.placement_failure(log)
    if failure:
        bel, use = failure
        what = f"{BEL_NAMES.get(bel, bel)} ({bel})"
        if use and use.available:
            over = use.used - use.available
            detail = (f"it needs {use.used:,} {what}, the device has {use.available:,} "
                      f"({over:,} or {100 * over / use.available:.0f}% over)")
        else:
            detail = f"it needs more {what} than the device has"
        # (nextpnr stops at the first kind it cannot place: the others over the device are named too, so
        # that fewer partitions or a smaller query is judged by all of them)
        also = [f"{u.used:,} {BEL_NAMES.get(b, b)} ({b}) of {u.available:,} ({100 * (u.used - u.available) / u.available:.0f}% over)"
                for b, u in rep.log_utilisation(log).items() if b != bel and u.available and u.used > u.available]
        if also:
            detail += ", and " + ", ".join(also)
        return FitError(f"the design does not fit {device}: {detail}; {smaller_hint(partitions, board)}",
                        bel=bel, detail=detail)
    limit = rep.placement_at_limit(log)
    if limit:
        bel, use = limit
        return FitError(f"nextpnr could not place the design on {device} with --seed {seed}: it is at the device's "
                        f"limit ({use.used:,} of {use.available:,} {BEL_NAMES.get(bel, bel)} ({bel}), "
                        f"{100 * use.used / use.available:.0f}%); another --seed may place it, or "
                        f"{smaller_hint(partitions, board)}")
    return None


def _reserved_message(design, device, reserved, halved, partitioner: str = "auto", hdl: str = "verilog") -> str:
    from ..hw.layouts import record_layout
    from ..hw.sizing import FIFO_DEPTH
    from ..hw.top import keyed

    over = reserved.blocks - device.blocks
    text = (f"the design does not fit {device.family}: its output FIFOs alone ({len(design.queries)} of "
            f"{record_layout(design).size}-bit match records and one of {design.tuple.nbytes * 8}-bit tuples, "
            f"{FIFO_DEPTH} deep; this device has no LUT RAM, so each takes a block RAM per 16 bits of width) "
            f"take {reserved.fifos} {device.block}s and the host link's buffer {reserved.buffer}: "
            f"{reserved.blocks} of the device's {device.blocks} ({over} over) before any partition state; ")
    # (why they cannot be stored as two halves a word either)
    if not keyed(design):
        why = "without PARTITION BY there is no pipeline partitioner to store them as two halves a word"
    elif halved.blocks > device.blocks:
        why = (f"as two halves a word (behind the pipeline partitioner) they take {halved.blocks} "
               f"({halved.fifos} and {halved.buffer})")
    elif hdl == "vhdl":
        why = "--hdl verilog would store them as two halves a word, behind the pipeline partitioner"
    else:
        why = "--partitioner pipeline would store them as two halves a word"
    return (text + why + "; fewer --partitions cannot help; fewer or narrower MEASURES, fewer queries or a larger "
            "device can")


def _summary(parsed: rep.SynthReport, ld: LinkDesign, opts: SynthOptions, pll, partitions: int, baud: int,
             checked, seed: int) -> dict:
    from ..hw.top import keyed, pipelined

    per_cycle = 1 / ld.top.slot_period if pipelined(ld.design, ld.top.partitioner) else 1.0
    # a run of tuples of one key: each waits for the one before's write (the two-cycle update: a cycle;
    # --hazards stall: until block RAM has it)
    one_key = per_cycle if not keyed(ld.design) else \
        1 / (ld.top.stall_spacing + 1) if ld.top.hazards == "stall" else per_cycle / ld.top.update_cycles
    clock = parsed.clocks[0] if parsed.clocks else None
    tuple_bytes = ld.design.tuple.nbytes
    frame_tuples = max(1, 240 // tuple_bytes)
    # UART: 10 bits per byte; a TUPLES frame adds type, seq, CRC and two ENDs (escapes ignored)
    uart_tps = baud / 10 / (tuple_bytes + 6 / frame_tuples)
    return {
        "cepc_version": __version__,
        "query": str(checked.source.name),
        **parsed.to_json(),
        "options": {"hdl": opts.hdl, "partitioner": ld.top.partitioner, "partitions": partitions, "bus_width": 8,
                    "update_cycles": ld.top.update_cycles, "hazards": ld.top.hazards,
                    **({"slot_period": ld.top.slot_period} if ld.top.slot_period != 2 else {}),
                    **({"stall_spacing": ld.top.stall_spacing} if ld.top.hazards == "stall" else {}),
                    "target_mhz": opts.freq_mhz or None,
                    "clock_mhz": round(pll.output_hz / 1e6, 3), "link_clock_mhz": round(pll.link_hz / 1e6, 3),
                    "baud": baud, "baud_divisor": ld.link.divisor,
                    "seed": seed, "buffer_bytes": ld.link.buffer_bytes, "evict_after": opts.evict_after,
                    **({"ways": ld.top.ways} if opts.ways else {})},  # (a hashed table's, as --ways asked)
        "design_id": f"{ld.design_id:08x}",
        "timing_met": parsed.timing_met,
        "tuples_per_cycle": per_cycle,
        "tuples_per_cycle_one_key": round(one_key, 4),
        "tuples_per_second_at_fmax": round(clock.achieved_mhz * 1e6 * per_cycle) if clock else None,
        "tuples_per_second_at_clock": round(pll.output_hz * per_cycle),
        "tuples_per_second_uart": round(uart_tps),
        "latency_cycles": ld.top.latency,
    }
