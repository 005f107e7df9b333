"""Every endpoint that misses the clock, read from nextpnr's SDF (cepc.synth.sta). The real SDFs are
checked in test_synth_flow, against nextpnr's own critical path; here, a small one by hand."""

from __future__ import annotations

from cepc.synth import sta


def cell(kind: str, name: str, iopaths=(), setups=()) -> str:
    paths = "".join(f"        (IOPATH {a} {b} ({d}:{d}:{d}) ({d}:{d}:{d}))\n" for a, b, d in iopaths)
    checks = "".join(f"      (SETUPHOLD (posedge {p}) (posedge {c}) ({d}:{d}:{d}) (0:0:0))\n" for p, c, d in setups)
    return (f"  (CELL\n    (CELLTYPE \"{kind}\")\n    (INSTANCE {name})\n    (DELAY\n      (ABSOLUTE\n{paths}"
            f"      )\n    )\n" + (f"    (TIMINGCHECK\n{checks}    )\n" if checks else "") + "  )\n")


def wire(a: str, b: str, d: int) -> str:
    return f"        (INTERCONNECT {a} {b} ({d}:{d}:{d}) ({d}:{d}:{d}))\n"


def ff(name: str) -> str:
    return cell("TRELLIS_FF", name, [("CLK", "Q", 500)], [("DI", "CLK", 100), ("CE", "CLK", 150)])


def delayfile(wires: str, cells: str) -> str:
    """An SDF: the top's ``wires`` (INTERCONNECTs), then ``cells``."""
    return ("(DELAYFILE\n  (SDFVERSION \"3.0\")\n  (TIMESCALE 1ps)\n  (CELL\n    (CELLTYPE \"top\")\n    (INSTANCE )\n"
            "    (DELAY\n      (ABSOLUTE\n" + wires + "      )\n    )\n  )\n" + cells + ")\n")


D = "link.design.q_partitioner"
SDF = delayfile(
    # the design's clock reaches four registers' bits, the host link's one
    "".join(wire("\\$gbuf\\$clk/Z", f"{r}/CLK", 700) for r in (
        f"{D}.a_TRELLIS_FF_Q", f"{D}.state5_TRELLIS_FF_Q_1", f"{D}.state5_TRELLIS_FF_Q_2",
        f"{D}.d\\$309_TRELLIS_FF_Q_7", f"{D}.replica_pick3.q_TRELLIS_FF_Q"))
    + wire("\\$gbuf\\$link_clk/Z", "link.link.tx_TRELLIS_FF_Q/CLK", 700)
    # a → LUT → state5[1] (2.7 ns with its setup), a → state5[2] (5.6 ns), a → d$309's enable (4.65)
    + wire(f"{D}.a_TRELLIS_FF_Q/Q", f"{D}.lut_LUT4_Z/A", 1000)
    + wire(f"{D}.lut_LUT4_Z/Z", f"{D}.state5_TRELLIS_FF_Q_1/DI", 800)
    + wire(f"{D}.a_TRELLIS_FF_Q/Q", f"{D}.state5_TRELLIS_FF_Q_2/DI", 5000)
    + wire(f"{D}.a_TRELLIS_FF_Q/Q", f"{D}.d\\$309_TRELLIS_FF_Q_7/CE", 4000)
    # the host link's register into the design's copy: another clock, not timed here
    + wire("link.link.tx_TRELLIS_FF_Q/Q", f"{D}.replica_pick3.q_TRELLIS_FF_Q/DI", 9000),
    ff(f"{D}.a_TRELLIS_FF_Q") + ff(f"{D}.state5_TRELLIS_FF_Q_1") + ff(f"{D}.state5_TRELLIS_FF_Q_2")
    + ff(f"{D}.d\\$309_TRELLIS_FF_Q_7") + ff(f"{D}.replica_pick3.q_TRELLIS_FF_Q") + ff("link.link.tx_TRELLIS_FF_Q")
    + cell("TRELLIS_COMB", f"{D}.lut_LUT4_Z", [("A", "Z", 300)]))


def test_every_late_input_of_the_design_clock_by_register():
    e = sta.endpoints(SDF, 3.0)
    # three inputs timed on the design's clock: a's own is undriven, the copy's driven from the host
    # link's clock alone
    assert e.total == 3 and e.worst_ns == 5.6 and e.failing == 2 and e.registers == 2
    assert [(g.register, g.failing, g.worst_ns) for g in e.groups] == [
        ("q_partitioner.state5", 1, 5.6), ("q_partitioner.d$309", 1, 4.65)]
    assert e.summary() == ("2 of 3 endpoints miss it, in 2 registers: q_partitioner.state5 (1 input, 5.60 ns), "
                           "q_partitioner.d$309 (1 input, 4.65 ns)")


def test_a_clock_every_endpoint_meets_leaves_none_and_a_slower_one_all():
    assert sta.endpoints(SDF, 6.0).failing == 0 and sta.endpoints(SDF, 6.0).groups == ()
    assert sta.endpoints(SDF, 6.0).summary() == "none of 3 endpoints misses it (the worst arrives at 5.60 ns)"
    e = sta.endpoints(SDF, 1.0)
    assert e.failing == 3 and e.registers == 2 and e.groups[0].register == "q_partitioner.state5"
    assert e.groups[0].failing == 2  # (its two bits: one register)
    assert e.to_json()["groups"][0] == {"register": "q_partitioner.state5", "worst_ns": 5.6, "failing": 2,
                                        "source": "q_partitioner.a", "levels": 0, "logic_ns": 0.6, "routing_ns": 5.0}


def test_the_worst_path_into_each_late_register_from_where_it_starts():
    # a → LUT → LUT → b's input (3.45 ns with the setup), and a route straight from c into b's enable
    # (2.0 ns): b's worst input is the first, 2 logic levels, whose routes take 2.2 ns
    clock = "".join(wire("\\$gbuf\\$clk/Z", f"{D}.{r}_TRELLIS_FF_Q/CLK", 700) for r in "abc")
    routes = (wire(f"{D}.a_TRELLIS_FF_Q/Q", f"{D}.one_LUT4_Z/A", 1200) + wire(f"{D}.one_LUT4_Z/Z", f"{D}.two_LUT4_Z/B", 600)
              + wire(f"{D}.two_LUT4_Z/Z", f"{D}.b_TRELLIS_FF_Q/DI", 400)
              + wire(f"{D}.c_TRELLIS_FF_Q/Q", f"{D}.b_TRELLIS_FF_Q/CE", 1350))
    sdf = delayfile(clock + routes, "".join(ff(f"{D}.{r}_TRELLIS_FF_Q") for r in "abc")
                    + cell("TRELLIS_COMB", f"{D}.one_LUT4_Z", [("A", "Z", 300)])
                    + cell("TRELLIS_COMB", f"{D}.two_LUT4_Z", [("B", "Z", 350)]))
    e = sta.endpoints(sdf, 3.0)
    assert e.failing == 1 and e.worst_ns == 3.45
    g = e.groups[0]
    assert (g.register, g.source, g.levels, g.logic_ns, g.routing_ns) == \
        ("q_partitioner.b", "q_partitioner.a", 2, 1.25, 2.2)
    assert e.paths() == ["q_partitioner.b ← q_partitioner.a: 3.45 ns, 2 logic levels (1.25 ns logic, 2.20 ns routing)"]
    assert e.to_json()["groups"][0]["source"] == "q_partitioner.a"
    # at a faster clock both of b's inputs miss it, and the path given is still the worst's
    e = sta.endpoints(sdf, 1.9)
    assert e.groups[0].failing == 2 and (e.groups[0].source, e.groups[0].levels) == ("q_partitioner.a", 2)


def test_a_cell_is_named_by_its_register():
    # the cells nextpnr names after a register's bits, its LUT's or its block's, as the design names the
    # register: on the iCE40 a logic cell whose LUT feeds its flip-flop is named after the LUT (the host
    # link's copy of the reset, the start of a traced path at one placement of finance0 on the UP5K), and
    # its flip-flop after the register
    assert sta._register("link.design.finance0_partitioner.d$309_TRELLIS_FF_Q_565") == "finance0_partitioner.d$309"
    assert sta._register("link.replica_rst_design.d_SB_LUT4_I3_LC") == "link.replica_rst_design.d"
    assert sta._register("link.replica_rst_design.d_SB_DFFSR_Q_DFFLC") == "link.replica_rst_design.d"
    assert sta._register("link.design.cond_SB_DFFE_Q_5_DFFLC") == "cond"
    assert sta._register("link.design.q_partitioner.replica_pick3.q_TRELLIS_FF_Q") == "q_partitioner.replica_pick3"
