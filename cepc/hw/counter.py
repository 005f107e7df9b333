"""Wide counters without a wide carry chain.

A 48-bit ``c.eq(c + 1)`` is a 48-stage carry chain: on the UP5K 47 logic levels, 26.6 ns, the
critical path of network's board top (its seq counter). :func:`increment` cuts the counter into
segments of :data:`SEGMENT` bits; a segment counts when every segment below it is all ones, which
each says with a flag registered beside it. The count is exact in every cycle (no carry is late):
a segment changes only when it counts, and then its flag takes whether it is one short of all ones.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

SEGMENT = 16


def increment(m: Module, counter: Value, inc, segment: int = SEGMENT, name: str | None = None) -> None:
    """Add ``m.d.sync`` logic that adds 1 to ``counter`` on the cycles ``inc`` is high (wrapping).

    ``counter`` (a signal, or a slice of one: ``name`` its flags' names) must start at zero after a
    reset and be driven by nothing else: its segments' flags start at zero (not all ones) with it.
    Carry chains are at most ``segment`` bits long."""
    name = name or counter.name
    n = len(counter)
    carry = Value.cast(inc)
    for lo in range(0, n, segment):
        hi = min(lo + segment, n)
        part = counter[lo:hi]
        with m.If(carry):
            m.d.sync += part.eq(part + 1)
        if hi == n:
            break
        full = Signal(name=f"{name}_ones{lo // segment}")  # the segment is all ones
        with m.If(carry):
            m.d.sync += full.eq(part == (1 << (hi - lo)) - 2)
        carry = carry & full


def count_late(m: Module, counter: Signal, event) -> Signal:
    """Add 1 to ``counter`` two cycles after each cycle ``event`` is high: the event is registered
    twice first, so its logic ends in a flip-flop, not in the enables of the counter's segments, and
    the route from the design to the counter (kept beside the host link, which reads it) runs between
    two flip-flops (mshape on the ECP5-85F, seed 1: a 4.2 ns route from `overflow_event` into the
    counter's enables, 6.95 ns in all). For status counters, read long after what they count; call it
    outside any ``m.If``. Returns the event as counted (a register: a :class:`CounterBank`'s input,
    where the counter is read from there rather than from ``counter``)."""
    late = Signal(name=f"{counter.name}_event")
    later = Signal(name=f"{counter.name}_event2")
    m.d.sync += [late.eq(event), later.eq(late)]
    increment(m, counter, later)
    return later


def add(m: Module, counter: Signal, amount: Value, segment: int = SEGMENT) -> None:
    """Add ``m.d.sync`` logic that adds ``amount`` (narrower than a segment) to ``counter`` every
    cycle: the lowest segment adds it, and its carry out increments the rest (:func:`increment`)."""
    if len(counter) <= segment:
        m.d.sync += counter.eq(counter + amount)
        return
    low = counter[:segment]
    total = Signal(segment + 1, name=f"{counter.name}_low")
    m.d.comb += total.eq(low + amount)
    m.d.sync += low.eq(total[:segment])
    increment(m, counter[segment:], total[segment], segment, name=counter.name)


CHUNK = 16  # a CounterBank's RAM word: the UP5K's single-port RAM's (SB_SPRAM256KA, 16K words of 16 bits)


def has_spram(platform) -> bool:
    """True when ``platform``'s device has single-port RAM blocks (the iCE40 UltraPlus: SB_SPRAM256KA)."""
    return str(getattr(platform, "device", "")).startswith("iCE40UP")


class CounterBank(wiring.Component):
    """Status counters kept in a single-port RAM rather than in logic cells.

    A counter of 48 bits in logic takes 48 logic cells, and reading one of six takes a multiplexer of
    five more a bit: on the UP5K the design's six status counters, the host link's four and their reads
    took about 870 of the LUTs of the device's 5,280 logic cells (mshape's: 23 %). Here each counter is
    ``width`` bits in a RAM of ``CHUNK``-bit words,
    one word per ``CHUNK`` bits (on the UltraPlus, one of its single-port RAMs, which nothing else
    uses), and beside it only a small count of what it has not yet added (``pending``).

    ``amounts``: for each counter, the most it counts in one cycle; its increment, of
    ``amounts[i].bit_length()`` bits, comes packed in ``inc`` (counter 0's lowest), every cycle.
    The bank visits the counters in turn and adds each one's pending count into the RAM, a word at a
    time from the lowest (a read, then the write of the sum; the next word only while a carry is
    left): so a count is in the RAM at most ``gap`` cycles (a few hundred) after it was counted, and
    each pending count is wide enough never to overflow meanwhile.

    Read: a cycle of ``read`` asks for counter ``index``; ``done`` pulses as its last word is read,
    ``word`` holds it from the cycle after, and stays until the next read. The value is the counter's
    in the RAM: every count added up to some cycle, the counts pending then not yet (a value the
    counter had at most ``gap`` cycles before, never a mix of two: a read and an addition never
    interleave). ``busy`` is high while counts are pending or the
    RAM is being cleared (for ``gap``'s cycles after a reset, the RAM's contents being arbitrary
    after configuration and kept through a reset)."""

    def __init__(self, amounts: list[int], width: int = 48):
        if not amounts or min(amounts) < 1:
            raise ValueError(f"a counter bank counts at least one counter by at least one, not {amounts!r}")
        self.amounts = list(amounts)
        self.widths = [a.bit_length() for a in self.amounts]
        self.width = width
        self.chunks = -(-width // CHUNK)
        n = len(self.amounts)
        self.stride = 1 << (self.chunks - 1).bit_length()  # RAM words a counter: its address is index * stride + word
        # the most cycles between two additions of one counter: every other counter visited once (two
        # cycles to look at it), with an addition (two cycles to take its count, then five a RAM word:
        # the read asked for, two cycles through the registers on each side of the RAM, the sum into a
        # register, and the write; the carry running through every word) and a read (two, then four a
        # word) served before it; or, after a reset, the clearing of the RAM first
        self.gap = n * (2 + (2 + 5 * self.chunks) + (2 + 4 * self.chunks)) + n * self.stride + 4
        self.pending_widths = [(self.gap * a).bit_length() for a in self.amounts]
        super().__init__({"inc": In(sum(self.widths)), "index": In(range(max(n, 2))), "read": In(1),
                          "done": Out(1), "word": Out(width), "busy": Out(1)})

    def counts(self, packed: Value) -> list[Value]:
        """Each counter's increment, out of ``packed`` (as ``inc`` packs them)."""
        parts, lo = [], 0
        for w in self.widths:
            parts.append(packed[lo:lo + w])
            lo += w
        return parts

    def elaborate(self, platform):
        m = Module()
        n, chunks, stride = len(self.amounts), self.chunks, self.stride
        depth = n * stride
        # The RAM's address, data and write enable come from registers, and what it reads is registered
        # before it is used: on the UP5K its blocks sit at the die's edge, and a route to or from one was
        # the design's critical path without them (finance5: 31.6 ns, against 30.5 for its conditions).
        # A word asked for in one cycle is read at the end of the next, and can be used in the one after.
        addr, wdata, we = Signal(range(depth)), Signal(CHUNK), Signal()  # the request, from the state machine
        r_addr = Signal(range(depth), reset_less=True)
        r_wdata = Signal(CHUNK, reset_less=True)
        r_we = Signal()
        rdata, r_rdata = Signal(CHUNK), Signal(CHUNK, reset_less=True)
        m.d.sync += [r_addr.eq(addr), r_wdata.eq(wdata), r_we.eq(we), r_rdata.eq(rdata)]
        if has_spram(platform):
            m.submodules.ram = Instance(
                "SB_SPRAM256KA", i_ADDRESS=Cat(r_addr, Const(0, 14 - len(r_addr))), i_DATAIN=r_wdata,
                i_MASKWREN=Const(0b1111, 4), i_WREN=r_we, i_CHIPSELECT=Const(1, 1), i_CLOCK=ClockSignal(),
                i_STANDBY=Const(0, 1), i_SLEEP=Const(0, 1), i_POWEROFF=Const(1, 1), o_DATAOUT=rdata)
        else:  # (the same RAM for simulation and other devices: a read takes a cycle)
            m.submodules.ram = ram = Memory(shape=CHUNK, depth=depth, init=[])
            w, r = ram.write_port(), ram.read_port()
            m.d.comb += [w.addr.eq(r_addr), w.data.eq(r_wdata), w.en.eq(r_we), r.addr.eq(r_addr), rdata.eq(r.data)]

        # the counts not yet added; a counter's is taken (into `addend`, its new count kept) in the cycle
        # after the state machine chose it (`take`, a register)
        incs = self.counts(self.inc)
        pending = [Signal(wd, name=f"pending{i}") for i, wd in enumerate(self.pending_widths)]
        take = Signal(n)
        nonzero = Signal(n)  # which counts are not zero, a cycle late (a count only grows until taken)
        for i in range(n):
            # A count taken is cleared (synthesis: the flip-flops' synchronous reset) and what came in the
            # cycle it was taken is added in the next (`arrived`, as the chain's carry in where it is a bit):
            # a logic cell a bit, where clearing it through a multiplexer in front of the sum took two
            arrived = Signal(len(incs[i]), name=f"arrived{i}")
            m.d.sync += arrived.eq(Mux(take[i], incs[i], 0))
            with m.If(take[i]):
                m.d.sync += pending[i].eq(0)
            with m.Else():
                m.d.sync += pending[i].eq(pending[i] + incs[i] + arrived)
        m.d.sync += [nonzero.eq(Cat(*(p != 0 for p in pending))), take.eq(0)]

        sel = Signal(n, init=1)  # the counter the bank visits next, one-hot, and its index
        ptr = Signal(range(n))
        # (the registers that hold data only in the states that read them have no reset)
        cur = Signal(range(n), reset_less=True)  # the counter being added to or read
        word = Signal(range(chunks), reset_less=True)  # its RAM word being read or written
        addend = Signal(max(self.pending_widths), reset_less=True)  # what is added: the count taken, then a carry
        wanted, windex = Signal(), Signal(range(max(n, 2)), reset_less=True)  # a read asked for, not yet begun
        after_read = Signal()  # the bank served a read last: an addition comes first now
        value = Signal(chunks * CHUNK, reset_less=True)
        clearing = Signal(range(depth))
        m.d.comb += self.word.eq(value[:self.width])
        with m.If(self.read):
            m.d.sync += [wanted.eq(1), windex.eq(self.index)]
        with m.If(take.any()):
            m.d.sync += addend.eq(_or(Mux(take[i], pending[i], 0) for i in range(n)))

        def here(index):  # the RAM word `word` of counter `index`
            return (index * stride)[:len(addr)] + word if stride > 1 else index + word

        total = Signal(CHUNK + 1, reset_less=True)  # the word read plus the addend, registered
        # (the state machine's decisions read only registers: `due`, whether the counter at `sel` has a
        # count pending, looked at a cycle before; the carry out of the sum. finance0 on the UP5K: the sum's
        # carry into the state machine's choice, and `nonzero` through it, 20-25 ns without)
        due = Signal()

        def next_counter():  # the visit moves on to the next counter
            m.d.sync += [sel.eq(sel.rotate_left(1)), ptr.eq(Mux(ptr == n - 1, 0, ptr + 1))]

        def read_word(state, then):  # states: `word` of `cur` asked for, then two cycles through the RAM's registers
            with m.State(state):
                m.d.comb += addr.eq(here(cur))
                m.next = f"{state}_wait"
            with m.State(f"{state}_wait"):
                m.next = f"{state}_read"
            with m.State(f"{state}_read"):  # (`r_rdata` holds the word from the next cycle)
                m.next = then

        with m.FSM(name="bank") as fsm:
            with m.State("clear"):  # after a reset: every word zero
                m.d.comb += [addr.eq(clearing), wdata.eq(0), we.eq(1)]
                m.d.sync += clearing.eq(clearing + 1)
                with m.If(clearing == depth - 1):
                    m.d.sync += clearing.eq(0)
                    m.next = "look"
            with m.State("look"):
                m.d.sync += due.eq((nonzero & sel).any())
                m.next = "idle"
            with m.State("idle"):
                m.d.sync += word.eq(0)
                with m.If(wanted & ~after_read):
                    m.d.sync += [cur.eq(windex), after_read.eq(1)]
                    with m.If(~self.read):
                        m.d.sync += wanted.eq(0)
                    m.next = "read"
                with m.Elif(due):
                    m.d.sync += [cur.eq(ptr), take.eq(sel), after_read.eq(0)]
                    m.next = "add"
                with m.Else():
                    next_counter()
                    m.d.sync += after_read.eq(0)
                    m.next = "look"
            # an addition: each word read, then written with the addend added, the next word only while
            # a carry is left
            read_word("add", "add_sum")
            with m.State("add_sum"):
                m.d.sync += total.eq(r_rdata + addend)
                m.next = "add_write"
            with m.State("add_write"):
                m.d.comb += [addr.eq(here(cur)), wdata.eq(total[:CHUNK]), we.eq(1)]
                with m.If(total[CHUNK] & (word != chunks - 1)):
                    m.d.sync += [addend.eq(1), word.eq(word + 1)]
                    m.next = "add"
                with m.Else():
                    next_counter()
                    m.next = "look"
            # a read: each word read, then taken
            read_word("read", "read_take")
            with m.State("read_take"):
                with m.Switch(word):
                    for k in range(chunks):
                        with m.Case(k):
                            m.d.sync += value[k * CHUNK:(k + 1) * CHUNK].eq(r_rdata)
                with m.If(word != chunks - 1):
                    m.d.sync += word.eq(word + 1)
                    m.next = "read"
                with m.Else():
                    m.d.comb += self.done.eq(1)
                    m.next = "look"
        # (a count in this cycle or the last is not yet among `nonzero`)
        m.d.comb += self.busy.eq(~(fsm.ongoing("idle") | fsm.ongoing("look")) | wanted | nonzero.any()
                                 | self.inc.any() | take.any())
        return m


def _or(values) -> Value:
    acc = 0
    for v in values:
        acc = acc | v
    return Value.cast(acc)
