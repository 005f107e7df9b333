"""Reading Yosys and nextpnr reports: on real reports the tools here produced (tests/fixtures/synth/)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from cepc.errors import FitError, TimingError, ToolError, UsageError
from cepc.synth import flow
from cepc.synth import report as rep
from cepc.synth.flow import placement_error

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "synth"
ROOT = Path(__file__).resolve().parent.parent


def load(name: str) -> tuple[dict, dict]:
    return (json.loads((FIXTURES / f"{name}.report.json").read_text()),
            json.loads((FIXTURES / f"{name}.stat.json").read_text()))


def test_ice40_report():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    assert r.resources["lut"] == rep.Resource(4748, 5280)  # logic cells
    assert r.resources["bram"] == rep.Resource(26, 30)
    assert r.resources["pll"] == rep.Resource(1, 1)
    assert r.resources["ff"].used == 3064 and r.resources["ff"].available == 5280  # from the netlist's SB_DFF*
    assert r.resources["carry"].used == 532 and r.resources["carry"].available is None
    assert r.resources["lut"].percent == pytest.approx(89.92, abs=0.01)
    (clk,) = r.clocks
    assert clk.name == "clk" and clk.achieved_mhz == pytest.approx(31.93, abs=0.01)
    assert clk.target_mhz == pytest.approx(51.0, abs=0.01) and not clk.met and not r.timing_met
    path = next(p for p in r.critical_paths if p.clock == "clk")
    assert path.delay_ns == pytest.approx(1000 / clk.achieved_mhz, rel=0.02)  # the critical path sets Fmax
    assert path.logic_levels >= 5 and path.logic_ns + path.routing_ns == pytest.approx(path.delay_ns)
    assert path.through and all("$" not in n and "_SB_" not in n for n in path.through)
    j = r.to_json()
    assert j["resources"]["lut"] == {"used": 4748, "available": 5280, "percent": 89.92}
    assert j["clocks"][0]["met"] is False and j["critical_paths"][0]["summary"].startswith(f"{path.delay_ns:.2f} ns")


def test_targets_override_the_constraint():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48",
                  targets_mhz={"clk": 30.0})
    assert r.clocks[0].met and r.timing_met


def test_timing_error_names_the_clock_the_numbers_and_the_path():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(r, {}, None))
    msg = str(e.value)
    assert msg.startswith("timing missed on iCE40UP5K: clock 'clk' reaches 31.9 MHz, the target is 51.0 MHz (-37%); "
                          "critical path ")
    assert " logic levels (" in msg and msg.endswith("lower --freq (the bitstream was not written; "
                                                     "--allow-timing-fail writes it anyway)")
    # with --allow-timing-fail the bitstream is written, and the error says so (it once said it was not)
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(r, {}, Path("build/cepc_board.bin")))
    assert str(e.value).endswith("lower --freq (the bitstream was written anyway, as --allow-timing-fail asks: "
                                 "build/cepc_board.bin)")


def test_timing_error_names_a_clock_to_ask_for_and_the_builds_of_freq_max():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    builds = [{"target_mhz": 100.5, "achieved_mhz": 51.44, "met": False},
              {"target_mhz": 49.5, "achieved_mhz": 49.1, "met": False}]
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(r, {"suggested_freq_mhz": 30.75, "freq_builds": builds}, None))
    msg = str(e.value)
    assert "; --freq max built 2 times (100.5 MHz reached 51.4, 49.5 MHz reached 49.1); " in msg
    assert ("; lower --freq: 30.75 MHz is the fastest the PLL makes at least 3% below what this placement reached "
            in msg) and msg.endswith("(the bitstream was not written; --allow-timing-fail writes it anyway)")


def test_a_clock_missed_by_less_than_a_percent_says_by_how_much():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48",
                  targets_mhz={"clk": 32.0})
    with pytest.raises(TimingError, match=r"reaches 31\.9 MHz, the target is 32\.0 MHz \(-0\.[1-9]%\)"):
        flow.check_timing(flow.SynthResult(r, {}, None))


def test_a_clock_missed_by_a_little_at_one_seed_says_another_seed_may_meet_it():
    # (finance0 on the ECP5-85F misses 150 MHz at seed 1, 142.4, and meets it at seed 2, 150.9)
    report, stat = load("ice40_marathon")
    hint = ("; that is within 10%, and nextpnr's placement seed moves the clock by as much: --seed 1-5 places and "
            "routes at each in turn until one meets it")
    near = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48",
                     targets_mhz={"clk": 35.0})  # (31.9 MHz: 9 % short)
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(near, {}, None))
    assert hint in str(e.value)
    far = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48",
                    targets_mhz={"clk": 36.0})  # (11 % short)
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(far, {}, None))
    assert "--seed" not in str(e.value)
    # several seeds tried already: the error lists them instead
    runs = [{"seed": 1, "achieved_mhz": 31.9, "met": False}, {"seed": 2, "achieved_mhz": 31.2, "met": False}]
    with pytest.raises(TimingError) as e:
        flow.check_timing(flow.SynthResult(near, {"seeds": runs, "options": {"seed": 1}}, None))
    assert "; at nextpnr's seeds 1: 31.9 MHz (kept), 2: 31.2 MHz" in str(e.value) and hint not in str(e.value)


def test_does_not_fit_is_read_from_the_log():
    log = (FIXTURES / "ice40_does_not_fit.log").read_text()
    bel, use = rep.placement_failure(log)
    assert bel == "ICESTORM_LC" and use == rep.Resource(6687, 5280)
    assert rep.log_utilisation(log)["ICESTORM_RAM"] == rep.Resource(26, 30)
    assert rep.placement_failure("Info: Program finished normally.\n") is None


def test_a_full_region_is_does_not_fit():
    # nextpnr's analytic placer, with logic cells at 103 %, stops with "Failed to expand region"
    # (network on the UP5K with a 4-long pipeline whose delay line is registers)
    log = (FIXTURES / "ice40_region_full.log").read_text()
    assert "ERROR: Failed to expand region (0, 0) |_> (25, 31) of 5451 ICESTORM_LCs" in log
    bel, use = rep.placement_failure(log)
    assert bel == "ICESTORM_LC" and use == rep.Resource(5452, 5280)


def test_no_legal_placement_at_the_limit_is_reported():
    # nextpnr's placer, with logic cells at 94 %, could not legalise the placement on seed 1 (network on
    # the UP5K at f2aea2d; seeds 3 and 5 placed it): the fullest resource is named
    log = (FIXTURES / "ice40_no_legal_placement.log").read_text()
    assert "ERROR: Unable to find legal placement for all cells" in log
    assert rep.placement_failure(log) is None  # it fits on paper
    bel, use = rep.placement_at_limit(log)
    assert bel == "ICESTORM_LC" and use == rep.Resource(4975, 5280)
    assert rep.placement_at_limit((FIXTURES / "ice40_region_full.log").read_text()) is None
    # finance5 at 950145b's parent (4,762 logic cells, 90 %; 29 of 30 block RAMs, 97 %), at seed 3: the
    # logic cells still overlapping (HeAP's last "overlap: COMB=18.3%, RAM=0.0%"), not the fuller block RAM
    finance5 = (FIXTURES / "ice40_finance5_no_legal_placement.log").read_text()
    assert rep.placement_at_limit(finance5) == ("ICESTORM_LC", rep.Resource(4762, 5280))
    assert rep.placement_at_limit(finance5.replace("COMB=18.3%, RAM=0.0%", "COMB=0.0%, RAM=2.0%")) == \
        ("ICESTORM_RAM", rep.Resource(29, 30))
    assert rep.placement_at_limit(finance5.replace("COMB=18.3%", "COMB=0.0%")) == \
        ("ICESTORM_RAM", rep.Resource(29, 30))  # (no group overlapping: the fullest)
    # what `cepc synth` then says: the seed, the fullest resource, and what may help
    err = placement_error(log, "iCE40UP5K", 2, 1)
    assert isinstance(err, FitError) and str(err) == (
        "nextpnr could not place the design on iCE40UP5K with --seed 1: it is at the device's limit (4,975 of "
        "5,280 logic cells (ICESTORM_LC), 94%); another --seed may place it, or use fewer --partitions (now 2)")
    full = placement_error((FIXTURES / "ice40_region_full.log").read_text(), "iCE40UP5K", 16, 1)
    assert str(full).startswith("the design does not fit iCE40UP5K: it needs 5,452 logic cells (ICESTORM_LC)")
    assert placement_error("Info: Program finished normally.\n", "iCE40UP5K", 2, 1) is None
    # `--placer auto` then places again with the static placer; not where the design does not fit, nor
    # after the static placer, nor with a placer the user named
    region_full = (FIXTURES / "ice40_region_full.log").read_text()
    assert flow.placer_again(log, "auto", "heap") == "static"
    assert flow.placer_again(region_full, "auto", "heap") is None
    assert flow.placer_again(log, "auto", "static") is None and flow.placer_again(log, "heap", "heap") is None
    assert flow.placer_again("Info: Program finished normally.\n", "auto", "heap") is None


def test_clean_names():
    assert rep.clean_name("link.link.design.q0_partitioner.e51_key_TRELLIS_FF_Q_2") == \
        "link.link.design.q0_partitioner.e51_key"
    assert rep.clean_name("framer.buf_TRELLIS_FF_Q_153_DI_LUT4_Z_D") == "framer.buf"
    assert rep.clean_name("link.link.frames.storage[8]_SB_DFFE_Q_2_DFFLC") == "link.link.frames.storage[8]"
    assert rep.clean_name("count") == "count"


def test_yosys_cells_need_a_top():
    with pytest.raises(ValueError, match="name no top module"):
        rep.yosys_cells({"modules": {"\\a": {}, "\\b": {}}})


def test_an_interrupted_tool_run_stops_the_tool(tmp_path):
    # a test's timeout or Ctrl-C while nextpnr routes must not leave nextpnr running (an orphan
    # holds a core for as long as its router takes)
    pidfile = tmp_path / "pid"
    tool = [sys.executable, "-c", f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
            "print('Info: Routing', flush=True); time.sleep(120)"]

    def on_line(line):
        if "Routing" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        flow._run(tool, tmp_path, tmp_path / "tool.log", "the tool", on_line)
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped


def replay(log: str) -> tuple[flow.RouteWatch, FitError | None]:
    w = flow.RouteWatch("LFE5U-85F", 1, 2048, Path("nextpnr.log"))
    try:
        for line in (FIXTURES / log).read_text().splitlines():
            w.line(line)
    except FitError as e:
        return w, e
    return w, None


def test_a_design_that_routes_is_never_taken_for_congested():
    # network on the ULX3S-12F: 53 iterations, 15 of them at 1-3 overused wires without a new low
    w, error = replay("ecp5_router2_routed.log")
    assert error is None and (w.iteration, w.overused, w.best) == (53, 0, 0)


def test_a_congested_design_is_told_from_the_router_log():
    # finance0 on the ECP5-85F at 2,048 partitions, seed 1 (a variant of its table whose stage-4 words have
    # no reset): the overused wires fall to 2,871 at iteration 16, then climb to 10,496 at 41
    w, error = replay("ecp5_router2_congested.log")
    assert error is not None and w.diverged and error.bel == "routing"
    assert w.iteration - w.best_iteration == flow.RouteWatch.PATIENCE and w.overused >= flow.RouteWatch.FLOOR
    assert str(error).startswith("nextpnr could not route the design on LFE5U-85F with --seed 1: it is congested. "
                                 f"The fewest wires overused were {w.best:,}, at iteration {w.best_iteration}; ")
    assert "Another --seed may route it, or use fewer --partitions (now 2048)" in str(error)


def test_a_congested_route_stops_nextpnr(tmp_path):
    # the flow's own path: the watch reads the log as the tool writes it, and its error stops the tool
    tool = [sys.executable, "-c", "import sys, time\nfor line in open(sys.argv[1]):\n"
            "    print(line, end='', flush=True)\ntime.sleep(120)", str(FIXTURES / "ecp5_router2_congested.log")]
    w = flow.RouteWatch("LFE5U-85F", 1, 2048, tmp_path / "tool.log")
    seen = []
    with pytest.raises(FitError, match="could not route"):
        flow._run(tool, tmp_path, tmp_path / "tool.log", "nextpnr", lambda line: w.line(line, seen.append))
    assert seen[-1] == f"nextpnr: routing, iteration {w.iteration}: {w.overused:,} wires overused"


def test_a_long_tail_of_a_few_overused_wires_is_not_congestion():
    # the last few wires can take router2 many iterations (network above: 15 at 1-3); below FLOOR,
    # no new low is no sign of congestion
    w = flow.RouteWatch()
    for it, over in enumerate([900, 300, 40, 1] + [3] * 40, start=1):
        w.line(f"Info:     iter={it} wires=80000 overused={over} overuse={over} archfail=NA")
    assert not w.diverged and w.iteration - w.best_iteration == 40


# a stand-in for nextpnr: router2 replays finance0's congested log (and would then run on), router1
# routes; each call is noted in calls.txt
FAKE_NEXTPNR = """
import sys, time
args = sys.argv[1:]
router = args[args.index("--router") + 1] if "--router" in args else None
with open("calls.txt", "a") as fh:
    fh.write(f"{router}{'+tmg-ripup' if '--tmg-ripup' in args else ''}\\n")
if "--fail" in args:
    sys.exit(1)
with open(args[args.index("--log") + 1], "w") as out:
    if router == "router2" and ("--tmg-ripup" in args or "--congested" in args):
        for line in open(FIXTURE):
            out.write(line)
            out.flush()
        time.sleep(120)
    out.write("Info: Routing..\\n")
    for left in (3000, 1200, 0):
        out.write(f"Info:     {left} |    100      200 |  10   20 |      {left}|       1.00     2.00|\\n")
        out.flush()
    out.write("Info: Program finished normally.\\n")
"""


def fake_nextpnr(tmp_path: Path, *extra: str, router2: str = "ecp5_router2_congested.log") -> list[str]:
    """router2 replays the log ``router2`` (with --tmg-ripup; without, only if ``--congested`` is given),
    then runs on; otherwise the stand-in routes."""
    script = tmp_path / "fake_nextpnr.py"
    script.write_text(FAKE_NEXTPNR.replace("FIXTURE", repr(str(FIXTURES / router2))))
    return [sys.executable, str(script), "--log", "nextpnr.log", *extra]


def test_a_design_router2_cannot_route_is_routed_by_router1(tmp_path):
    seen = []
    log, router, ripup = flow.place_and_route(fake_nextpnr(tmp_path), tmp_path, ["router2", "router1"],
                                       lambda: flow.RouteWatch("LFE5U-85F", 1, 2048, tmp_path / "nextpnr.log"),
                                       seen.append)
    assert router == "router1"
    # router2 timing-driven, with ripup (flow.router_options)
    assert (tmp_path / "calls.txt").read_text().split() == ["router2+tmg-ripup", "router1"]
    assert "iter=" not in (tmp_path / "nextpnr.log").read_text()  # router1's log
    assert "overused=10496" in (tmp_path / flow.ROUTER2_LOG).read_text()  # router2's, kept
    assert "nextpnr: router2 is congested (10,496 wires overused, the fewest 2,871); placing and routing " \
           "again with router1" in seen
    assert "nextpnr: routing with router1, 1,200 arcs queued" in seen
    assert seen[-1] == "nextpnr: done"


def test_a_timing_driven_ripup_that_stalls_on_a_legal_route_is_told_from_the_log():
    # the VHDL of marathon on the ECP5-85F (71 MHz of 150), router2 with --tmg-ripup: arcs failing timing
    # fewest at iteration 5 (1,179), no wire overused from iteration 80, and nextpnr 0.11 would go on
    # for ever (500 iterations and more, at about 1,250)
    w = flow.RouteWatch("LFE5U-85F", 1, 65536, Path("nextpnr.log"))
    seen = []
    with pytest.raises(flow.RipupStalled, match="1,277 arcs fail timing at iteration 80, the fewest 1,179 at "
                                                "iteration 5"):
        for line in (FIXTURES / "ecp5_router2_ripup_stalled.log").read_text().splitlines():
            w.line(line, seen.append)
    assert (w.iteration, w.overused, w.fewest_failing_iteration) == (80, 0, 5) and not w.diverged
    assert seen[-2] == "nextpnr: routing, iteration 79: 12 wires overused, 1,242 arcs failing timing"
    # no overused wire, but not yet PATIENCE iterations past the fewest failing: routing goes on
    w = flow.RouteWatch()
    for it, failing in enumerate([900, 700, 650] + [660] * (flow.RouteWatch.PATIENCE - 1), start=1):
        w.line(f"Info:     iter={it} wires=80000 overused=0 overuse=0 tmgfail={failing} archfail=NA")
    assert not w.ripup_stalled
    with pytest.raises(flow.RipupStalled):
        w.line(f"Info:     iter={3 + flow.RouteWatch.PATIENCE} wires=80000 overused=0 overuse=0 tmgfail=660 archfail=NA")
    # routed without the ripup, router2's failing arcs are never taken for a stall
    w = flow.RouteWatch()
    w.ripup = False
    for it in range(1, 3 * flow.RouteWatch.PATIENCE):
        w.line(f"Info:     iter={it} wires=80000 overused=0 overuse=0 tmgfail=660 archfail=NA")
    assert not w.ripup_stalled


def test_a_stalled_timing_driven_ripup_is_routed_again_without_it(tmp_path):
    seen = []
    log, router, ripup = flow.place_and_route(
        fake_nextpnr(tmp_path, router2="ecp5_router2_ripup_stalled.log"), tmp_path, ["router2", "router1"],
        lambda: flow.RouteWatch("LFE5U-85F", 1, 65536, tmp_path / "nextpnr.log"), seen.append)
    assert (router, ripup) == ("router2", False)
    assert (tmp_path / "calls.txt").read_text().split() == ["router2+tmg-ripup", "router2"]
    assert "tmgfail=1277" in (tmp_path / flow.RIPUP_LOG).read_text()  # the stalled run's log, kept
    assert "iter=" not in (tmp_path / "nextpnr.log").read_text()  # the second run's
    assert ("nextpnr: router2's timing-driven ripup has stopped improving (1,277 arcs fail timing at iteration 80, "
            "the fewest 1,179 at iteration 5); placing and routing again without it") in seen
    assert seen[-1] == "nextpnr: done"
    # a later run whose router2 congests goes on to router1, as ever, and leaves no stalled log behind
    (tmp_path / "calls.txt").unlink()
    log, router, ripup = flow.place_and_route(
        fake_nextpnr(tmp_path, "--congested"), tmp_path, ["router2", "router1"],
        lambda: flow.RouteWatch("LFE5U-85F", 1, 65536, tmp_path / "nextpnr.log"), seen.append)
    assert (router, ripup) == ("router1", False)
    assert not (tmp_path / flow.RIPUP_LOG).exists()  # (an earlier run's, cleared)


def test_router1_progress_is_read_from_its_table():
    # a row of router1's table on finance0 (ECP5-85F, seed 1): 188 arcs still queued
    seen = []
    flow.RouteWatch().line("Info:     142000 |    38336     102191 |  138   724 |       188|       2.63     446.77|",
                           seen.append)
    assert seen == ["nextpnr: routing with router1, 188 arcs queued"]


def test_nextpnr_failing_otherwise_is_not_tried_again(tmp_path):
    # only congestion sends the design to the next router: an error of nextpnr's own is the flow's
    with pytest.raises(ToolError, match="nextpnr failed"):
        flow.place_and_route(fake_nextpnr(tmp_path, "--fail"), tmp_path, ["router2", "router1"],
                             lambda: flow.RouteWatch("LFE5U-85F", 1, 2048, tmp_path / "nextpnr.log"))
    assert (tmp_path / "calls.txt").read_text().split() == ["router2+tmg-ripup"]


def test_a_plateau_above_the_floor_is_congestion():
    # finance0 on the ECP5-85F, seed 1, at 3a7fa03: 890 at iteration 29, then 1,000 to 1,400 without
    # a new low (under twice the low, which the rule once also asked for: router2 ran on for hours)
    w = flow.RouteWatch("LFE5U-85F", 1, 2048)
    counts = [6794, 3141, 1908, 1341, 1047, 890] + [1000 + 15 * i for i in range(30)]
    with pytest.raises(FitError, match="it is congested"):
        for it, over in enumerate(counts, start=1):
            w.line(f"Info:     iter={it} wires=300000 overused={over} overuse={over} archfail=NA")
    assert w.iteration == 6 + flow.RouteWatch.PATIENCE and w.best == 890


def test_the_routers_tried_are_the_family_s_or_the_one_the_user_names():
    # router1 (on the ECP5-85F marathon and network reached more with it on every seed than with router2)
    assert flow.routers("ecp5") == ["router1"]
    assert flow.routers("ice40") == [None]  # nextpnr-ice40's default, router1
    assert flow.routers("ecp5", "router1") == flow.routers("ice40", "router1") == ["router1"]
    with pytest.raises(UsageError, match="unknown router 'router3'"):
        flow.routers("ecp5", "router3")
    # router2 rips up arcs that fail timing too (network on the ECP5-85F: 135.1 → 151.1 MHz best)
    assert flow.router_options("router2") == ["--router", "router2", "--tmg-ripup"]
    assert flow.router_options("router1") == ["--router", "router1"] and flow.router_options(None) == []
    assert flow.routers("ecp5", "router2") == ["router2"]  # (as named, on either placer)


def test_the_placer_is_the_static_one_for_designs_that_fill_an_ecp5_s_flip_flops():
    from cepc.hw.devices import DEVICES
    big, ice = DEVICES["ecp5-85f"], DEVICES["ice40up5k"]
    # finance2's netlist (28,726 flip-flops at 31f40d3, 34 %: routed on static placement only) and mshape's (22 %)
    placer, why = flow.placer_for("ecp5", "auto", 28_726, big)
    assert placer == "static" and "34%" in why and "28,726" in why
    assert flow.placer_for("ecp5", "auto", 18_663, big)[0] == "heap"
    # (finance2's since its older writes' state is read from LUT RAM: 21,931, 26 %, placed by HeAP)
    assert flow.placer_for("ecp5", "auto", 21_931, big)[0] == "heap"
    assert flow.placer_for("ecp5", "auto", 25_092, big)[0] == "heap"  # (30 %: not above it)
    # the 12F is placed on the 25F's die: its share is of that die's flip-flops
    assert flow.placer_for("ecp5", "auto", 8_000, DEVICES["ecp5-12f"])[0] == "static"
    assert flow.placer_for("ice40", "auto", 5_000, ice)[0] == "heap"  # (nextpnr-ice40: HeAP)
    assert flow.placer_for("ecp5", "heap", 28_534, big) == ("heap", "as asked")
    assert flow.placer_for("ice40", "static", 10, ice)[0] == "static"
    with pytest.raises(UsageError, match="unknown placer 'sa'"):
        flow.placer_for("ecp5", "sa", 0, big)


@pytest.mark.parametrize("asked", [{"placer": "sa"}, {"router": "router3"}])
def test_a_placer_or_router_unknown_is_told_before_yosys(asked, tmp_path, monkeypatch):
    # (the command line's choices catch them first; this is the Python API)
    from cepc.lang.check import check
    from cepc.lang.parse import parse_file

    def place(*args):
        raise AssertionError("Yosys ran")
    monkeypatch.setattr(flow, "_place", place)
    checked = check(parse_file(ROOT / "examples" / "marathon" / "marathon.sql"))
    with pytest.raises(UsageError, match="unknown (placer 'sa'|router 'router3')"):
        flow.synthesize(checked, flow.SynthOptions(board="ulx3s-12f", out_dir=tmp_path, **asked))


def test_a_router_the_user_names_is_the_only_one_tried(tmp_path):
    # --router router2 on a design router2 congests: its error, not router1 behind the user's back
    with pytest.raises(FitError, match="it is congested"):
        flow.place_and_route(fake_nextpnr(tmp_path), tmp_path, flow.routers("ecp5", "router2"),
                             lambda: flow.RouteWatch("LFE5U-85F", 1, 2048, tmp_path / "nextpnr.log"))
    assert (tmp_path / "calls.txt").read_text().split() == ["router2+tmg-ripup"]
    (tmp_path / "calls.txt").unlink()
    (tmp_path / flow.ROUTER2_LOG).write_text("router2 congested, in an earlier --router auto run\n")
    log, router, ripup = flow.place_and_route(fake_nextpnr(tmp_path), tmp_path, flow.routers("ecp5", "router1"),
                                       lambda: flow.RouteWatch("LFE5U-85F", 1, 2048, tmp_path / "nextpnr.log"))
    assert router == "router1" and (tmp_path / "calls.txt").read_text().split() == ["router1"]
    assert not (tmp_path / flow.ROUTER2_LOG).exists()  # this run tried no router2: no log of one is left


def test_yosys_maps_an_ice40_design_for_its_own_parts_timing():
    # synth_ice40 -device: Yosys' default is the HX, whose logic and routes are far faster than the
    # UP5K's (network's table on the UP5K: a compare through seven LUTs)
    parts = {name: cls().device for name, cls in flow.boards().items() if flow.family(cls) == "ice40"}
    assert parts["icebreaker"] == "iCE40UP5K" and flow.ice40_timing(parts["icebreaker"]) == "u"
    assert [flow.ice40_timing(p) for p in ("iCE40HX8K", "iCE40LP1K", "iCE40UP5K")] == ["hx", "lp", "u"]
    with pytest.raises(ValueError, match="no Yosys timing model for the iCE40 part iCE40XX1K"):
        flow.ice40_timing("iCE40XX1K")
    # the UltraPlus's DSPs take the products; the HX and LP have none
    assert flow.ice40_synth_options("iCE40UP5K") == "-dsp -dffe_min_ce_use 4 -device u"
    assert flow.ice40_synth_options("iCE40HX8K") == "-dffe_min_ce_use 4 -device hx"


def freq_max(tmp_path, reach, monkeypatch):
    """--freq max's builds on the iCEBreaker from 51 MHz, each build's clock reaching ``reach(target)`` MHz
    (None: the build refused). flow._place stands in for the retry policy alone, with the real iCE40
    report its clock replaced; test_synth_flow's --freq max test makes real builds."""
    from cepc.hw.pll import ice40_pll

    report, stat = load("ice40_marathon")
    targets = []

    def place(design, choice, opts, plat_cls, fam, out, pll, baud, checked, progress):
        target = pll.output_hz / 1e6
        targets.append(target)
        if reach(target) is None:
            raise UsageError("the link's clock (12 MHz) must not be faster than the design's")
        r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
        r.clocks[:] = [rep.ClockTiming(r.clocks[0].name, reach(target), target)]
        return flow.SynthResult(r, {"options": {"clock_mhz": target}}, None)

    monkeypatch.setattr(flow, "_place", place)
    notes = []
    opts = flow.SynthOptions(board="icebreaker", fastest=True)
    result = flow._place_fastest(None, None, opts, flow.board("icebreaker"), "ice40", tmp_path, ice40_pll(12e6, 51e6),
                                 3_000_000, None, notes.append)
    assert json.loads((tmp_path / "report.json").read_text()) == result.summary
    return result, targets, notes


def test_freq_max_stops_at_the_first_clock_met(tmp_path, monkeypatch):
    result, targets, notes = freq_max(tmp_path, lambda target: 31.9, monkeypatch)
    assert targets == [51.0, 30.75]  # 30.75: the fastest the PLL makes at or below 31.9 × 0.97
    assert result.summary["freq_builds"] == [{"target_mhz": 51.0, "achieved_mhz": 31.9, "met": False, "seconds": 0},
                                             {"target_mhz": 30.75, "achieved_mhz": 31.9, "met": True, "seconds": 0}]
    assert result.summary["suggested_freq_mhz"] is None and notes[-1] == (
        "note: --freq max: timing met at 30.75 MHz, build 2 (51 MHz reached 31.9)")


def test_freq_max_builds_three_times_at_most(tmp_path, monkeypatch):
    result, targets, notes = freq_max(tmp_path, lambda target: 0.9 * target, monkeypatch)
    assert len(targets) == flow.FASTEST_BUILDS == 3 and targets[0] == 51.0
    assert all(after <= 0.9 * before * (1 - flow.FASTEST_MARGIN) for before, after in zip(targets, targets[1:]))
    assert not result.report.timing_met and result.summary["suggested_freq_mhz"] <= 0.9 * targets[-1] * 0.97
    with pytest.raises(TimingError, match=r"; --freq max built 3 times \(51 MHz reached 45\.9, "):
        flow.check_timing(result)


def test_freq_max_keeps_the_last_build_when_the_next_is_refused(tmp_path, monkeypatch):
    result, targets, notes = freq_max(tmp_path, lambda target: 31.9 if target > 40 else None, monkeypatch)
    assert targets == [51.0, 30.75] and result.summary["freq_builds"] == [
        {"target_mhz": 51.0, "achieved_mhz": 31.9, "met": False, "seconds": 0}]
    assert notes[-1].startswith("note: --freq max: not built at 30.75 MHz: the link's clock (12 MHz)")
    assert result.summary["options"]["clock_mhz"] == 51.0 and result.summary["suggested_freq_mhz"] is None


def test_no_clock_is_suggested_below_the_host_links(tmp_path, monkeypatch):
    # the iCEBreaker's host link runs at 12 MHz: a design reaching 12.2 MHz has no slower clock to try
    result, targets, notes = freq_max(tmp_path, lambda target: 12.2, monkeypatch)
    assert targets == [51.0] and result.summary["suggested_freq_mhz"] is None
    with pytest.raises(TimingError) as e:
        flow.check_timing(result)
    assert "; lower --freq (the bitstream was not written" in str(e.value)


def sweep(tmp_path, reach, seeds=(1, 2, 3), jobs=1, hold=(), after=None):
    """--seed's sweep over ``seeds``, each placement's design clock reaching ``reach[seed]`` MHz of
    51 (None: nextpnr could not place it): the real iCE40 report, its clock replaced, and each seed's
    files written as nextpnr would write them, where it runs. With ``jobs``, that many at once; a seed
    in ``hold`` is still running until it is cancelled (or 10 s); a seed ``after`` names (a dict) ends
    once the seed it gives has started."""
    report, stat = load("ice40_marathon")
    tried, stopped = [], []
    started = {seed: threading.Event() for seed in seeds}

    def route(seed, where=tmp_path, cancel=None, say=lambda s: None):
        tried.append(seed)
        started[seed].set()
        if after and seed in after:
            started[after[seed]].wait(10)
        if seed in hold:
            if cancel is not None and cancel.wait(10):
                stopped.append(seed)
                raise flow.Cancelled("nextpnr stopped")
        (where / "cepc_board.asc").write_text(f"placement {seed}")
        (where / "nextpnr.log").write_text(f"log {seed}")
        if reach[seed] is None:
            raise FitError(f"nextpnr could not place the design on iCE40UP5K with --seed {seed}", bel="ICESTORM_LC")
        r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
        r.clocks[:] = [rep.ClockTiming(r.clocks[0].name, reach[seed], 51.0)]
        return flow.Routed(seed, r, None, False)

    notes = []
    best, runs = flow.sweep_seeds(seeds, route, tmp_path, ["cepc_board.asc", "nextpnr.log"], notes.append, jobs=jobs)
    if jobs > 1:
        return best, runs, tried, notes, stopped
    return best, runs, tried, notes


def test_seeds_are_tried_until_one_meets_the_clock(tmp_path):
    best, runs, tried, notes = sweep(tmp_path, {1: 48.2, 2: 52.7, 3: 60.0})
    assert tried == [1, 2] and best.seed == 2 and best.report.timing_met  # (seed 3 never placed)
    assert [(r["seed"], r["achieved_mhz"], r["met"]) for r in runs] == [(1, 48.2, False), (2, 52.7, True)]
    assert runs[0]["critical_path"] == best.report.critical_paths[0].summary()
    assert "note: nextpnr seed 1: timing missed (the design's clock reached 48.2 of 51 MHz); placing and " \
           "routing again at seed 2" in notes
    assert flow.seeds_text(runs, best.seed) == "1: 48.2 MHz, 2: 52.7 MHz (kept)"
    assert (tmp_path / "cepc_board.asc").read_text() == "placement 2"
    assert (tmp_path / "seeds" / "1" / "cepc_board.asc").read_text() == "placement 1"


def test_where_no_seed_meets_the_clock_the_fastest_is_kept_with_its_files(tmp_path):
    best, runs, tried, notes = sweep(tmp_path, {1: 44.0, 2: 47.5, 3: 45.1})
    assert tried == [1, 2, 3] and best.seed == 2 and not best.report.timing_met
    # the kept placement's files are back where the packer and the user look, not the last seed's
    assert (tmp_path / "cepc_board.asc").read_text() == "placement 2"
    assert (tmp_path / "nextpnr.log").read_text() == "log 2"
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == ["1", "2", "3"]
    assert flow.seeds_text(runs, best.seed) == "1: 44.0 MHz, 2: 47.5 MHz (kept), 3: 45.1 MHz"


def test_a_seed_nextpnr_cannot_place_is_passed_over(tmp_path):
    best, runs, tried, notes = sweep(tmp_path, {1: None, 2: 49.0, 3: None})
    assert tried == [1, 2, 3] and best.seed == 2
    assert runs[0] == {"seed": 1, "error": "nextpnr could not place the design on iCE40UP5K with --seed 1"}
    assert "note: nextpnr seed 1: nextpnr could not place the design on iCE40UP5K with --seed 1" in notes
    assert flow.seeds_text(runs, best.seed) == "1: failed, 2: 49.0 MHz (kept), 3: failed"
    assert not (tmp_path / "seeds" / "1").exists() and (tmp_path / "cepc_board.asc").read_text() == "placement 2"
    with pytest.raises(FitError, match="with --seed 1$"):  # none placed: the first seed's error
        sweep(tmp_path, {1: None, 2: None, 3: None})


@pytest.mark.parametrize("reach", [
    {1: 48.2, 2: 52.7, 3: 60.0, 4: 44.0},  # seed 2 meets the clock
    {1: 44.0, 2: 47.5, 3: 45.1, 4: 47.5},  # none does: the fastest, the first of two as fast
    {1: None, 2: 49.0, 3: None, 4: 46.0},  # seeds nextpnr cannot place
])
def test_seeds_at_once_keep_what_one_at_a_time_keeps(tmp_path, reach):
    one = tmp_path / "one"
    one.mkdir()
    best, runs, _, _ = sweep(one, reach, seeds=(1, 2, 3, 4))
    for jobs in (2, 3, 4):
        at_once = tmp_path / f"jobs{jobs}"
        at_once.mkdir()
        best_j, runs_j, tried, notes, _ = sweep(at_once, reach, seeds=(1, 2, 3, 4), jobs=jobs)
        assert runs_j == runs and best_j.seed == best.seed and best_j.clock == best.clock
        assert flow.seeds_text(runs_j, best_j.seed) == flow.seeds_text(runs, best.seed)
        # the kept placement's files where the packer and the user look, each seed tried in seeds/S
        assert (at_once / "cepc_board.asc").read_text() == f"placement {best.seed}"
        assert (at_once / "nextpnr.log").read_text() == f"log {best.seed}"
        assert sorted(p.name for p in (at_once / "seeds").iterdir()) == \
            sorted(str(r["seed"]) for r in runs if "error" not in r)
        assert notes[0] == f"nextpnr: 4 seeds, {jobs} at a time"
        for r in runs:
            if "error" in r:
                assert f"note: nextpnr seed {r['seed']}: {r['error']}" in notes


def test_seeds_at_once_stop_the_ones_after_a_seed_that_meets_the_clock(tmp_path):
    # two at once: seeds 1 and 2 start; 1 misses, and seed 3 starts while 2 is still running; 2 meets
    # the clock, so 3, still running, is stopped (and 4, if it had started: it is never waited for)
    best, runs, tried, notes, stopped = sweep(tmp_path, {1: 44.0, 2: 52.0, 3: 53.0, 4: 55.0}, seeds=(1, 2, 3, 4),
                                              jobs=2, hold=(3,), after={2: 3})
    assert best.seed == 2 and [r["seed"] for r in runs] == [1, 2]
    assert stopped == [3]
    assert sorted(p.name for p in (tmp_path / "seeds").iterdir()) == ["1", "2"]
    assert (tmp_path / "cepc_board.asc").read_text() == "placement 2"
    assert "note: nextpnr seed 1: timing missed (the design's clock reached 44.0 of 51 MHz)" in notes


def test_a_stopped_tool_is_killed(tmp_path):
    # what stops a seed: the tool's process, killed while it runs, and Cancelled raised
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(flow.Cancelled):
        flow._run([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, tmp_path / "log.txt", "sleep",
                  lambda line: None, cancel=cancel)
    assert time.monotonic() - t0 < 10


def test_one_seed_is_placed_as_it_always_was(tmp_path):
    best, runs, tried, notes = sweep(tmp_path, {4: 44.0}, seeds=(4,))
    assert tried == [4] and best.seed == 4 and runs == [] and notes == []
    assert not (tmp_path / "seeds").exists()
    with pytest.raises(FitError):
        sweep(tmp_path, {4: None}, seeds=(4,))


def test_the_timing_error_gives_every_seed_tried():
    report, stat = load("ice40_marathon")
    r = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    r.clocks[:] = [rep.ClockTiming(r.clocks[0].name, 47.5, 51.0)]
    runs = [{"seed": 1, "achieved_mhz": 44.0}, {"seed": 2, "achieved_mhz": 47.5}, {"seed": 3, "error": "x"}]
    with pytest.raises(TimingError, match=r"; at nextpnr's seeds 1: 44\.0 MHz, 2: 47\.5 MHz \(kept\), 3: failed; "):
        flow.check_timing(flow.SynthResult(r, {"options": {"seed": 2}, "seeds": runs}, None))


@pytest.mark.parametrize("text, seeds", [("3", (3,)), ("1,2,3", (1, 2, 3)), ("1-5", (1, 2, 3, 4, 5)),
                                         ("2-3,9,3", (2, 3, 9)), (" 0 - 1 ", (0, 1))])
def test_seed_takes_a_seed_a_list_or_a_range(text, seeds):
    from cepc.cli import _seeds
    assert _seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "1,,2", "5-1", "-1", "1-2-3", "1.5"])
def test_seed_refuses_what_is_not_seeds(text):
    import argparse

    from cepc.cli import _seeds
    with pytest.raises(argparse.ArgumentTypeError, match="not "):
        _seeds(text)


def test_a_design_over_the_device_in_several_kinds_is_told_them_all():
    # finance2 on the UP5K with one partition (a449084): nextpnr stops at the DSPs it cannot place, but the
    # design is also over in logic cells and block RAM, which decide more than the DSPs do
    log = (FIXTURES / "ice40_finance2_over.log").read_text()
    assert "no BELs remaining to implement cell type 'ICESTORM_DSP'" in log
    err = placement_error(log, "iCE40UP5K", 1, 1, "icebreaker")
    # (with one partition already, fewer cannot help: a smaller query, or the boards with a larger device)
    assert str(err) == (
        "the design does not fit iCE40UP5K: it needs 10 DSPs (ICESTORM_DSP), the device has 8 (2 or 25% over), "
        "and 6,586 logic cells (ICESTORM_LC) of 5,280 (25% over), 31 block RAMs (ICESTORM_RAM) of 30 (3% over); "
        "use a smaller query (fewer or narrower MEASURES and aggregates) or a board with a larger device "
        "(ulx3s-12f, colorlight-5a-75b, ulx3s-25f, ulx3s-45f, ulx3s-85f): it has one partition already")
    assert err.bel == "ICESTORM_DSP"
    # with more than one, fewer; without a board, no board is named
    assert str(placement_error(log, "iCE40UP5K", 4, 1, "icebreaker")).endswith("; use fewer --partitions (now 4)")
    assert str(placement_error(log, "iCE40UP5K", 1, 1)).endswith(
        "or a board with a larger device: it has one partition already")
    # the largest board has none larger
    assert flow.larger_boards("ulx3s-85f") == [] and flow.larger_boards("ulx3s-45f") == ["ulx3s-85f"]


def test_a_tuple_every_three_cycles_in_the_report_and_where_it_is_refused(tmp_path, capsys):
    # cepc synth --slot-period 3: the report's options name it and its rate is a tuple every three cycles;
    # the VHDL back end's pipeline, a pipeline of two elements and a table are refused, before Yosys
    from cepc.cli import main
    from cepc.hw.pll import ice40_pll
    from cepc.lang.check import check
    from cepc.lang.parse import parse_file
    from cepc.nfa.lower import lower

    report, stat = load("ice40_marathon")
    parsed = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    query = ROOT / "examples" / "mshape" / "mshape.sql"
    checked = check(parse_file(query))
    pll = ice40_pll(12e6, 51e6)
    for period in (2, 3):
        ld = flow.link_design(lower(checked), partitions=1, clock_hz=pll.output_hz, baud=3_000_000,
                              buffer_bytes=1024, buffer_frames=4, slot_period=period)
        assert ld.top.slot_period == period
        ld.top._MustUse__silence = ld.link._MustUse__silence = True  # (only its report is asked for)
        summary = flow._summary(parsed, ld, flow.SynthOptions(board="icebreaker", slot_period=period), pll, 1,
                                3_000_000, checked, 1)
        assert summary["tuples_per_cycle"] == pytest.approx(1 / period)
        assert summary["tuples_per_cycle_one_key"] == pytest.approx(1 / period, abs=1e-4)
        assert summary["options"].get("slot_period") == (3 if period == 3 else None)
    for extra, why in ((["--hdl", "vhdl"], "the VHDL back end's pipeline takes one every other cycle"),
                       (["--partitions", "2"], "Woods' pipeline of one element's"),
                       (["--partitioner", "table"], "Woods' pipeline of one element's")):
        out = tmp_path / "-".join(extra)
        rc = main(["synth", str(query), "--board", "icebreaker", "--slot-period", "3", *extra, "-o", str(out)])
        assert rc != 0
        assert why in capsys.readouterr().err
        assert not (out / "yosys.log").exists()


def test_the_report_names_the_ways_asked_for():
    # cepc synth --ways W: the report's options say so (bench/synth.py's sized rows read them), and without
    # it they name none
    from cepc.hw.pll import ice40_pll
    from cepc.lang.check import check
    from cepc.lang.parse import parse_file
    from cepc.nfa.lower import lower

    report, stat = load("ice40_marathon")
    parsed = rep.parse(report, stat, board="icebreaker", family="ice40", device="iCE40UP5K", package="SG48")
    checked = check(parse_file(ROOT / "examples" / "network" / "network.sql"))
    pll = ice40_pll(12e6, 51e6)
    for ways in (2, None):
        ld = flow.link_design(lower(checked), partitions=256, clock_hz=pll.output_hz, baud=3_000_000,
                              buffer_bytes=1024, buffer_frames=4, partitioner="table", ways=ways or 4)
        opts = flow.SynthOptions(board="icebreaker", ways=ways)
        options = flow._summary(parsed, ld, opts, pll, 256, 3_000_000, checked, 1)["options"]
        assert options.get("ways") == ways and options["partitions"] == 256


def test_build_plans_extracted_at_once_each_write_into_their_own_directory(tmp_path):
    # bench/synth.py --jobs builds several seeds at once in threads, each through flow.synthesize: each
    # Amaranth build plan's files (RTLIL, the Yosys script, the constraints) must land in its own
    # directory. Amaranth's BuildPlan.extract changes the process's working directory while it writes,
    # and a seed's Yosys then found no script; flow.extract writes each file by its full path
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    plans = [SimpleNamespace(files={f"f{k}.txt": f"{i}:{k}" * 2000 for k in range(30)} | {"sub/x.ys": f"{i}".encode()})
             for i in range(16)]
    cwd = os.getcwd()
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda i: flow.extract(plans[i], tmp_path / f"seed-{i}"), range(16)))
    assert os.getcwd() == cwd
    for i in range(16):
        d = tmp_path / f"seed-{i}"
        assert sorted(p.name for p in d.iterdir()) == sorted([f"f{k}.txt" for k in range(30)] + ["sub"])
        assert all((d / f"f{k}.txt").read_text() == f"{i}:{k}" * 2000 for k in range(30))
        assert (d / "sub" / "x.ys").read_bytes() == f"{i}".encode()
