"""ECP5 block RAM (DP16KD) instantiated directly, where Yosys' inference cannot use its output register.

Yosys maps an inferred memory onto DP16KDs with the output register unused (``REGMODE NOREG``),
so a read's clock-to-out (about 6 ns in nextpnr's ECP5 timing) comes before the first flip-flop
and caps the clock near 110 MHz. Instantiated here, a DP16KD holds 2,048 words of 9 bits with
port A writing and port B reading through the block's own output register (``REGMODE_B
OUTREG``): a read issued at an edge where ``r_en`` is high is in the output register after the
next edge where ``o_en`` is high — exactly a synchronous read port followed by a flip-flop.

Simulators have no DP16KD; :class:`Dp16kdModel` is a behavioural model of the pins this module
drives (for 9-bit words), which the unit tests put in its place to check the wiring.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Elaboratable, Instance, Module, Signal, Value
from amaranth.lib import memory

DEPTH, WIDTH = 2048, 9  # one DP16KD in its 9-bit mode


def uses_dp16kd(platform) -> bool:
    """True when ``platform`` is an ECP5 one, where a DP16KD can be instantiated."""
    return getattr(platform, "family", None) == "ecp5"


def dp16kd(*, w_en: Value, w_addr: Value, w_data: Value, r_addr: Value, r_en: Value, o_en: Value,
           out: Value, platform=None, name: str = "dp16kd") -> Elaboratable:
    """One DP16KD, 2,048 × 9: port A writes ``w_data`` at ``w_addr`` when ``w_en``; port B reads
    ``r_addr`` when ``r_en`` and registers the word into ``out`` when ``o_en``. Narrower addresses
    and data are zero-extended. A model stands in when ``platform`` asks for one (``simulate_primitives``)."""
    def address(prefix, addr):  # 2048 × 9: the word address sits in address bits 13..3
        return {f"i_{prefix}{i}": (addr[i - 3] if 3 <= i < 3 + len(addr) else 0) for i in range(14)}

    ports = {
        **address("ADA", w_addr), **address("ADB", r_addr),
        **{f"i_DIA{i}": (w_data[i] if i < len(w_data) else 0) for i in range(18)},
        **{f"i_DIB{i}": 0 for i in range(18)},
        **{f"o_DOB{i}": (out[i] if i < len(out) else Signal(name=f"{name}_dob{i}")) for i in range(18)},
        **{f"o_DOA{i}": Signal(name=f"{name}_doa{i}") for i in range(18)},
        "i_CLKA": ClockSignal(), "i_CLKB": ClockSignal(), "i_WEA": w_en, "i_WEB": 0,
        "i_CEA": 1, "i_CEB": r_en, "i_OCEA": 1, "i_OCEB": o_en, "i_RSTA": 0, "i_RSTB": 0,
        **{f"i_CS{p}{i}": 0 for p in "AB" for i in range(3)},
    }
    params = {
        "p_DATA_WIDTH_A": WIDTH, "p_DATA_WIDTH_B": WIDTH, "p_REGMODE_A": "NOREG", "p_REGMODE_B": "OUTREG",
        "p_RESETMODE": "SYNC", "p_ASYNC_RESET_RELEASE": "SYNC", "p_CSDECODE_A": "0b000", "p_CSDECODE_B": "0b000",
        "p_WRITEMODE_A": "NORMAL", "p_WRITEMODE_B": "NORMAL", "p_GSR": "AUTO",
    }
    if getattr(platform, "simulate_primitives", False):
        return Dp16kdModel(params, ports)
    return Instance("DP16KD", **params, **ports)


class Dp16kdModel(Elaboratable):
    """What a DP16KD does with the pins :func:`dp16kd` drives, in 9-bit mode (Lattice TN1264): port A
    writes on a clock edge with CEA and WEA; port B reads on an edge with CEB (the word as it was
    before a write in the same edge) into its latch; with ``REGMODE_B`` OUTREG the output register
    takes the latch on an edge with OCEB, else DOB is the latch."""

    def __init__(self, params: dict, ports: dict):
        assert params["p_DATA_WIDTH_A"] == WIDTH and params["p_DATA_WIDTH_B"] == WIDTH
        self._regmode = params["p_REGMODE_B"]
        self._ports = ports

    def elaborate(self, platform):
        m = Module()
        p = self._ports

        def value(v):
            return Const(v, 1) if isinstance(v, int) else v

        def word_address(prefix):
            return Cat(*(value(p[f"i_{prefix}{i}"]) for i in range(3, 14)))

        m.submodules.mem = mem = memory.Memory(shape=WIDTH, depth=DEPTH, init=[])
        wr, rd = mem.write_port(), mem.read_port()
        m.d.comb += [
            wr.addr.eq(word_address("ADA")), wr.data.eq(Cat(*(value(p[f"i_DIA{i}"]) for i in range(WIDTH)))),
            wr.en.eq(value(p["i_CEA"]) & value(p["i_WEA"])),
            rd.addr.eq(word_address("ADB")), rd.en.eq(value(p["i_CEB"])),
        ]
        dob = Signal(WIDTH)
        if self._regmode == "OUTREG":
            with m.If(value(p["i_OCEB"])):
                m.d.sync += dob.eq(rd.data)
        else:
            m.d.comb += dob.eq(rd.data)
        m.d.comb += [p[f"o_DOB{i}"].eq(dob[i]) for i in range(WIDTH)]
        return m

