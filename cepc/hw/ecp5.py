"""ECP5 block RAM (DP16KD) instantiated directly, where Yosys' inference cannot use its output register.

Yosys maps an inferred memory onto DP16KDs with the output register unused (``REGMODE NOREG``),
so a read's clock-to-out (5.8 ns in nextpnr's ECP5 timing, speed grade 6) comes before the first
flip-flop: with any route after it, that alone caps the clock near 150 MHz. Instantiated here, a
DP16KD writes through port A and reads through port B and the block's own output register
(``REGMODE OUTREG``): a read issued at an edge where ``r_en`` is high is in the output register
after the next edge where ``o_en`` is high — exactly a synchronous read port followed by a
flip-flop.

A DP16KD holds 18 Kbit in one of six shapes (:data:`MODES`): 16,384 × 1 … 1,024 × 18, and 512 × 36,
where both ports' data pins carry the word (the pseudo-dual-port mode Yosys' PDPW16KD mapping
uses). The pins each shape uses follow Yosys' own mapping (``share/lattice/brams_map_16kd.v``): the
word address sits in the top address bits, above one bit per halving of the depth; at 18 and 36
bits the low address bits of the write port are its byte enables.

:class:`RegisteredRam` is what callers use: DP16KDs side by side on ECP5, and elsewhere (a
simulator, iCE40, whose block RAM has no output register) a memory read port followed by a
register, cycle for cycle the same. Simulators have no DP16KD; :class:`Dp16kdModel` is a
behavioural model of the pins :func:`dp16kd` drives, which the unit tests put in its place.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Elaboratable, Instance, Module, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from .expr import extended

# A memory whose reads never use a word written in the same cycle (the caller forwards such writes,
# or never reads a word being written) carries this attribute. The synthesis flow then tells Yosys
# that such a read may return anything (its $mem_v2's RD_COLLISION_X_MASK), so it maps the memory
# onto block RAM as it is. Otherwise Yosys, which knows nothing of an iCE40 SB_RAM40_4K's (or an
# inferred DP16KD's) read during a write, emulates the old word: a register of the write's data,
# one of the read's, an address compare and a multiplexer, per bit (two flip-flops and a LUT a
# bit; 182 flip-flops and 94 LUTs for an 88-bit FIFO on the UP5K, which is short of logic cells).
# (A memory of one write port and one read port: the mask is a bit per pair.)
NO_COLLISIONS = {"cepc_no_collisions": 1}

# the DP16KD's shapes: data width → depth, and the address bits below the word address
MODES = {36: 512, 18: 1024, 9: 2048, 4: 4096, 2: 8192, 1: 16384}
LOW_BITS = {36: 5, 18: 4, 9: 3, 4: 2, 2: 1, 1: 0}


def uses_dp16kd(platform) -> bool:
    """True when ``platform`` is an ECP5 one, where a DP16KD can be instantiated."""
    return getattr(platform, "family", None) == "ecp5"


def mode_for(depth: int) -> int:
    """The widest shape at least ``depth`` words deep (a bank of a shallow table wastes nothing)."""
    for width in (36, 18, 9, 4, 2, 1):
        if MODES[width] >= depth:
            return width
    raise ValueError(f"a DP16KD is at most 16,384 words deep, not {depth}")


def dp16kd_blocks(width: int, depth: int) -> int:
    """DP16KDs a :class:`RegisteredRam` of ``depth`` words of ``width`` bits takes on ECP5."""
    return -(-width // mode_for(depth))


def dp16kd(*, w_en: Value, w_addr: Value, w_data: Value, r_addr: Value, r_en: Value, o_en: Value,
           out: Value, platform=None, name: str = "dp16kd", width: int = 9) -> Elaboratable:
    """One DP16KD of ``width``-bit words (a key of :data:`MODES`): port A writes ``w_data`` at
    ``w_addr`` when ``w_en``; port B reads ``r_addr`` when ``r_en`` and registers the word into
    ``out`` when ``o_en``. Narrower addresses and data are zero-extended. A model stands in when
    ``platform`` asks for one (``simulate_primitives``)."""
    if width not in MODES:
        raise ValueError(f"a DP16KD's words are {sorted(MODES)} bits wide, not {width}")
    low = LOW_BITS[width]

    def address(prefix, addr, below=()):  # the word address above `low` bits (byte enables or 0)
        pins = {f"i_{prefix}{i}": (addr[i - low] if low <= i < low + len(addr) else 0) for i in range(14)}
        for i, v in enumerate(below):
            pins[f"i_{prefix}{i}"] = v
        return pins

    def bits(v, lo, n):
        return [v[i] if i < len(v) else 0 for i in range(lo, lo + n)]

    def outs(v, lo, n, port):
        return [v[i] if i < len(v) else Signal(name=f"{name}_do{port.lower()}{i - lo}") for i in range(lo, lo + n)]

    if width == 36:  # both ports' data pins carry the word; the write port's low address bits enable its bytes
        dia, dib, doa, dob = bits(w_data, 0, 18), bits(w_data, 18, 18), outs(out, 0, 18, "A"), outs(out, 18, 18, "B")
        a_pins = address("ADA", w_addr, below=[w_en] * 4)
        we = {"i_WEA": 1}
    else:
        dia, dib = bits(w_data, 0, 18), [0] * 18
        doa, dob = [Signal(name=f"{name}_doa{i}") for i in range(18)], outs(out, 0, 18, "B")
        a_pins = address("ADA", w_addr, below=[1, 1] if width == 18 else ())
        we = {"i_WEA": w_en}
    ports = {
        **a_pins, **address("ADB", r_addr),
        **{f"i_DIA{i}": v for i, v in enumerate(dia)}, **{f"i_DIB{i}": v for i, v in enumerate(dib)},
        **{f"o_DOA{i}": v for i, v in enumerate(doa)}, **{f"o_DOB{i}": v for i, v in enumerate(dob)},
        "i_CLKA": ClockSignal(), "i_CLKB": ClockSignal(), **we, "i_WEB": 0,
        "i_CEA": 1, "i_CEB": r_en, "i_OCEA": o_en, "i_OCEB": o_en, "i_RSTA": 0, "i_RSTB": 0,
        **{f"i_CS{p}{i}": 0 for p in "AB" for i in range(3)},
    }
    params = {
        "p_DATA_WIDTH_A": width, "p_DATA_WIDTH_B": width,
        # at 36 bits the low half of the word leaves through port A's pins, so both output registers
        "p_REGMODE_A": "OUTREG" if width == 36 else "NOREG", "p_REGMODE_B": "OUTREG",
        "p_RESETMODE": "SYNC", "p_ASYNC_RESET_RELEASE": "SYNC", "p_CSDECODE_A": "0b000", "p_CSDECODE_B": "0b000",
        "p_WRITEMODE_A": "NORMAL", "p_WRITEMODE_B": "NORMAL", "p_GSR": "AUTO",
    }
    if getattr(platform, "simulate_primitives", False):
        return Dp16kdModel(params, ports)
    return Instance("DP16KD", **params, **ports)


class Dp16kdModel(Elaboratable):
    """What a DP16KD does with the pins :func:`dp16kd` drives (Lattice TN1264): port A writes on a
    clock edge with CEA and WEA (at 18 and 36 bits, with the byte enables in its low address bits
    set); port B reads on an edge with CEB (the word as it was before a write in the same edge) into
    its latch; with ``REGMODE_B`` OUTREG the output register takes the latch on an edge with OCEB,
    else DOB is the latch. At 36 bits the word is DIA/DOA (low half) and DIB/DOB (high half)."""

    def __init__(self, params: dict, ports: dict):
        assert params["p_DATA_WIDTH_A"] == params["p_DATA_WIDTH_B"]
        self._width = params["p_DATA_WIDTH_A"]
        self._regmode = params["p_REGMODE_B"]
        if self._width == 36:
            assert params["p_REGMODE_A"] == self._regmode
        self._ports = ports

    def elaborate(self, platform):
        m = Module()
        p, width = self._ports, self._width
        low = LOW_BITS[width]

        def value(v):
            return Const(v, 1) if isinstance(v, int) else v

        def word_address(prefix):
            return Cat(*(value(p[f"i_{prefix}{i}"]) for i in range(low, 14)))

        def pins(prefix, n):
            return [value(p[f"i_{prefix}{i}"]) for i in range(n)]

        m.submodules.mem = mem = memory.Memory(shape=width, depth=MODES[width], init=[])
        wr, rd = mem.write_port(), mem.read_port()
        if width == 36:
            data_in, outputs = Cat(*pins("DIA", 18), *pins("DIB", 18)), [p[f"o_DOA{i}"] for i in range(18)] + \
                [p[f"o_DOB{i}"] for i in range(18)]
            byte_en = Cat(*pins("ADA", 4)).all()
        else:
            data_in, outputs = Cat(*pins("DIA", min(width, 18))), [p[f"o_DOB{i}"] for i in range(width)]
            byte_en = Cat(*pins("ADA", 2)).all() if width == 18 else Const(1)
        m.d.comb += [
            wr.addr.eq(word_address("ADA")), wr.data.eq(data_in),
            wr.en.eq(value(p["i_CEA"]) & value(p["i_WEA"]) & byte_en),
            rd.addr.eq(word_address("ADB")), rd.en.eq(value(p["i_CEB"])),
        ]
        do = Signal(width)
        if self._regmode == "OUTREG":
            with m.If(value(p["i_OCEB"])):
                m.d.sync += do.eq(rd.data)
        else:
            m.d.comb += do.eq(rd.data)
        m.d.comb += [o.eq(do[i]) for i, o in enumerate(outputs)]
        return m


class RegisteredRam(wiring.Component):
    """``depth`` words of ``width`` bits, one write port and one read port whose word is registered:
    a read of ``r_addr`` at an edge where ``r_en`` is high is on ``r_data`` after the next edge where
    ``o_en`` is high (the word as it was before a write in the same edge). On ECP5 these are DP16KDs
    of the widest shape deep enough, side by side, read through their own output registers; elsewhere
    a memory's read port followed by a register."""

    def __init__(self, width: int, depth: int):
        self.width, self.depth = width, depth
        self.mode = mode_for(depth)
        super().__init__({
            "w_en": In(1), "w_addr": In(range(depth)), "w_data": In(width),
            "r_en": In(1), "o_en": In(1), "r_addr": In(range(depth)), "r_data": Out(width),
        })

    def blocks(self) -> int:
        """DP16KDs on ECP5."""
        return dp16kd_blocks(self.width, self.depth)

    def elaborate(self, platform):
        m = Module()
        if uses_dp16kd(platform):
            for n, lo in enumerate(range(0, self.width, self.mode)):
                hi = min(lo + self.mode, self.width)
                m.submodules[f"block{n}"] = dp16kd(
                    w_en=self.w_en, w_addr=self.w_addr, w_data=self.w_data[lo:hi], r_addr=self.r_addr,
                    r_en=self.r_en, o_en=self.o_en, out=self.r_data[lo:hi], platform=platform,
                    name=f"block{n}", width=self.mode)
            return m
        # (its callers never use a word read as it is written: NO_COLLISIONS; the table forwards the
        # writes block RAM had not taken when it read, the host link reads only committed bytes)
        m.submodules.mem = mem = memory.Memory(shape=self.width, depth=self.depth, init=[], attrs=NO_COLLISIONS)
        wr, rd = mem.write_port(), mem.read_port()
        m.d.comb += [wr.addr.eq(self.w_addr), wr.data.eq(self.w_data), wr.en.eq(self.w_en),
                     rd.addr.eq(self.r_addr), rd.en.eq(self.r_en)]
        with m.If(self.o_en):
            m.d.sync += self.r_data.eq(rd.data)
        return m


# A MULT18X18D's operands are 18 bits wide, its product 36
MULT_WIDTH = 18


def uses_mult18(platform) -> bool:
    """True when ``platform`` is an ECP5 one, where a MULT18X18D can be instantiated."""
    return getattr(platform, "family", None) == "ecp5"


def mult18x18d(*, a: Value, b: Value, a_en: Value, p_en: Value, product: Value, platform=None) -> Elaboratable:
    """One MULT18X18D whose input registers take ``a`` and ``b`` (each at most 18 bits, extended by
    their own signedness) on edges where ``a_en`` is high, and whose output register takes their
    36-bit product (``product``) on edges where ``p_en`` is high. A model stands in when ``platform``
    asks for one (``simulate_primitives``)."""
    if len(a) > MULT_WIDTH or len(b) > MULT_WIDTH:
        raise ValueError(f"a MULT18X18D's operands are at most {MULT_WIDTH} bits, not {len(a)} and {len(b)}")

    ax, bx = extended(a, MULT_WIDTH), extended(b, MULT_WIDTH)  # (by the operands' own signedness)
    ports = {
        **{f"i_A{i}": ax[i] for i in range(MULT_WIDTH)}, **{f"i_B{i}": bx[i] for i in range(MULT_WIDTH)},
        **{f"i_C{i}": 0 for i in range(MULT_WIDTH)},
        "i_SIGNEDA": int(a.shape().signed), "i_SIGNEDB": int(b.shape().signed), "i_SOURCEA": 0, "i_SOURCEB": 0,
        "i_CLK0": ClockSignal(), "i_CLK1": 0, "i_CLK2": 0, "i_CLK3": 0,
        "i_CE0": a_en, "i_CE1": p_en, "i_CE2": 0, "i_CE3": 0, "i_RST0": 0, "i_RST1": 0, "i_RST2": 0, "i_RST3": 0,
        **{f"o_P{i}": product[i] for i in range(2 * MULT_WIDTH)},
    }
    params = {
        "p_REG_INPUTA_CLK": "CLK0", "p_REG_INPUTA_CE": "CE0", "p_REG_INPUTA_RST": "RST0",
        "p_REG_INPUTB_CLK": "CLK0", "p_REG_INPUTB_CE": "CE0", "p_REG_INPUTB_RST": "RST0",
        "p_REG_INPUTC_CLK": "NONE", "p_REG_PIPELINE_CLK": "NONE",
        "p_REG_OUTPUT_CLK": "CLK0", "p_REG_OUTPUT_CE": "CE1", "p_REG_OUTPUT_RST": "RST0",
        "p_GSR": "DISABLED", "p_CAS_MATCH_REG": "FALSE", "p_MULT_BYPASS": "DISABLED", "p_RESETMODE": "SYNC",
    }
    if getattr(platform, "simulate_primitives", False):
        return Mult18x18dModel(params, ports)
    return Instance("MULT18X18D", **params, **ports)


class Mult18x18dModel(Elaboratable):
    """What a MULT18X18D does with the pins :func:`mult18x18d` drives (Lattice TN1267): its input
    registers take A and B on clock edges with their clock enable, each read as signed where SIGNEDA
    or SIGNEDB says; its output register takes their 36-bit product on edges with its own."""

    def __init__(self, params: dict, ports: dict):
        assert params["p_REG_INPUTA_CLK"] == params["p_REG_INPUTB_CLK"] == params["p_REG_OUTPUT_CLK"] == "CLK0"
        self._params, self._ports = params, ports

    def elaborate(self, platform):
        m = Module()
        p, params = self._ports, self._params

        def value(v):
            return Const(v, 1) if isinstance(v, int) else v

        def operand(name):
            bits = Cat(*(value(p[f"i_{name}{i}"]) for i in range(MULT_WIDTH)))
            return bits.as_signed() if isinstance(p[f"i_SIGNED{name}"], int) and p[f"i_SIGNED{name}"] else bits

        ce = {f"CE{i}": value(p[f"i_CE{i}"]) for i in range(4)}
        a, b = operand("A"), operand("B")
        a_reg = Signal(a.shape(), name="a_reg")
        b_reg = Signal(b.shape(), name="b_reg")
        out = Signal(2 * MULT_WIDTH, name="p_reg")
        with m.If(ce[params["p_REG_INPUTA_CE"]]):
            m.d.sync += a_reg.eq(a)
        with m.If(ce[params["p_REG_INPUTB_CE"]]):
            m.d.sync += b_reg.eq(b)
        with m.If(ce[params["p_REG_OUTPUT_CE"]]):
            m.d.sync += out.eq(a_reg * b_reg)
        m.d.comb += Cat(*(p[f"o_P{i}"] for i in range(2 * MULT_WIDTH))).eq(out)
        return m


class RegisteredMult(wiring.Component):
    """``a`` × ``b``, both operands registered on the edges where ``a_en`` is high and their product
    registered on those where ``p_en`` is high (``p``). On ECP5 a MULT18X18D whose own input and
    output registers these are: nextpnr times the multiplier from register to register inside the
    block. Built from flip-flops around a multiplier, as Yosys maps one, its 3.9 ns came between
    flip-flops the placer put apart (finance5's products at seed 1: 7.5 ns). Elsewhere, flip-flops
    and a ``*``, cycle for cycle the same. Each operand is at most 18 bits."""

    def __init__(self, a_shape, b_shape):
        self._product = (Signal(a_shape) * Signal(b_shape)).shape()
        super().__init__({"a": In(a_shape), "b": In(b_shape), "a_en": In(1), "p_en": In(1), "p": Out(self._product)})

    def elaborate(self, platform):
        m = Module()
        if uses_mult18(platform):
            product = Signal(2 * MULT_WIDTH)
            m.submodules.block = mult18x18d(a=self.a, b=self.b, a_en=self.a_en, p_en=self.p_en, product=product,
                                            platform=platform)
            m.d.comb += self.p.eq(product.as_signed() if self._product.signed else product)
            return m
        a_reg, b_reg = Signal.like(self.a, name="a_reg"), Signal.like(self.b, name="b_reg")
        with m.If(self.a_en):
            m.d.sync += [a_reg.eq(self.a), b_reg.eq(self.b)]
        with m.If(self.p_en):
            m.d.sync += self.p.eq(a_reg * b_reg)
        return m
