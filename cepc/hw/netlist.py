"""A compiled design made outside Amaranth, in place of :class:`~cepc.hw.top.Top`.

``cepc synth --hdl vhdl`` builds the board from the VHDL back end: GHDL synthesises
the VHDL (:mod:`cepc.synth.vhdl`) into a Verilog netlist of module ``module``, and
this component instantiates it, with Top's ports, inside the host link. The VHDL is
cycle-exact with the Amaranth top (docs/vhdl.md), so the link's timing assumptions
(the latency, records held until taken) hold for either.

The VHDL entity takes its synchronous reset as a port (``rst``); the host link,
which puts a ResetInserter around an Amaranth top, drives this component's ``rst``
instead (a ResetInserter does not reach into an instance).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from .top import Top


class NetlistTop(wiring.Component):
    """``top``'s ports and figures, built by an instance of ``module`` (``clk``, ``rst`` and Top's ports).

    ``rst`` (in): the design's reset, besides the ``sync`` domain's own (if it has one).
    """

    def __init__(self, top: Top, module: str):
        self.module = module
        self.design = top.design
        self.bus_width, self.partitions, self.partitioner = top.bus_width, top.partitions, top.partitioner
        self.record_width, self.tuple_width = top.record_width, top.tuple_width
        self.latency, self.update_cycles = top.latency, top.update_cycles
        top._MustUse__silence = True  # only its figures are used: the instance is the hardware
        super().__init__({**dict(top.signature.members.items()), "rst": In(1)})

    def elaborate(self, platform):
        m = Module()
        ports = {}
        for name, member in self.signature.members.items():
            if name != "rst":
                ports[("i_" if member.flow == In else "o_") + name] = getattr(self, name)
        m.submodules.netlist = Instance(self.module, i_clk=ClockSignal(),
                                        i_rst=ResetSignal(allow_reset_less=True) | self.rst, **ports)
        return m
