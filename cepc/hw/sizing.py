"""Choosing the partitioner and its size for a device (``cepc compile --partitioner auto``).

The table partitioner keeps partition state in block RAM and takes a tuple
every cycle; it is the default wherever its table fits. Direct indexing (the
key is the address) needs no tag and never drops a tuple, so it is chosen
when 2^key bits entries fit the device's block RAM budget; otherwise the
table is hashed, as large as the budget allows. Woods' pipeline partitioner
(flip-flops only, a tuple every other cycle) is the fallback when not even a
small table fits.

The budget is half the device's block RAM, and never more than what the rest of
the design leaves (:func:`reserved_blocks`): on a device without distributed RAM
(iCE40) the output FIFOs and the host link's receive buffer take block RAM too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan import DesignPlan, QueryPlan
from .devices import DEFAULT_DEVICE, DEVICES, Device  # noqa: F401 - re-exported
from .ecp5 import dp16kd_blocks
from .layouts import key_width, record_layout
from .partition.table import DEFAULT_WAYS, STAMP_BITS, bank_depth_of, stored_columns, tag_width_of
from .top import OUTPUT_FIFO_DEPTH as FIFO_DEPTH
from .top import TWO_BEAT_FIFOS, keyed
from .top import payload_width as payload_bits

BUDGET = 0.5  # share of the device's block RAM the partition tables may take
MIN_TABLE = 64  # below this many entries the pipeline partitioner serves as well
PIPELINE_DEFAULT = 16  # the pipeline partitioner's default length
# the pipeline's length when its delay line cannot be memory: registers then (at most
# cepc.hw.delay.REGISTER_STAGES), a payload's worth of flip-flops per stage (network on the UP5K,
# 204 bits a stage, fits with 2 and not with 4: 103 % of its logic cells)
REGISTER_PIPELINE = 2
# The pipeline's elements (each a key and a state, in flip-flops) take at most this share of a device's
# flip-flops. An element's bit costs about three of the UP5K's logic cells (its flip-flop, the swap's
# multiplexer, the compares): finance0's 659-bit element took 1,870 of them (6,929 with two elements, 5,059
# with one) and mshape's 1,094-bit one 3,677 (8,900 and 5,223). So on the UP5K each of them, finance5 and
# finance2 get one element (finance0's design then takes 4,567 logic cells, finance5's 5,117; finance2's
# 7,411 do not fit).
ELEMENT_SHARE = 1 / 6


def entry_bits(design: DesignPlan, q: QueryPlan, buckets: int | None, within: bool, evict: bool) -> int:
    """An entry's bits in a table of ``buckets`` (None: direct-indexed, no tag), as TablePartitioner
    lays it out: the state, the tag (the key's bits outside the hash's pivots), the expiry, the stamp."""
    state = q.state_width
    time = design.tuple.field(q.time_field).width + 1 if within and q.within is not None else 0
    tag = 0 if buckets is None else tag_width_of(key_width(design.tuple, q), buckets)
    return state + tag + time + (STAMP_BITS if evict else 0)


@dataclass(frozen=True)
class Reserved:
    """Block RAM the design takes besides its partition tables."""

    fifos: int  # the output FIFOs: one per query (its match records) and the spill FIFO (tuples)
    buffer: int  # the host link's receive buffer (board tops only)
    two_beat: tuple[str, ...] = ()  # the FIFOs that store a word as two halves (cepc.hw.top.TWO_BEAT_FIFOS)

    @property
    def blocks(self) -> int:
        return self.fifos + self.buffer


def reserved_blocks(design: DesignPlan, device: Device, buffer_bytes: int = 0,
                    two_beat: tuple[str, ...] = ()) -> Reserved:
    """The block RAM ``design`` takes outside its tables on ``device``, with a host link buffer of
    ``buffer_bytes`` (0: the design alone). Shallow FIFOs take none where the device has LUT RAM.
    ``two_beat``: the FIFOs ("spill", "records": Top's ``two_beat_fifos``) whose words are stored as two
    halves (behind the pipeline partitioner), twice as many words half as wide."""
    fifos = 0
    if not device.lut_ram:
        def blocks(width, kind):
            if kind in two_beat:
                return device.blocks_for(2 * FIFO_DEPTH, (width + 1) // 2)
            return device.blocks_for(FIFO_DEPTH, width)
        fifos = len(design.queries) * blocks(record_layout(design).size, "records") + \
            blocks(design.tuple.nbytes * 8, "spill")
    return Reserved(fifos, device.blocks_for(buffer_bytes, 8) if buffer_bytes else 0,
                    () if device.lut_ram else tuple(k for k in TWO_BEAT_FIFOS if k in two_beat))


def fitting_fifos(design: DesignPlan, device: Device, buffer_bytes: int, partitioner: str) -> Reserved | None:
    """The FIFOs and buffer ``design`` takes on ``device``: as full words where they fit its block RAM,
    else (behind the pipeline partitioner: ``partitioner`` auto or pipeline, a query with PARTITION BY)
    with the fewest FIFOs, the narrower first, storing a word as two halves that make them fit (each
    such FIFO takes flip-flops for a half word and a multiplexer into block RAM); None if none do."""
    full = reserved_blocks(design, device, buffer_bytes)
    if full.blocks <= device.blocks:
        return full
    if partitioner == "table" or not keyed(design):
        return None
    for n in range(1, len(TWO_BEAT_FIFOS) + 1):
        halved = reserved_blocks(design, device, buffer_bytes, TWO_BEAT_FIFOS[:n])
        if halved.blocks <= device.blocks:
            return halved
    return None


def ring_blocks(design: DesignPlan, device: Device) -> int:
    """Block RAM the default pipeline's delay line takes: a ring of ``length - 1`` payloads, in block
    RAM only where the device has no LUT RAM."""
    return 0 if device.lut_ram else device.blocks_for(PIPELINE_DEFAULT - 1, payload_bits(design))


def element_bits(design: DesignPlan) -> int:
    """The flip-flops of one element of every keyed query's pipeline: its key and its state."""
    return sum(key_width(design.tuple, q) + q.state_width for q in design.queries if q.key_fields)


def pipeline_length(design: DesignPlan, device: Device, reserved: Reserved) -> int:
    """The pipeline partitioner's length where its delay line fits beside ``reserved``: the default,
    unless its ring would take block RAM the device has not got; then a short line of registers
    (REGISTER_PIPELINE). At most as many elements as take ELEMENT_SHARE of the device's flip-flops (at
    least one)."""
    length = PIPELINE_DEFAULT if ring_blocks(design, device) <= device.blocks - reserved.blocks else REGISTER_PIPELINE
    return min(length, elements_fitting(design, device))


def elements_fitting(design: DesignPlan, device: Device) -> int:
    """How many pipeline elements take at most ELEMENT_SHARE of ``device``'s flip-flops (at least one;
    PIPELINE_DEFAULT where the device's are not known)."""
    if not device.ffs:
        return PIPELINE_DEFAULT
    return max(1, int(device.ffs * ELEMENT_SHARE) // max(1, element_bits(design)))


@dataclass(frozen=True)
class TablePlan:
    query: str
    direct: bool
    entries: int
    ways: int
    entry_bits: int
    blocks: int


def table_plan(design: DesignPlan, q: QueryPlan, entries: int, device: Device, evict: bool = False,
               ways: int = DEFAULT_WAYS) -> TablePlan:
    """The table a query gets for ``entries`` partitions (rounded as the hardware rounds them)."""
    kw = key_width(design.tuple, q)
    direct = (1 << kw) <= entries
    if direct:
        entries, ways = 1 << kw, 1
    else:
        entries = ways * max(2, 1 << (-(-entries // ways) - 1).bit_length())
    buckets = entries // ways
    bits = entry_bits(design, q, None if direct else buckets, True, evict)
    # one memory per way and column, as TablePartitioner stores it (the entry and its in-use bit): on
    # ECP5, DP16KDs instantiated in banks BANK_DEPTH deep (the widest shape deep enough for a shallower
    # table); elsewhere inferred, in the best shape
    if device.block == "DP16KD":
        bank = bank_depth_of(buckets)
        blocks = ways * (buckets // bank) * sum(dp16kd_blocks(hi - lo, bank) for lo, hi in stored_columns(bits))
    else:
        blocks = ways * sum(device.blocks_for(buckets, hi - lo) for lo, hi in stored_columns(bits))
    return TablePlan(q.name, direct, entries, ways, bits, blocks)


@dataclass(frozen=True)
class Choice:
    partitioner: str
    partitions: int
    tables: tuple[TablePlan, ...]
    reason: str
    ways: int = DEFAULT_WAYS  # of hashed tables
    two_beat_fifos: tuple[str, ...] = ()  # (the pipeline's) FIFOs that store a word as two halves (Reserved.two_beat)


def two_beat_note(kinds: tuple[str, ...]) -> str:
    """The reason's note on the FIFOs that store a word as two halves (Choice.two_beat_fifos)."""
    if not kinds:
        return ""
    names = {"spill": "the spill FIFO", "records": "the FIFOs of match records"}
    verb = "stores" if len(kinds) == 1 else "store"
    return f"; {' and '.join(names[k] for k in kinds)} {verb} a word as two halves, in half the block RAM"


WAYS = (4, 2, 1)  # --ways: entries per bucket of a hashed table


def choose(design: DesignPlan, device: Device, partitioner: str = "auto", partitions: int | None = None,
           evict: bool = False, reserved: Reserved | None = None, ways: int | None = None) -> Choice:
    """The partitioner and partition count for ``design`` on ``device``; ``partitioner``,
    ``partitions`` and a hashed table's ``ways`` are the user's (``auto``/None: choose). The tables get
    half the device's block RAM, at most what ``reserved`` (default: :func:`reserved_blocks` of the
    design alone) leaves."""
    if ways is not None and ways not in WAYS:
        raise ValueError(f"--ways is 4, 2 or 1, not {ways}")
    keyed = [q for q in design.queries if q.key_fields]
    if not keyed:
        return Choice(partitioner if partitioner != "auto" else "table", partitions or 1, (),
                      "no query has PARTITION BY: one partition per query")
    two_beat = reserved.two_beat if reserved is not None else ()
    if two_beat and partitioner == "table":
        raise ValueError("the output FIFOs fit block RAM only as two halves a word, behind the pipeline "
                         "partitioner; not with --partitioner table")
    if partitioner == "pipeline":
        if ways is not None:
            raise ValueError("--ways is the table partitioner's (--partitioner table)")
        return Choice("pipeline", partitions or PIPELINE_DEFAULT, (), "as asked" + two_beat_note(two_beat),
                      two_beat_fifos=two_beat)
    if two_beat:  # (a table takes a tuple a cycle, and its FIFOs a word a cycle: full words, which do not fit)
        if partitions is not None:
            return Choice("pipeline", partitions, (), "as asked" + two_beat_note(two_beat), two_beat_fifos=two_beat)
        return fallback(design, device, reserved, f"the output FIFOs fit {device.name}'s block RAM only as two "
                                                  f"halves a word, which a table's tuple a cycle cannot write")
    reserved = reserved or reserved_blocks(design, device)
    half = int(device.blocks * BUDGET)
    budget = min(half, device.blocks - reserved.blocks)
    share = (f"half of {device.name}'s {device.block}s" if budget == half else
             f"the {budget} of {device.name}'s {device.blocks} {device.block}s the output FIFOs"
             f"{' and the host link' if reserved.buffer else ''} leave")
    if partitions is not None:
        tables = tuple(table_plan(design, q, partitions, device, evict, ways or DEFAULT_WAYS) for q in keyed)
        return Choice("table", partitions, tables, "as asked", ways or DEFAULT_WAYS)
    # the largest count every keyed query's table fits, sharing the budget; wide entries make
    # shallow, wide tables, which block RAM holds badly: fewer ways then fit more partitions
    widest = max(key_width(design.tuple, q) for q in keyed)
    n = 1 << min(widest, 24)
    while n >= MIN_TABLE:
        for w in (ways,) if ways else WAYS:
            tables = tuple(table_plan(design, q, n, device, evict, w) for q in keyed)
            if sum(t.blocks for t in tables) <= budget:
                return Choice("table", n, tables, f"the largest that fits {share}", w)
        n //= 2
    if partitioner == "table":
        tables = tuple(table_plan(design, q, MIN_TABLE, device, evict, ways or DEFAULT_WAYS) for q in keyed)
        return Choice("table", MIN_TABLE, tables, f"does not fit {share}", ways or DEFAULT_WAYS)
    return fallback(design, device, reserved, f"not even a {MIN_TABLE}-entry table fits {share}")


def fallback(design: DesignPlan, device: Device, reserved: Reserved, why: str) -> Choice:
    """Woods' pipeline, where no table serves (``why``): its default length, or a short line of
    registers where its delay line would take block RAM the device has not got."""
    length = pipeline_length(design, device, reserved)
    if length == elements_fitting(design, device) < PIPELINE_DEFAULT:
        why += (f"; {length} partition{'s' if length > 1 else ''} of {element_bits(design):,} flip-flops: "
                f"{ELEMENT_SHARE:.0%} of {device.name}'s {device.ffs:,} at most")
    elif length != PIPELINE_DEFAULT:
        why += (f"; its delay line in registers: a longer one would take {ring_blocks(design, device)} "
                f"{device.block}s of {payload_bits(design)}-bit payloads")
    why += two_beat_note(reserved.two_beat)
    return Choice("pipeline", length, (), why, two_beat_fifos=reserved.two_beat)


def describe(choice: Choice, device: Device, design: DesignPlan, slot_period: int = 2) -> str:
    """One line for the user: what was chosen and why (``slot_period``: the pipeline's cycles a tuple)."""
    if choice.partitioner == "pipeline":
        return (f"partitioner: pipeline (Woods et al.), {choice.partitions} partition"
                f"{'s' if choice.partitions != 1 else ''}, one tuple every {'other' if slot_period == 2 else 'third'} "
                f"cycle ({choice.reason})")
    if not choice.tables:
        return f"partitioner: none needed ({choice.reason})"
    parts = []
    for t in choice.tables:
        q = next(q for q in design.queries if q.name == t.query)
        how = f"direct-indexed by {', '.join(q.key_fields)}" if t.direct else f"hashed, {t.ways}-way buckets"
        parts.append(f"{t.query} {how}: {t.entries:,} partitions of {t.entry_bits} bits in {t.blocks} "
                     f"{device.block}s")
    used = sum(t.blocks for t in choice.tables)
    return (f"partitioner: table, one tuple per cycle — {'; '.join(parts)} ({used} of {device.blocks} on "
            f"{device.name}; {choice.reason})")
