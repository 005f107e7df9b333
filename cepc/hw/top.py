"""The generated top: framing → predicate decoder → partitioners → NFA cores → match stream.

Ports (SPEC §4; AXI-Stream naming):

* ``s_tdata``/``s_tkeep``/``s_tvalid``/``s_tready``/``s_tlast``: packed tuples in;
* ``m_tdata``/``m_tvalid``/``m_tready``/``m_tlast``: one match record per beat
  (layout in :func:`cepc.hw.layouts.record_layout` and the JSON sidecar);
* ``spill_tdata``/``spill_tvalid``/``spill_tready``: tuples the partitioner
  could not place, for the host to handle (counted in ``dropped``);
* ``tuples_in``, ``matches_out``, ``dropped``, ``malformed``, ``evicted``, ``overflow``: status counters
  (``overflow``: tuples at which a partial match longer than ``--max-match-length`` was dropped).

Pipeline (one stage per line, all advancing together while ``en`` is high):

1. framer output accepted (every cycle, or every other one with the pipeline partitioner);
2. tuple register;
3. predicate vector register (decoder output), ``seq`` assigned, key injected into each query's partitioner;
4. … ``depth`` cycles in the partitioner, payload in a delay line beside it …
5. NFA core on the tail element; the record is registered, with the parts of the decision
   to write it (and to spill the tuple);
6. … and written into the query's output FIFO (or the tuple into the spill FIFO); with the
   two-cycle update (a cycle more in the partitioner), registered once more first.

``en`` (a register) drops when any output FIFO is nearly full, which freezes
the whole pipeline: backpressure on ``m_tready`` or ``spill_tready`` never
loses a tuple.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..plan import DesignPlan, QueryPlan, TuplePlan
from . import refusing
from .arbiter import RoundRobin
from .counter import add, count_late, increment
from .decoder import PredicateDecoder
from .delay import DelayLine
from .ecp5 import uses_mult18
from .fifo import BlockRamFifo, OutputFifo, TwoBeatFifo
from .framing import Framer
from .layouts import COUNTER_WIDTH, SEQ_WIDTH, field, hw_names, key_width, padded, record_layout, tuple_layout
from .nfa_core import (
    COMPARE_CARRY,
    Conditions,
    DfaCore,
    Measures,
    NfaCore,
    PartialMatchCore,
    TupleInputs,
    TupleTerms,
    computes,
    packed_registers,
    pick,
)
from .partition import PipelinePartitioner, SinglePartition, TablePartitioner
from .partition.table import DEPTH as TABLE_DEPTH
from .partition.table import hold_spacing, stall_spacing
from .replica import Replica, small_die

OUTPUT_FIFO_DEPTH = 16
# (a tuple every three cycles) the bits in a slice of the conditions' compares, each slice's carry chain
# registered: their join has a cycle of its own (mshape on the UP5K, 16-bit slices: 18 levels, 19.8 ns)
CUT_CARRY = 8
# the status counters, in the order of their ports (and of cepc.protocol.DESIGN_COUNTERS)
COUNTERS = ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow")
# Writes that can still reach a FIFO after its level is seen: the record register, the NFA
# stage that `en` let through, one for the level's own register, one for `en_next` (`en` is
# registered twice: the first register feeds copies of it across the die), and one in the FIFO's
# write register (cepc.hw.fifo; the level counts the words stored). The two-cycle update's second
# record register adds one.
STALL_MARGIN = 5


def stall_margin(update_cycles: int) -> int:
    """The writes still in flight when the FIFOs' levels are seen (`room` keeps that many slots
    free): :data:`STALL_MARGIN`, and the two- or three-cycle update's second record register."""
    return STALL_MARGIN + (1 if update_cycles >= 2 else 0)


PARTITIONERS = ("table", "pipeline")


def check_options(bus_width: int, partitions: int, partitioner: str, evict_after: int | None = None) -> None:
    """Raise ValueError with a user-facing message for options the top cannot take."""
    if evict_after is not None and evict_after < 1:
        raise ValueError(f"--evict-after must be a positive number of cycles, not {evict_after!r}")
    if bus_width % 8 or not 8 <= bus_width <= 512:
        raise ValueError(f"bus width must be a multiple of 8 between 8 and 512, not {bus_width!r}")
    if partitions < 1:
        raise ValueError(f"--partitions must be at least 1, not {partitions!r}")
    if partitioner not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}; use table or pipeline")


def within_expiry(q: QueryPlan, tup: TuplePlan) -> tuple[int, int]:
    """WITHIN's exact eviction, as both back ends build it: (the bits of an expiry, the window it adds).
    An expiry is the key's last time plus the window, compared unsigned in one bit more than the time
    field; the window is at most the time field's range (a wider one never expires an entry, and the
    sum cannot wrap)."""
    width = tup.field(q.time_field).width
    return width + 1, min(q.within, (1 << width) - 1)


def table_partitioner(q: QueryPlan, tup: TuplePlan, partitions: int, ways: int | None = None,
                      evict_after: int | None = None, core: PartialMatchCore | None = None,
                      inputs: TupleInputs | None = None, *, lag: int = 0, stall: bool = False) -> TablePartitioner:
    """A keyed query's table partitioner, as the top builds it (the VHDL's generics come from it).
    With a partial-match ``core`` given its conditions, the table computes them
    (:class:`~cepc.hw.nfa_core.Conditions`) for the tuple at stage 3 from ``inputs``
    (:meth:`TupleInputs.for_conditions <cepc.hw.nfa_core.TupleInputs.for_conditions>`, given for the
    tuple at stage 1 as ``cond_in``: the table registers a copy per use); with ``lag`` (the two-cycle
    update) also its newest write's, at the lookup. ``stall``: ``--hazards stall``."""
    expiry, window = within_expiry(q, tup) if q.within is not None else (None, 0)
    lookahead = {}
    if core is not None and core.given_cond:
        lookahead = {"conditions": lambda state, packed, only=None: core.conditions.of(state, *inputs.unpack(packed),
                                                                                     only=only),
                     "cond_width": core.conditions.width, "cond_in_width": inputs.width,
                     "cond_bits": core.conditions.state_bits(), "cond_groups": core.conditions.groups()}
    # (a partial-match core's update is a long loop through the table's newest write: relayed to the banks)
    return TablePartitioner(partitions, key_width(tup, q), q.state_width, vector_width=q.vector_width, ways=ways,
                            evict_after=evict_after, expiry_width=expiry, window=window, early_key=2,
                            en_ahead=True, relay=core is not None, lag=lag, stall=stall, given_index=lag == 2,
                            **lookahead)


def update_cycles_for(design: DesignPlan, partitioner: str, asked: str | int = "auto") -> int:
    """Cycles a key's update takes (``--update-cycles``): 1, or 2 where the table's lookup and the
    core's update each take a cycle (a tuple whose key shares a bucket with the tuple just before it
    then waits a cycle), or 3 where the conditions of the key's state take a cycle of their own
    between them (a tuple waits while its bucket is either of the two tuples' before it). ``auto``: 3
    for the table of a design with a keyed partial-match query (registers, conditions: the long update
    that limits its clock; on the ECP5-85F the three-cycle update is faster than the two-cycle one on
    the mean of nextpnr's seeds, with 0.57–0.75× the LUT4s), else 1."""
    if str(asked) != "auto":
        return int(asked)
    return 3 if partitioner == "table" and any(q.key_fields and q.tracks_matches for q in design.queries) else 1


def slot_period_for(design: DesignPlan, partitioner: str, partitions: int, asked: str | int = "auto",
                    hdl: str = "verilog") -> int:
    """Cycles between the tuples Woods' pipeline takes (``cepc synth --slot-period``): 2, or 3 with one
    element, where a keyed partial-match query's conditions (:func:`pipeline_conditions`) take two
    cycles of their own, their compares' slices and then their join, before the cycle that updates the
    element. ``auto``: 3 for the Verilog of such a pipeline (its loop, the conditions and the update, is
    what limits its clock: mshape on the UP5K 1.12x on the mean of nextpnr's seeds), else 2. A board's
    host link carries a thousandth of either rate."""
    if str(asked) != "auto":
        return int(asked)
    one = partitioner == "pipeline" and partitions == 1 and keyed(design)
    return 3 if one and hdl == "verilog" and any(pipeline_conditions(q) for q in design.queries) else 2


HAZARDS = ("forward", "stall")


def hazards_for(asked: str = "auto") -> str:
    """How a table's lookup gets the writes of the keys ahead of it that block RAM has not taken yet
    (``--hazards``): ``forward`` picks them from the writes in flight (a tuple a cycle, whatever its
    key); ``stall`` holds a tuple while a key of its bucket is within
    :func:`~cepc.hw.partition.table.stall_spacing` of it, and forwards nothing. ``auto``: forward."""
    if asked == "auto":
        return "forward"
    if asked not in HAZARDS:
        raise ValueError(f"--hazards is auto, forward or stall, not {asked!r}")
    return asked


def keyed(design: DesignPlan) -> bool:
    return any(q.key_fields for q in design.queries)


def pipelined(design: DesignPlan, partitioner: str = "pipeline") -> bool:
    """True if some query uses the pipeline partitioner (one tuple every other cycle)."""
    return partitioner == "pipeline" and keyed(design)


def partitioner_depth(design: DesignPlan, partitions: int, partitioner: str = "pipeline",
                      update_cycles: int = 1, slot_period: int = 2) -> int:
    """Cycles a key spends in the partitioners: ``partitions`` for the pipeline partitioner (one more
    with a tuple every three cycles: a register stage before it), 4 for the table (5 with the two-cycle
    update, 6 with the three-cycle one), 1 when no query has PARTITION BY."""
    if not keyed(design):
        return 1
    if partitioner == "pipeline":
        return partitions + (slot_period == 3)
    return TABLE_DEPTH + update_cycles - 1


def pipeline_conditions(q: QueryPlan) -> bool:
    """Whether Woods' pipeline gives query ``q``'s partial-match core its conditions
    (:class:`~cepc.hw.nfa_core.Conditions`, every MIN's and MAX's compare among them) from a register,
    computed a stage before the partitioner's tail: a keyed query with conditions to compute."""
    return bool(q.key_fields) and q.tracks_matches and Conditions(q, every_beat=True).width > 0


def payload_width(design: DesignPlan, decoder: bool = True) -> int:
    """The width of the delay line carrying each tuple beside its key: the raw tuple (whole bytes) and
    the predicate vector of the shared decoder (the queries it serves)."""
    preds = sum(len(q.predicates) for q in design.queries if decoder or q.tracks_matches)
    return design.tuple.nbytes * 8 + max(1, preds)


def latency(design: DesignPlan, partitions: int, partitioner: str = "pipeline", update_cycles: int = 1,
            slot_period: int = 2) -> int:
    """Clock edges from the one taking the beat that completes a tuple to the one taking its match
    record, without stalls: framer 1, tuple register 1, predicate register 1, partitioner depth,
    record register 1, output FIFO 2, arbiter 1; with the two-cycle update, its cycle in the
    partitioner and a second record register; with the three-cycle update, its two cycles there, the
    second record register and a register stage after the framer (`front`)."""
    second = 1 if update_cycles >= 2 and keyed(design) else 0  # (without PARTITION BY, one cycle: see Top)
    front = 1 if update_cycles == 3 and keyed(design) else 0  # (the register stage after the framer)
    return 7 + partitioner_depth(design, partitions, partitioner, update_cycles, slot_period) + second + front


# The FIFOs a Top may store as two halves a word (``two_beat_fifos``): the spill FIFO (its tuples) and
# every query's FIFO of match records, in the order `cepc synth` takes them (the spill FIFO, of one tuple a
# word, is the narrower in the examples that need it: cepc.hw.sizing.fitting_fifos)
TWO_BEAT_FIFOS = ("spill", "records")


def check_top(design: DesignPlan, bus_width: int, partitions: int, partitioner: str, evict_after: int | None,
              decoder: bool, update_cycles: int, hazards: str, two_beat_fifos: tuple[str, ...] = (),
              slot_period: int = 2) -> None:
    """ValueError, saying why, for options a :class:`Top` of ``design`` cannot be built with."""
    check_options(bus_width, partitions, partitioner, evict_after)
    if set(two_beat_fifos) - set(TWO_BEAT_FIFOS):
        raise ValueError(f"FIFOs in two beats are among {', '.join(TWO_BEAT_FIFOS)}, not {', '.join(two_beat_fifos)}")
    if two_beat_fifos and not pipelined(design, partitioner):
        raise ValueError("FIFOs that store a word in two beats need a word every other cycle at most: Woods' "
                         "pipeline partitioner (--partitioner pipeline) and a query with PARTITION BY")
    if update_cycles not in (1, 2, 3):
        raise ValueError(f"a key's update takes 1, 2 or 3 cycles, not {update_cycles}")
    if update_cycles > 1 and partitioner != "table":
        raise ValueError(f"the {'two' if update_cycles == 2 else 'three'}-cycle update is the table partitioner's "
                         "(--partitioner table)")
    if slot_period not in (2, 3):
        raise ValueError(f"Woods' pipeline takes a tuple every 2 or 3 cycles, not every {slot_period}")
    if slot_period == 3 and not (pipelined(design, partitioner) and partitions == 1):
        raise ValueError("a tuple every three cycles is Woods' pipeline of one element's (--partitioner pipeline "
                         "--partitions 1, and a query with PARTITION BY)")
    if hazards not in HAZARDS:
        raise ValueError(f"--hazards is forward or stall, not {hazards!r}")
    if hazards == "stall" and partitioner != "table":
        raise ValueError("--hazards stall is the table partitioner's (--partitioner table)")
    if not decoder and any(q.dfa is not None for q in design.queries):
        raise ValueError("--no-decoder applies to the NFA; a DFA reads the shared decoder's predicate vector")
    if not design.queries:
        raise ValueError("the design has no query")


def registers(m: Module, en: Value, name: str):
    """``cut(v)``: a register of ``v`` (``name`` and a number), loaded while ``en``, each call one more."""
    made = []

    def cut(v: Value) -> Signal:
        reg = Signal(v.shape(), name=f"{name}{len(made)}", reset_less=True)
        made.append(reg)
        with m.If(en):
            m.d.sync += reg.eq(v)
        return reg
    return cut


class Top(wiring.Component):
    def __init__(self, design: DesignPlan, *, bus_width: int = 64, partitions: int = 16,
                 partitioner: str = "pipeline", evict_after: int | None = None, ways: int | None = None,
                 decoder: bool = True, update_cycles: int = 1, hazards: str = "forward",
                 two_beat_fifos: tuple[str, ...] = (), late_measures: bool = False, count_pulses: bool = False,
                 slot_period: int = 2):
        with refusing(self):
            check_top(design, bus_width, partitions, partitioner, evict_after, decoder, update_cycles, hazards,
                      tuple(two_beat_fifos), slot_period)
        # 3: Woods' pipeline of one element takes a tuple every three cycles, not two: its conditions
        # (the compares of the tuple with the state its key finds) take two cycles, their slices', then
        # their join, before the cycle that updates the state (a register stage before the partitioner)
        self.slot_period = slot_period
        # for the iCE40 (no LUT RAM: the FIFOs are block RAM's, a block per 16 bits of width), the spill
        # FIFO, the queries' FIFOs of records, or both (TWO_BEAT_FIFOS) store each word as two halves, in
        # half the blocks (cepc.hw.fifo.TwoBeatFifo), a cycle later: Woods' pipeline takes a tuple every
        # other cycle, so they are written every other cycle at most
        self.two_beat_fifos = tuple(k for k in TWO_BEAT_FIFOS if k in two_beat_fifos)
        # (Woods' pipeline, as `cepc synth` builds it) the queries whose records are written a cycle
        # later (two, at a tuple every three cycles), each measure that computes (finance5's
        # `time - FIRST(time)`) across those cycles: `late_queries`, `late_cycles`
        self.late_measures = late_measures
        # 2: the table's lookup and the update each have a cycle; a tuple whose key shares a bucket
        # with the tuple just before it waits a cycle (no effect without PARTITION BY)
        self.update_cycles = update_cycles if keyed(design) else 1
        # stall: a table forwards nothing, and a tuple waits while a key of its bucket is in flight
        # (no effect without PARTITION BY)
        self.hazards = hazards if keyed(design) else "forward"
        # False (--no-decoder): the NFA cores of queries without partial-match registers evaluate each
        # state's predicate themselves (Woods et al. Fig. 12); the others still use the decoder
        self.decoder = decoder
        self.evict_after = evict_after
        self.partitioner = partitioner
        self.ways = ways  # of a hashed table (default: TablePartitioner's)
        self.design = design
        self.bus_width = bus_width
        self.partitions = partitions
        self.tuple_layout = tuple_layout(design.tuple)
        self.record_layout = record_layout(design)
        self.record_width = padded(self.record_layout.size)
        self.tuple_width = design.tuple.nbytes * 8
        ports = {
            "s_tdata": In(bus_width), "s_tkeep": In(bus_width // 8), "s_tvalid": In(1), "s_tready": Out(1),
            "s_tlast": In(1),
            "m_tdata": Out(self.record_width), "m_tvalid": Out(1), "m_tready": In(1), "m_tlast": Out(1),
            "spill_tdata": Out(self.tuple_width), "spill_tvalid": Out(1), "spill_tready": In(1),
            "tuples_in": Out(COUNTER_WIDTH), "matches_out": Out(COUNTER_WIDTH),
            "dropped": Out(COUNTER_WIDTH), "malformed": Out(COUNTER_WIDTH), "evicted": Out(COUNTER_WIDTH),
            "overflow": Out(COUNTER_WIDTH),
        }
        # ``count_pulses``: also what each status counter counts, each cycle, as it counts it (a bit each,
        # evictions a count: several queries may evict in a cycle), packed in DESIGN_COUNTERS' order, for
        # a CounterBank (cepc.hw.counter) to keep the counts in RAM (the host link's, on the UP5K): the
        # counters themselves are then read by nothing, and synthesis leaves them out
        self.count_amounts = [len(design.queries) if name == "evicted" else 1 for name in COUNTERS] \
            if count_pulses else None
        if count_pulses:
            ports["count_pulses"] = Out(sum(a.bit_length() for a in self.count_amounts))
        super().__init__(ports)

    @property
    def pipelined(self) -> bool:
        return pipelined(self.design, self.partitioner)

    @property
    def stall_spacing(self) -> int:
        """With ``--hazards stall``: how many tuples before a tuple must not share its bucket
        (:func:`~cepc.hw.partition.table.stall_spacing`); a run of one key takes a tuple per this + 1 cycles."""
        return stall_spacing(self.update_cycles - 1)

    @property
    def late_queries(self) -> set[int]:
        """With ``late_measures``, behind Woods' pipeline: the queries with a measure that computes
        (:func:`~cepc.hw.nfa_core.computes`), whose records (outside a FIFO in two beats) are written
        :attr:`late_cycles` later, those measures computed across the cycles between (``Measures(late=…)``:
        a wide sum in slices, :func:`~cepc.hw.expr.select_sum` across one, :func:`~cepc.hw.expr.staged_sum`
        across two). The pipeline takes a tuple every ``slot_period`` cycles, so a record and the registers
        it is computed from hold through those cycles. (finance5 on the UP5K: its `time - FIRST(time)`, a
        65-bit carry chain, was the route from the match's registers into block RAM, 38.7 ns.)"""
        if not (self.late_measures and self.pipelined) or "records" in self.two_beat_fifos:
            return set()
        return {q.index for q in self.design.queries if any(computes(meas.expr) for meas in q.measures)}

    @property
    def late_cycles(self) -> int:
        """The cycles a record of :attr:`late_queries` is written later: one, or at a tuple every three
        cycles two (its measures' wide sums then in three slices, a cycle each: fewer logic cells than a
        carry-select adder across one cycle, finance5's 4,697 of the UP5K's 5,280 against 4,762)."""
        return (self.slot_period - 1) * bool(self.late_queries)

    @property
    def latency(self) -> int:
        return latency(self.design, self.partitions, self.partitioner, self.update_cycles, self.slot_period) + \
            (self.late_cycles or int("records" in self.two_beat_fifos))

    def elaborate(self, platform):
        m = Module()
        design, tup = self.design, self.design.tuple
        pulses = {}  # what each status counter counts, as it counts it (count_pulses)
        depth = partitioner_depth(design, self.partitions, self.partitioner, self.update_cycles, self.slot_period)
        # the two-cycle update: the tables' lookups at stage 4 are registered, and the cores update
        # at stage 5, from a register stage after the payload line (which reaches stage 4); the
        # three-cycle update: at stage 6, from two
        lag = self.update_cycles - 1
        late_queries = self.late_queries

        def output_fifo(width, kind):
            # The output FIFOs are 16 deep: off the iCE40, a write register beside LUT RAM read without
            # a clock (cepc.hw.fifo); the iCE40 has no LUT RAM, and block RAM holds them, read through a
            # register. Either way a record written can be read two cycles later. (`two_beat_fifos`: in
            # half the blocks, two halves a word, a cycle later.)
            if kind in self.two_beat_fifos:
                return TwoBeatFifo(width, OUTPUT_FIFO_DEPTH)
            if small_die(platform):
                return BlockRamFifo(width, OUTPUT_FIFO_DEPTH)
            return OutputFifo(width, OUTPUT_FIFO_DEPTH)

        # --- framing ------------------------------------------------------------------
        m.submodules.framer = framer = Framer(self.bus_width, tup.nbytes)
        m.d.comb += [
            framer.data.eq(self.s_tdata), framer.keep.eq(self.s_tkeep), framer.last.eq(self.s_tlast),
            framer.valid.eq(self.s_tvalid), self.s_tready.eq(framer.ready), self.malformed.eq(framer.malformed),
        ]

        en = Signal(init=1)  # the FIFOs are empty after reset
        en_next = Signal(init=1)  # what `en` will be after the next edge
        slot = Signal()
        accept = Signal()
        # (lag) the tuples at stages 2 and 3 share a bucket of some query's table: the one at stage 2
        # waits a cycle and stage 3 takes a bubble, so a key's update is written before the lookup of
        # the next tuple of its bucket (a register, decided as the tuple at stage 2 was taken).
        # (--hazards stall) so does the tuple at stage 2 while any of the keys within a table's spacing
        # ahead of it shares its bucket there: as many cycles as block RAM takes to have their writes.
        stall = self.hazards == "stall"
        holds = lag or stall
        # (the tables say whether a key within their spacing shares the bucket: --hazards stall's, and
        # the three-cycle update's, the two keys before)
        spaced = hold_spacing(lag, stall) is not None
        hold = Signal() if holds else None
        # (the three-cycle update: a register stage between the framer and stage 2, `front`, which takes
        # each table's bucket of the key as it takes the tuple, so whether to hold the tuple is decided
        # by compares of registers, not after the hash's tree of XORs: a tuple is held while its bucket
        # is either of the two keys' before it)
        fronted = lag == 2
        takes = en & slot & ~hold if holds else en & slot  # (stage 2 takes the tuple offered it)
        if fronted:
            front_valid = Signal()
            front = Signal(len(framer.tuples.payload), name="front", reset_less=True)
            m.d.comb += [framer.tuples.ready.eq(~front_valid | takes), accept.eq(front_valid & takes)]
            with m.If(framer.tuples.ready):
                m.d.sync += [front_valid.eq(framer.tuples.valid), front.eq(framer.tuples.payload)]
            offered = front
        else:
            m.d.comb += [framer.tuples.ready.eq(takes), accept.eq(framer.tuples.valid & framer.tuples.ready)]
            offered = framer.tuples.payload

        # `en` fans out to every stage: on a large die each part (the front end's data registers, the
        # payload and spill path, each query's partitioner and record) takes a copy of its own (kept
        # apart, as the table's beside its banks), so no one net reaches thousands of enables
        copied = set()

        def en_copy(name):
            if small_die(platform):
                return en
            while name in copied:  # (a query may be named `front`, or `a_terms` beside `a`)
                name += "_"
            copied.add(name)
            copy = m.submodules[f"{Replica.PREFIX}en_{name}"] = Replica(1, init=1)
            m.d.comb += [copy.d.eq(en_next), copy.en.eq(1)]
            return copy.q

        en_front = en_copy("front")  # the data registers of stages 2 and 3; `en` keeps the handshake

        # --- stage 2: tuple register -------------------------------------------------------
        a_valid = Signal()
        # (the data registers have no reset, only their valid flags: a reset reaches few flip-flops)
        a_tuple = Signal(self.tuple_layout, reset_less=True)
        a_raw = Signal(self.tuple_width, reset_less=True)
        f_tuple = Signal(self.tuple_layout)  # the framer's tuple (a register; `front`): the key two stages ahead
        m.d.comb += f_tuple.eq(offered[:self.tuple_layout.size])
        with m.If(en):
            m.d.sync += a_valid.eq(accept | hold if holds else accept)
        # (held: the tuple stays.) Behind Woods' pipeline, which takes a tuple every other cycle at most,
        # stage 2 takes only tuples and so holds each through the cycle after it (a slot takes none),
        # when stage 3 would have taken it: stage 3's tuple is stage 2's then, not a register of its own
        # (160 logic cells fewer for finance2 on the UP5K)
        a_load = en_front & ~hold if holds else accept if self.pipelined else en_front
        with m.If(a_load):
            m.d.sync += [a_raw.eq(offered), a_tuple.eq(f_tuple)]
        pulses["tuples_in"] = count_late(m, self.tuples_in, accept)

        # --- stage 3: predicate vector ---------------------------------------------------------
        decoded = [self.decoder or q.tracks_matches for q in design.queries]
        predicates = [p for q, d in zip(design.queries, decoded) if d for p in q.predicates]
        m.submodules.decoder = decoder = PredicateDecoder(self.tuple_layout, predicates)
        m.d.comb += decoder.tuple.eq(a_tuple)
        b_valid = Signal()
        if self.pipelined:  # (stage 2's registers hold the tuple a cycle more: above)
            b_tuple, b_raw, tuple_copies = a_tuple, a_raw, []
        else:
            b_tuple = Signal(self.tuple_layout, reset_less=True)
            b_raw = Signal(self.tuple_width, reset_less=True)
            tuple_copies = [b_tuple.eq(a_tuple), b_raw.eq(a_raw)]
        b_preds = Signal(len(decoder.preds), reset_less=True)
        with m.If(en_front):
            m.d.sync += [b_valid.eq(a_valid & ~hold if holds else a_valid), *tuple_copies, b_preds.eq(decoder.preds)]

        # payload beside the keys: raw tuple (for the spill stream), predicate vector
        # (its data registers take `en` from copies of their own, per stage and 64 bits, on a large die)
        # (with the table, partial-match cores with conditions look a tuple ahead: the one at stage 3)
        table = self.partitioner == "table" and keyed(design)
        # (and a table judges WITHIN's expiry a stage or two ahead: by the time of the tuple at stage 2,
        # which it registers for stage 3)
        looks_ahead = table and any(q.key_fields and (q.within is not None or q.tracks_matches and Conditions(q).width)
                                    for q in design.queries)
        # (with Woods' pipeline, a keyed partial-match core's conditions are computed a stage before the
        # partitioner's tail, for the tuple there, from the state its key will find at the tail
        # (`ahead_state`), and registered: the payload line ends a stage early, then a register stage)
        piped = {q.index for q in design.queries if self.partitioner == "pipeline" and pipeline_conditions(q)}
        # (a tuple every three cycles: two stages, the compares' slices, then their join)
        ahead = (self.slot_period - 1) * bool(piped)
        line_depth = depth - lag - ahead  # (lag: to the lookup, then a register stage)
        b_payload = Cat(b_raw, b_preds)
        assert len(b_payload) == payload_width(design, self.decoder)
        if line_depth:
            # (the tables take what their conditions read of the tuple at stage 1: TupleInputs)
            m.submodules.payload = payload = DelayLine(len(b_payload), line_depth, en_ahead=True,
                                                       ahead=3 if looks_ahead else False)
            en_payload = en_copy("payload")
            m.d.comb += [payload.en.eq(en_payload), payload.en_next.eq(en_next), payload.i_valid.eq(b_valid),
                         payload.i_data.eq(b_payload)]
            t_data, t_valid = payload.o_data, payload.o_valid  # the tuple as the cores update with it
        else:  # (a pipeline of one element: the tuple after stage 3's registers is a stage before its tail)
            payload, t_data, t_valid = None, b_payload, b_valid
            en_payload = en_copy("payload")
        t_data_before = t_data  # (the tuple a stage before the cores', at the lookup or after it)
        t_stages = [t_data]  # (the tuple at each register stage to the cores: the conditions' `ahead` before)
        # (behind Woods' pipeline, which takes a tuple every other cycle at most, the register stage
        # before the cores loads only tuples, and so holds each through the cycle after it, when its
        # record and any tuple it spills are written: they read it there, not registers of their own)
        tail_holds = self.pipelined and lag + ahead > 0
        for stage in range(5, 5 + lag + ahead):
            t_data_before = t_data
            data, valid = t_data, t_valid
            t_data = Signal(len(b_payload), name=f"payload{stage}", reset_less=True)
            t_valid = Signal(name=f"payload{stage}_valid")
            if tail_holds:
                with m.If(en_payload):
                    m.d.sync += t_valid.eq(valid)
                with m.If(en_payload & valid):
                    m.d.sync += t_data.eq(data)
            else:  # (one statement, as before tail_holds: a table design's Verilog stays as it was measured)
                with m.If(en_payload):
                    m.d.sync += [t_data.eq(data), t_valid.eq(valid)]
            t_stages.append(t_data)
        t_raw = t_data[:self.tuple_width]
        t_tuple = Signal(self.tuple_layout)
        m.d.comb += t_tuple.eq(t_raw[:self.tuple_layout.size])
        t_preds = t_data[self.tuple_width:self.tuple_width + len(b_preds)]
        # the arithmetic a looking-ahead partial-match core takes of a tuple alone (TupleTerms: finance5's
        # price * 1000, price * 1005 and time - 20000), computed beside the tuple's registers after the
        # decoder (b_tuple: each product's partial products before them, the sums after; the table's
        # stage 1) and carried beside it as the predicate vector is: no multiplier or subtractor in the
        # cycle that updates a key's state
        term_lines = {}
        for q, qname in zip(design.queries, hw_names(design)):
            # (the pipeline: the conditions computed a stage before its tail read the terms from a register
            # there, computed from the tuple at stage 2 beside stage 3's registers and carried beside the
            # tuple, and the core's candidates from one at the tail. On the iCE40 only the conditions take
            # them: the register of a sum or difference packs into its carry chain's logic cells, but one
            # more stage for the core took a logic cell a bit, and finance5 from 5,065 logic cells to
            # 5,168 of 5,280, which nextpnr could not place; there the core computes its own)
            carry = q.index in piped
            core_takes = not (carry and small_die(platform))
            terms = TupleTerms(q, self.tuple_layout) \
                if looks_ahead and q.tracks_matches and q.key_fields or carry else None
            if terms is None or not terms.width:
                continue
            if carry:
                # (on the iCE40, where only the conditions take them, inverted: each ordering's carry chain
                # takes a term's inverse as it is, with no logic cell in front of it, as it takes the
                # fields' (inverted_fields); where a term's own value is read, its inverter is in a LUT
                # that reads it anyway)
                # (a wide sum's low bits and their carry a stage early, from the framer's tuple: TupleTerms.split)
                b_terms = Signal(terms.width, name=f"{qname}_b_terms", reset_less=True)
                value = terms.split(m, f_tuple, a_tuple, a_load, qname)
                with m.If(en_front):
                    m.d.sync += b_terms.eq(value if core_takes else ~value)
            else:
                b_terms = Signal(terms.width, name=f"{qname}_b_terms")
                # (on a large die the products' operands from copies of their own, loaded as a_tuple is)
                # (on ECP5 each pair of the operands' slices a multiplier block of its own, whose input and
                # output registers are the copies and the partial product)
                m.d.comb += b_terms.eq(terms.staged(m, a_tuple, b_tuple, en_front, qname,
                                                    operands=None if small_die(platform) else (f_tuple, a_load),
                                                    blocks=uses_mult18(platform)))
            line, terms_now = None, b_terms
            if line_depth:  # (a pipeline of one element has none: the terms after stage 3 are a stage ahead)
                line = m.submodules[f"{qname}_terms"] = DelayLine(terms.width, line_depth, en_ahead=True,
                                                                  ahead=3 if looks_ahead else False)
                terms_now = line.o_data  # (the cores'; lag: a stage after the line, or two; ahead: one)
            en_terms = en_copy(f"{qname}_terms")
            if line is not None:
                m.d.comb += [line.en.eq(en_terms), line.en_next.eq(en_next), line.i_valid.eq(b_valid),
                             line.i_data.eq(b_terms)]
            terms_before = terms_ahead = terms_now  # (terms_ahead: the conditions', `ahead` stages before the tail)
            for stage in range(5, 5 + lag + ahead) if core_takes else ():
                terms_before, terms_now = terms_now, Signal(terms.width, name=f"{qname}_terms{stage}", reset_less=True)
                with m.If(en_terms):
                    m.d.sync += terms_now.eq(terms_before)
            term_lines[q.index] = (terms, line, terms_now if core_takes else None, terms_before, terms_ahead)
        tuple3 = None
        if looks_ahead:
            tuple3 = Signal(self.tuple_layout)
            m.d.comb += tuple3.eq(payload.o_ahead[:self.tuple_layout.size])
        # seq: the tuples that left the delay line before this one, the same count as those accepted
        # before it (every tuple passes the line, in order), counted where the records are made, not
        # carried beside each tuple: 48 flip-flops fewer per stage of the line (network's table on the
        # UP5K: 192, and 5,144 logic cells became 4,886). (The counter's enables take a copy of `en` of
        # their own.)
        t_seq = Signal(SEQ_WIDTH)
        leaving = Signal()
        en_seq = en_copy("seq")
        m.d.comb += leaving.eq(en_seq & t_valid)
        if self.pipelined:
            # (behind Woods' pipeline tuples leave two cycles apart at least: each is counted the cycle
            # after, from a register, off the path from `en` into the counter's enables (mshape on the
            # UP5K: 20.07 ns, 6.13 of it the route into them))
            left = Signal(name="left")
            m.d.sync += left.eq(leaving)
            leaving = left
        increment(m, t_seq, leaving)

        # --- per query: partitioner, NFA core, then a register stage into the output FIFO ---------
        levels = []  # fill levels of every output FIFO, for the stall logic
        drops = []
        evictions = []
        slots = []
        outputs = []
        overflows = []
        pred_base = 0
        conflicts, conflicts_held = [], []  # (stall) per table: a key within its spacing shares the bucket
        adjacents = []  # (lag) per table: the key taken into stage 2 shares the bucket of stage 2's
        def inverted_fields(qname, core, known):
            """(the pipeline's conditions, on the iCE40) the fields they read of the tuple a stage before
            the tail, inverted, in registers beside it: each ordering's carry chain takes them as they are,
            with no logic cell in front of it (cepc.hw.expr.ordered)"""
            if not small_die(platform):
                return None
            names = core.conditions.fields_read(tuple(known or ()))
            inverse = Cat(*(~field(a_tuple, name).as_unsigned() for name in names))
            inverted = Signal(len(inverse), name=f"{qname}_inverted", reset_less=True)
            with m.If(en_front):
                m.d.sync += inverted.eq(inverse)
            if line_depth:
                line = m.submodules[f"{qname}_inverted"] = DelayLine(len(inverse), line_depth)
                m.d.comb += [line.en.eq(en_payload), line.i_valid.eq(b_valid), line.i_data.eq(inverted)]
                inverted = line.o_data
            out, lo = {}, 0
            for name in names:
                width = len(field(a_tuple, name))
                out[name], lo = inverted[lo:lo + width], lo + width
            return out

        for q, qname, uses_decoder in zip(design.queries, hw_names(design), decoded):
            n_preds = len(q.predicates)
            n_states = q.vector_width  # the bits that are zero for a fresh partition
            width = q.state_width
            # the tuple's terms, carried beside it (and a stage before the cores')
            _, line, terms_now, terms_before, terms_ahead = term_lines.get(q.index, (None,) * 5)
            # (its terms come beside the tuple, computed before: to the core, or only to the conditions)
            carried = terms_now is not None
            if q.tracks_matches:
                # (lag: the table computes the conditions of every state it may pick, for the tuple
                # at the lookup; else the core those of its next state, for the tuple behind)
                # (lag, on a large die: its candidates' updates read copies of the tuple's fields and
                # terms, one per state they extend, registered from the stage before: TupleInputs)
                inputs = TupleInputs.for_updates(q, self.tuple_layout, carried) \
                    if lag and q.key_fields and not small_die(platform) else None
                # (the three-cycle update: the table computes the conditions once, every MIN's and MAX's
                # compare among them)
                # (the pipeline: its conditions computed once, from `ahead_state`, every MIN's and MAX's compare
                # among them, as with the three-cycle update)
                core = PartialMatchCore(q, self.tuple_layout, lookahead=bool(q.key_fields) and looks_ahead and not lag,
                                        given_cond=bool(q.key_fields) and looks_ahead or q.index in piped,
                                        carried_terms=carried, update_inputs=inputs,
                                        every_beat=lag == 2 or q.index in piped)
                m.d.comb += core.tuple.eq(t_tuple)
                if inputs is not None:
                    tuple4 = Signal(self.tuple_layout, name=f"{qname}_tuple{3 + lag}")
                    m.d.comb += tuple4.eq(t_data_before[:self.tuple_layout.size])
                    copies = []
                    for g in range(q.nfa.n_states + 1):
                        name = f"{qname}_update{g}"
                        copy = m.submodules[f"{Replica.PREFIX}{name}"] = Replica(inputs.width)
                        m.d.comb += [copy.d.eq(inputs.pack(tuple4, terms_before if carried else None)),
                                     copy.en.eq(en_copy(name))]
                        copies.append(copy.q)
                    m.d.comb += core.inputs.eq(Cat(*copies))
                if core.lookahead:
                    m.d.comb += core.next_tuple.eq(tuple3)
                if core.carried_terms:
                    m.d.comb += core.terms.eq(terms_now)
                    if core.lookahead:
                        m.d.comb += core.next_terms.eq(line.o_ahead)
            elif q.dfa is not None:
                core = DfaCore(q, n_preds)
            elif uses_decoder:
                core = NfaCore(q.nfa, n_preds, q.skip)
            else:
                core = NfaCore(q.nfa, n_preds, q.skip, predicates=q.predicates, tuple_layout=self.tuple_layout)
                m.d.comb += core.tuple.eq(t_tuple)
            en_q = en_copy(qname)
            if q.key_fields:
                kw = key_width(tup, q)
                expiry = None
                if q.within is not None:  # exact eviction: see PipelinePartitioner
                    expiry, window = within_expiry(q, tup)
                if self.partitioner == "table":
                    inputs = TupleInputs.for_conditions(q, self.tuple_layout, carried, every_beat=lag == 2) \
                        if q.tracks_matches else None
                    part = table_partitioner(q, tup, self.partitions, self.ways, self.evict_after,
                                             core if q.tracks_matches else None, inputs, lag=lag, stall=stall)
                    if part.cond_width:  # the tuple at stage 1 (the table registers its copies)
                        tuple1 = Signal(self.tuple_layout, name=f"{qname}_tuple1")
                        m.d.comb += [tuple1.eq(payload.o_ahead3[:self.tuple_layout.size]),
                                     part.cond_in.eq(inputs.pack(tuple1, line.o_ahead3 if line else None))]
                    if part.cond_width:
                        m.d.comb += core.cond.eq(part.out_cond)
                        if not lag:
                            m.d.comb += part.next_cond.eq(core.next_cond)
                    if holds:
                        adjacents.append(part.adjacent)
                        m.d.comb += part.hold.eq(hold)
                    if spaced:
                        conflicts.append(part.conflict)
                        conflicts_held.append(part.conflict_held)
                    if part.given_index:  # (its bucket, hashed as `front` takes the framer's tuple)
                        framed = Signal(self.tuple_layout, name=f"{qname}_framed")
                        next_index = Signal(len(part.next_index), name=f"{qname}_next_index", reset_less=True)
                        m.d.comb += [framed.eq(framer.tuples.payload[:self.tuple_layout.size]),
                                     part.next_index.eq(next_index)]
                        with m.If(framer.tuples.ready):
                            m.d.sync += next_index.eq(part.bucket_of(Cat(*(field(framed, k) for k in q.key_fields))))
                    elif part.early_key:  # the key two stages behind (the framer's), hashed into registers
                        m.d.comb += part.next_key.eq(Cat(*(field(f_tuple, k) for k in q.key_fields)))
                    m.d.comb += part.en_next.eq(en_next)
                else:
                    # (the key is stage 2's, which holds each tuple through the cycle before its injection)
                    # (a tuple every three cycles: one element, a register stage before it)
                    part = PipelinePartitioner(self.partitions, kw, width, self.evict_after, vector_width=n_states,
                                               expiry_width=expiry, key_ahead=True, period=self.slot_period)
                key = Cat(*(field(b_tuple, k) for k in q.key_fields))
                if expiry:
                    # expiries compare unsigned: a signed time is biased (its sign bit flipped keeps
                    # its order across zero)
                    def unsigned_time(tuple_, name=q.time_field):
                        time = field(tuple_, name)
                        return time.as_unsigned() ^ (1 << (len(time) - 1)) if time.shape().signed else time
                    if self.partitioner == "table":  # judged at the key's own bucket, by its own time,
                        # a stage ahead (two, for the older writes): the time of the tuple at stage 2,
                        # what the one at stage 3 will be after the next enabled edge. The table carries
                        # it beside the key and adds the window itself.
                        tuple2 = Signal(self.tuple_layout, name=f"{qname}_tuple2")
                        m.d.comb += [tuple2.eq(payload.o_ahead2[:self.tuple_layout.size]),
                                     part.now2.eq(unsigned_time(tuple2))]
                    else:  # judged all along the chain: by the latest time the tail has taken
                        time = unsigned_time(t_tuple)
                        now = Signal(expiry, name=f"{qname}_now")
                        with m.If(en_q & t_valid):
                            m.d.sync += now.eq(time)
                        m.d.comb += [part.now.eq(now), part.next_expiry.eq(time + window)]
                if q.index in piped:  # the conditions of the state the tuple a stage before the tail finds there
                    # (a tuple every three cycles: two stages before, its compares' slices registered, then
                    # their join; the element's state and the tuple hold through both cycles, as no tuple
                    # is at the tail between)
                    before = Signal(self.tuple_layout, name=f"{qname}_tuple_ahead")
                    cond = Signal(core.conditions.width, name=f"{qname}_cond", reset_less=True)
                    m.d.comb += [before.eq(t_stages[0][:self.tuple_layout.size]), core.cond.eq(cond)]
                    known = term_lines[q.index][0].unpack(terms_ahead) if q.index in term_lines else None
                    inverse = inverted_fields(qname, core, known)
                    if known is not None and inverse is not None:  # (the iCE40's terms are inverted: above)
                        inverse |= known
                        known = term_lines[q.index][0].unpack(~terms_ahead)
                    # (a tuple every three cycles: in shorter slices, as their join has a cycle)
                    three = self.slot_period == 3
                    cut, chunk = (registers(m, en_q, f"{qname}_slice"), CUT_CARRY) if three else (None, COMPARE_CARRY)
                    joined = core.conditions.of(part.ahead_state, before, known, inverse=inverse,
                                                chained=inverse is not None, cut=cut, chunk=chunk)
                    with m.If(en_q):
                        m.d.sync += cond.eq(joined)
            else:
                part = SinglePartition(depth, width, vector_width=n_states)
                key = 0
            m.submodules[f"{qname}_partitioner"] = part
            m.submodules[f"{qname}_nfa"] = core
            inject = b_valid
            if self.slot_period == 3 and q.key_fields:  # (the register stage before the element)
                inject = Signal(name=f"{qname}_inject")
                with m.If(en_q):
                    m.d.sync += inject.eq(b_valid)
            m.d.comb += [part.en.eq(en_q), part.inject.eq(inject), part.key.eq(key)]
            slots.append(part.slot)
            evictions.append(part.evicted)
            m.d.comb += [core.state.eq(part.out_state), part.next_state.eq(core.next)]
            if uses_decoder:
                m.d.comb += core.preds.eq(t_preds[pred_base:pred_base + max(n_preds, 1)] if n_preds else 0)
                pred_base += n_preds
            if q.tracks_matches:
                overflows.append(part.out_valid & core.overflow)

            # stage 5: the record is registered, then written into the FIFO the next cycle. The
            # measures are computed after that register, from the match's registers and its tuple
            # (off the partial-match update's path).
            # The decision to write it is registered in parts, each from its own side: the tuple
            # (`live`), the partitioner's lookup (`homeless`: no entry and none free), the NFA core
            # (`active`: a partial match to keep; `matched`). They are joined after the registers:
            # joined before, the lookup's ways, the core and the FIFO's write enable were one path.
            # A tuple whose partial match has no place is dropped (spilled), and its record with it.
            # A partitioner that places every key (direct-indexed, or a single partition) never drops.
            live = Signal(name=f"{qname}_live")
            matched = Signal(name=f"{qname}_matched")
            m.d.sync += [live.eq(en_q & part.out_valid), matched.eq(core.match)]
            record_valid = Signal(name=f"{qname}_record_valid")
            if part.places_every_key:
                m.d.comb += record_valid.eq(live & matched)
            else:
                homeless = Signal(name=f"{qname}_homeless")
                active = Signal(name=f"{qname}_active")
                m.d.sync += [homeless.eq(~part.out_hit & ~part.out_free), active.eq(core.next[:n_states].any())]
                drops.append(homeless & active)
                m.d.comb += record_valid.eq(live & matched & ~(homeless & active))
            # (two_beat_fifos: loaded only with a tuple, so a record stays as it was written through the
            # empty slot after it, and its FIFO writes the high half from it then: TwoBeatFifo)
            # (late: so too with its measures registered, and the record written, a cycle later)
            late = q.index in late_queries
            en_record = en_q & part.out_valid if "records" in self.two_beat_fifos or late else en_q
            record = Signal(self.record_layout, name=f"{qname}_record", reset_less=True)
            with m.If(en_record):
                m.d.sync += [record.key.eq(part.out_key), record.seq.eq(t_seq), record.query.eq(q.index)]
            if q.measures:
                # the match's last tuple, through the cycle after the tail, when its record is written
                # (late, or a record in two beats: through the one after that too, when the next tuple
                # may be at the tail)
                if tail_holds and not late and "records" not in self.two_beat_fifos:
                    last = t_tuple
                else:
                    last = Signal(self.tuple_layout, name=f"{qname}_last", reset_less=True)
                    with m.If(en_record):
                        m.d.sync += last.eq(t_tuple)
                if isinstance(part, TablePartitioner):
                    # The match's registers are its accepting state's in the core's next state, which
                    # the table registers as its newest write on the same edge: taken from there (and
                    # picked by the accepting state, registered, where there are several), not from a
                    # register of their own after the core's update (mshape's critical path at
                    # 42d4237: the core's state through MAX(price)'s compare into that register)
                    slices = [packed_registers(q, part.last_write, s)
                              for s in range(q.nfa.n_states) if q.nfa.accept[s]]
                    ends = slices[0]
                    if len(slices) > 1:
                        ends_at = Signal(len(slices), name=f"{qname}_ends_at", reset_less=True)
                        with m.If(en_q):
                            m.d.sync += ends_at.eq(core.ends_at)
                        ends = pick(list(ends_at), slices, q.register_width)
                else:
                    ends = Signal(q.register_width, name=f"{qname}_ends", reset_less=True)
                    with m.If(en_record):
                        m.d.sync += ends.eq(core.ends)
                # (late: the measures that compute a cycle later, from registers: `ends` and `last`
                # hold through that cycle)
                # (late, on the iCE40: the tuple inverted too, for a difference's carry chains to take as
                # they are: Measures)
                inverse = late and small_die(platform)
                measures = Measures(q, self.tuple_layout, late=self.late_cycles if late else 0, inverse=inverse)
                m.submodules[f"{qname}_measures"] = measures
                m.d.comb += [measures.ends.eq(ends), measures.tuple.eq(last)]
                if inverse:
                    last_inverse = Signal(self.tuple_layout, name=f"{qname}_last_inverse", reset_less=True)
                    with m.If(en_record):
                        m.d.sync += last_inverse.eq(~t_tuple.as_value())
                    m.d.comb += measures.inverse_tuple.eq(last_inverse)
                written = Signal(self.record_layout, name=f"{qname}_written")
                m.d.comb += [written.eq(record), written.measures.eq(measures.measures)]
                record = written
            for i in range(self.late_cycles if late else 0):
                late_valid = Signal(name=f"{qname}_record_late_valid" + (f"{i + 1}" if i else ""))
                m.d.sync += late_valid.eq(record_valid)
                record_valid = late_valid
            if lag:
                # (the two-cycle update, for its faster clock: the record and its measures are
                # registered once more, so the registers taking the core's end values (`ends`: the
                # compare of a MAX, the sum of a SUM) can sit by the core, not by the FIFO)
                staged = Signal(self.record_layout, name=f"{qname}_record6", reset_less=True)
                staged_valid = Signal(name=f"{qname}_record6_valid")
                m.d.sync += [staged.eq(record), staged_valid.eq(record_valid)]
                record, record_valid = staged, staged_valid
            fifo = output_fifo(self.record_layout.size, "records")
            m.submodules[f"{qname}_matches"] = fifo
            m.d.comb += [fifo.w_data.eq(record), fifo.w_en.eq(record_valid)]
            levels.append(fifo.w_level)
            outputs.append(fifo)

        # --- spill stream: tuples some query could not place ------------------------------------
        # (none, where every query's partitioner places every key: then there is no spill FIFO)
        if drops:
            spill = output_fifo(self.tuple_width, "spill")
            m.submodules.spill = spill
            spill_valid = Signal()
            spilling = Signal()  # a tuple left the partitioners last cycle (its drop decision's parts are registered)
            m.d.sync += spilling.eq(en_payload & t_valid)
            m.d.comb += spill_valid.eq(spilling & Cat(*drops).any())
            if tail_holds and "spill" not in self.two_beat_fifos:  # (the tuple holds: as a record's `last`)
                spill_data = t_raw
            else:
                spill_data = Signal(self.tuple_width, reset_less=True)
                with m.If(en_payload & t_valid if "spill" in self.two_beat_fifos else en_payload):  # (as a record is)
                    m.d.sync += spill_data.eq(t_raw)
            m.d.comb += [
                spill.w_data.eq(spill_data), spill.w_en.eq(spill_valid),
                self.spill_tdata.eq(spill.r_data), self.spill_tvalid.eq(spill.r_rdy),
                spill.r_en.eq(self.spill_tready),
            ]
            levels.append(spill.w_level)
            pulses["dropped"] = count_late(m, self.dropped, spill_valid)  # (two cycles after it is written, like the other status counters)

        # The pipeline advances while every FIFO has room. `en` is registered twice (it fans out to
        # every stage; `en_next`, the first register, feeds the copies a table keeps beside each bank
        # of block RAM), so it lags the fill levels by two cycles: keep room for the writes in flight.
        # (lag: a record stage more, one write more in flight)
        # (late_queries: a record stage more, one write more in flight; two at a tuple every three cycles)
        margin = stall_margin(self.update_cycles) + self.late_cycles
        room = Cat(*(level <= OUTPUT_FIFO_DEPTH - margin for level in levels)).all()
        m.d.sync += [en_next.eq(room), en.eq(en_next)]
        m.d.comb += slot.eq(Cat(*slots).all())
        if holds:
            # the tuple taken into stage 2 now against the one there, which moves on to stage 3 (and,
            # stall, the keys in flight ahead of that); a held tuple against the keys in flight (a
            # bubble follows it into stage 3)
            held = Cat(*conflicts_held).any() if spaced else Const(0)
            taken = accept & (a_valid & Cat(*adjacents).any() | (Cat(*conflicts).any() if spaced else Const(0)))
            with m.If(en):
                m.d.sync += hold.eq(Mux(hold, held, taken))
        # several queries may evict in one cycle: add them all
        evicting = sum(evictions[1:], evictions[0])
        add(m, self.evicted, evicting)
        # a tuple at which some query dropped a partial match at --max-match-length
        if overflows:
            pulses["overflow"] = count_late(m, self.overflow, en_payload & Cat(*overflows).any())

        # --- output: round-robin over the queries' FIFOs ---------------------------------------------
        m.submodules.arbiter = arbiter = RoundRobin(len(outputs), registered=not small_die(platform))
        m.d.comb += [arbiter.ready.eq(Cat(*(f.r_rdy for f in outputs))), arbiter.take.eq(self.m_tready)]
        if arbiter.registered:
            m.d.comb += arbiter.ready_next.eq(Cat(*(f.r_rdy_next for f in outputs)))
        data = outputs[0].r_data
        for i in range(1, len(outputs)):
            data = Mux(arbiter.chosen == i, outputs[i].r_data, data)
        m.d.comb += [self.m_tvalid.eq(arbiter.valid), self.m_tdata.eq(data), self.m_tlast.eq(1)]
        for i, f in enumerate(outputs):
            m.d.comb += f.r_en.eq(self.m_tready & (arbiter.chosen == i))
        pulses["matches_out"] = count_late(m, self.matches_out, self.m_tvalid & self.m_tready)
        if self.count_amounts is not None:
            evicted = Signal(range(len(evictions) + 1), name="evicted_pulse")  # (registered, as the others are)
            m.d.sync += evicted.eq(evicting)
            pulses.update(malformed=framer.malformed_pulse, evicted=evicted)
            # (a counter that counts nothing in this design, `overflow` without a --max-match-length: zero)
            m.d.comb += self.count_pulses.eq(Cat(*(Value.cast(pulses[name]).as_unsigned()[:a.bit_length()]
                                                   if name in pulses else Const(0, a.bit_length())
                                                   for name, a in zip(COUNTERS, self.count_amounts))))
        return m

