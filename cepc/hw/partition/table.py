"""The table partitioner: per-key state in block RAM, one tuple per clock cycle.

Woods et al.'s pipeline partitioner (§6) holds a few hundred partitions and
takes a tuple every other cycle. This one keeps every partition's state — the
NFA state vector, the partial-match registers, a tag, an expiry — in a table
in block RAM (``amaranth.lib.memory``), read and written back every cycle:

* **Direct-indexed** when the key is narrow enough (2^key bits ≤ entries): the
  key is the address, the table holds every possible partition, nothing is
  ever dropped, and no tag is stored.
* **Hashed** otherwise: an H3 hash of the key picks a bucket of ``ways``
  entries, each tagged with the key's bits outside the hash's pivots (the
  bucket and the tag identify the key: :func:`quotient_tag`), searched in
  parallel (a probe bounded by the bucket). A tuple whose key has no entry
  and finds no free one in its bucket cannot be placed: the caller drops it
  (SPEC §3.6).

An entry is free when its state vector is zero (exactly a fresh partition,
as in the pipeline partitioner), or when it is stale: with WITHIN, past its
expiry (its key's last time plus the window) compared with the time of the
tuple being placed; with ``evict_after``, not written for that many cycles.

Pipeline (``depth`` = 4 enabled cycles, one key per cycle). The table is cut into
banks (:data:`BANK_DEPTH` deep: one block RAM at its deepest shape) and, per way, into columns;
block RAM stores each entry and, above it, whether the entry is in use (its vector is not zero):

0. the key's bucket address goes to every bank: in the top, hashed two stages early into a
   register, and copied at the next stage into a register beside each bank's way (:class:`Replica`);
1. each bank reads the word (in block RAM);
2. the word is in block RAM's own output register (:class:`~cepc.hw.ecp5.RegisteredRam`: on
   ECP5 the DP16KD's, whose clock-to-out is short; without one, 5.8 ns of block RAM's
   clock-to-out would leave no time for the route to the next flip-flop);
3. each bank's word is registered in the fabric, where it fans in (the route from a block RAM
   anywhere on the die gets a cycle of its own); the registers of every bank but the key's are
   cleared instead (a synchronous reset, off the data path), the in-use bit among them. The key's
   bank is the OR of every bank's registers (a tree of ORs with no select lines to fan out); it is
   registered, with whether each way is in use and holds the key; whether the six writes ahead wrote this
   bucket, and whether they were this key, is decided from registers (for those two or more ahead, and
   which ways they touched, at stage 2 already, so stage 3 picks the newest from flip-flops);
4. each way's flags (in use, the key's, whether it is stale) are patched with the newest of those
   writes (block RAM did not have them when it was read) and the key's entry is found; its state,
   offered on ``out_*``, is the key's own newest write if there is one, else block RAM's word of
   that way; the caller's ``next_state`` is registered as the write. Which write holds the key's
   state, and each way's flags as the writes ahead but the newest leave them, are decided at stage 3
   and registered, and so is the state of the key's newest write but w0 (zero if none; with the
   two-cycle update on a large die, read from a LUT RAM the writes' states go into); with WITHIN
   or ``evict_after`` so is whether each entry is stale (its expiry against the key's time, given two
   stages ahead as ``now2`` and registered: the writes' expiries, w0's as it is formed among them,
   compared a stage earlier still; its stamp against the epoch of the lookup). The
   lookup patches the flags with w0 alone, and the state is w0's, that register's or block RAM's,
   picked by registers (on a large die a copy of them per SELECT_CHUNK bits of a wide state). In the
   next enabled cycle
   the write is copied into a register beside each bank's way (:class:`Replica`), from which block RAM
   takes it.

Given a partial-match core's ``conditions`` (:class:`~cepc.hw.nfa_core.Conditions`), the table
also offers the key's state's conditions for its tuple (``out_cond``): computed at stage 3 from each
way's word and from the key's older writes ahead, and registered, and for the newest write the caller's
``next_cond``. Each older write's are computed beside its register, then picked (the picking
stays off the comparators' path), with WITHIN or ``evict_after`` too.

So back-to-back tuples of one key, or of keys sharing a bucket, see each other's updates by
forwarding, never by stalling; every path into and out of block RAM starts or ends in a
flip-flop, and every route across the die, to and from banks anywhere on it, runs from one
flip-flop to another. The reset sweep's writes go the same way, one bucket per enabled cycle.

With ``lag`` (the two-cycle update), the lookup's results are registered at a fifth stage and the
caller updates the state from there: the update loop has two registers, the lookup's pick and the
caller's update. The write of a key is then formed a stage behind its lookup, so it reaches the
lookup of the key two behind, not one: the caller never injects a key of the bucket of the key
just before it (``adjacent``, ``hold``: it waits a cycle). Each write is forwarded as before,
a stage later (the compares with the keys ahead shift by one; the key one ahead is never of the
bucket), and the newest write's conditions are computed at the lookup from its state.

With ``lag`` 2 (the three-cycle update) the lookup's results are registered again at a sixth stage,
and the conditions (``out_cond``) are computed between the two, once, from the key's state picked:
none is computed for the states the lookup may pick. (On a large die, in groups, each from copies of its
own of the tuple's inputs (up to :data:`GROUPED_INPUT_BITS`), and all from a copy of the bits of the
state they read: ``cond_groups``, ``cond_bits``.) The write of a key reaches the lookup of the key
three behind it, so the caller never injects a key of the bucket of either of the two before it
(``adjacent``, and ``conflict`` as with ``stall`` at a spacing of 2; ``given_index``: the caller gives
``next_key``'s bucket from a register, so those compares follow no hash). Each write is forwarded a
stage later again, and the older write's state is read from the LUT RAM at the lookup itself (its
address decided at stage 2, registered, and copied from that register).

With ``stall`` (``--hazards stall``) nothing is forwarded: the caller never injects a key of the
bucket of any of the :func:`stall_spacing` keys before it (7, 8 with ``lag``, 9 with ``lag`` 2), so block RAM has
taken their writes when the key's bucket is read, and the lookup's state and flags are block RAM's
word alone. The caller learns it from ``conflict`` and ``conflict_held`` (the key two ahead's bucket,
or the held one's, against the keys in flight) and holds the key as many cycles as it takes. The
forwarding multiplexers, the compares with the writes ahead and the older writes' registers are
left out (their flags are constant zero), which on a large die were the wide states' longest routes.
A run of tuples of one key then takes one tuple per spacing + 1 cycles; keys that differ, one a cycle.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.memory import Memory

from ..ecp5 import RegisteredRam
from ..replica import Replica, small_die
from .pipeline import _signature

DEPTH = 4  # enabled cycles from inject to out_*
# writes block RAM has not taken when a key's bucket is read: the key read at enabled edge c is
# looked up at c + 4; the write of the key k ahead is registered at c + 4 - k, copied beside each
# bank at c + 5 - k, and taken at c + 6 - k at the latest
FORWARD = DEPTH + 2
# With more banks than this (on a large die), the write reaches them through a copy per group of
# this many banks, and block RAM takes it a cycle later: FORWARD + 1 writes to forward
GROUP_BANKS = 8
COMPARE_CHUNK = 8  # on a large die, the compares with the writes ahead: bits per registered chunk
# On a large die, each way's tag against the key's, compared beside block RAM's output: bits per registered
# chunk, where the state is at most TAG_CHUNK_STATE bits. A 4-bit equality is a LUT4 pair and a PFU
# multiplexer; at 8 bits it took another LUT level after the route from block RAM across the die (finance0 on
# the ECP5-85F at seed 1, `bank0_way3_col1` into `bank0_way3_tagged`, 7.30 ns). At 4: finance0 142.4, 150.9,
# 141.7, 150.3, 149.8 MHz at seeds 1-5 against 137.0, 136.3, 142.6, 142.2, 144.4 (1.05x), finance5 1.02x on
# seeds 1 and 3. A wider state's picks take more copies of the tags' AND (one per SELECT_CHUNK bits), and
# twice the chunks into them was mshape's path (902 bits: 121.0, 121.8 at seeds 2 and 3 against 125.3,
# 130.0, 0.95x): there, 8 (bench/results/synth-rounds.md)
TAG_CHUNK = 4
TAG_CHUNK_STATE = 640
# With the three-cycle update on a large die, the conditions are computed in groups, each from a copy of
# the tuple's inputs of its own, where those copies take at most this many flip-flops in all: finance0's
# 160, mshape's 352 and finance5's 905 (1.02–1.09× on the mean of nextpnr's seeds 1–3), not finance2's
# 2,007, which was slower (72.7 and 81.8 MHz at seeds 1 and 2 against 86.7 and 95.5: bench/results/synth-rounds.md)
GROUPED_INPUT_BITS = 1024
# On a large die, WITHIN's expiries are compared with the key's time in slices of this many bits, side by
# side, their results joined after (as cepc.hw.expr.ordered's slices), not along one carry chain as wide as the time
# plus a bit (finance2's 65 bits, 33 CCU2Cs: 3.8 ns of logic before a route, from block RAM's word into
# the state's select lines and from `now2` into each write's staleness, its late paths once HeAP placed it)
EXPIRY_SLICE = 16


def expiry_slices(width: int) -> list[tuple[int, int]]:
    """[lo, hi) of each slice an expiry of ``width`` bits is compared in on a large die: EXPIRY_SLICE bits
    each, a remainder under half of that joined to the slice below it (a time's expiry is a bit wider than
    the time, and a slice of that bit alone would compare it with the time's constant zero)."""
    los = list(range(0, width, EXPIRY_SLICE))
    if len(los) > 1 and width - los[-1] < EXPIRY_SLICE // 2:
        los.pop()
    return [(lo, los[i + 1] if i + 1 < len(los) else width) for i, lo in enumerate(los)]


def sliced(a: Value, b: Value) -> tuple[list, list]:
    """Each of :func:`expiry_slices`' slices of ``a`` and ``b``: whether ``a``'s is below ``b``'s, and whether
    they are equal (lowest slice first)."""
    slices = expiry_slices(len(a))
    return [a[lo:hi] < b[lo:hi] for lo, hi in slices], [a[lo:hi] == b[lo:hi] for lo, hi in slices]


def below_joined(below: list, equal: list) -> Value:
    """Whether a value is below another, from each slice's ``below`` and ``equal`` (lowest slice first): the
    highest slice where they differ decides."""
    out, same = Const(0), Const(1)
    for b, e in zip(reversed(below), reversed(equal)):
        out = out | (same & b)
        same = same & e
    return out
# on a large die, the state's select lines (which write or way is the key's): a copy per this many
# bits of a wide state (a partial-match core's, 902 bits for mshape), so no select reaches them all;
# and with the two-cycle update, the older write's state: a LUT RAM and its read address per this many
# bits. (Per 128 bits, half the copies: finance5 120.8 and 125.8 MHz at seeds 3 and 5 against 127.4 and 122.5, mshape
# 128.6 and 131.5 against 130.0 and 133.6, 0.99x each, the state's multiplexers then the path: bench/results/synth-rounds.md)
SELECT_CHUNK = 64
# With the three-cycle update, the older write's LUT RAM is read at the lookup itself: a copy of its read
# address per this many bits (two TRELLIS_DPR16X4s on ECP5), so each copy's loads are a few cells beside
# it (per SELECT_CHUNK bits, mshape's routes from a copy to its LUT RAMs were 3.0-3.5 ns at seed 1; per
# 16, no seed of 16 met 150 MHz for finance0, its state's pick among its paths; per 8, two of six did)
HISTORY_CHUNK = 8
COLUMN_BITS = 504  # the widest memory made (14 DP16KDs side by side): a wider entry is split into columns
DEFAULT_WAYS = 4
STAMP_BITS = 12  # --evict-after: a write's epoch; stale after half the epoch range


def stall_spacing(lag: int) -> int:
    """With ``stall``: how many keys ahead of a key must not share its bucket, so that block RAM has
    taken their writes when the key's bucket is read. These are the writes the lookup would forward:
    FORWARD, one more where the write reaches the banks through a group's copy (counted always, so the
    spacing does not depend on the die, and both back ends hold a key on the same cycles), and with
    ``lag`` (the update's cycles but one) as many keys more, whose writes are formed that many stages later."""
    return FORWARD + 1 + int(lag)


def hold_spacing(lag: int, stall: bool) -> int | None:
    """How many keys ahead of a key the caller is told about (``conflict``), so that it holds the key
    while one of them shares its bucket: with ``stall`` the :func:`stall_spacing`; with the three-cycle
    update (``lag`` 2) the two before it (the one right before is also ``adjacent``'s); else None."""
    return stall_spacing(lag) if stall else 2 if lag == 2 else None


# A bank is one block RAM at its deepest shape (ECP5's DP16KD: 16,384 × 1), the entry's bits side by
# side, a block per bit: as few banks as block RAM allows, so the OR that picks the key's bank, and the
# copies beside each bank, are few. (In 2,048 × 9 blocks marathon's table was 32 banks spread over the
# ECP5-85F's die; in 16,384 × 1 blocks it is 4 banks, 40 blocks with the in-use bit against 32, and
# its Fmax on nextpnr's seeds 1–5 went from 126–139 to 162–182 MHz: bench/results/synth-rounds.md.) Never
# block RAMs cascaded by depth, whose multiplexer would follow block RAM's clock-to-out. A table
# shallower than that is one bank, in the widest shape deep enough.
BANK_DEPTH = 16384


def bank_depth_of(buckets: int, depth: int = BANK_DEPTH) -> int:
    """How deep a bank of a table of ``buckets`` is: ``depth`` rounded up to a power of two (at least
    two words: a one-word memory has no address), at most the table."""
    return min(buckets, max(2, 1 << (depth - 1).bit_length()))


def stored_columns(entry_width: int) -> list[tuple[int, int]]:
    """The columns of block RAM's word: the entry and, above it, whether its vector is non-zero (the
    write's `keep`)."""
    return columns(entry_width + 1)


def columns(width: int) -> list[tuple[int, int]]:
    """The bit ranges ``[lo, hi)`` an entry of ``width`` bits is stored in: one memory each, at most
    COLUMN_BITS wide."""
    return [(lo, min(lo + COLUMN_BITS, width)) for lo in range(0, width, COLUMN_BITS)]


def h3_matrix(key_width: int, index_bits: int, seed: int = 0x5EED) -> list[int]:
    """The H3 hash (Carter & Wegman): index bit i is the parity of the key bits in row i."""
    rng = random.Random(seed + 1000 * key_width + index_bits)
    return [rng.getrandbits(key_width) | (1 << (i % key_width)) for i in range(index_bits)]


def tag_width_of(key_width: int, buckets: int) -> int:
    """The tag's width in a hashed table of ``buckets`` (a power of two, at least two), as
    TablePartitioner stores it."""
    return len(quotient_tag(key_width, h3_matrix(key_width, (buckets - 1).bit_length())))


def h3(key: int, rows: list[int]) -> int:
    """The H3 hash in software, for tests and host tools."""
    return sum((bin(key & row).count("1") & 1) << i for i, row in enumerate(rows))


def quotient_tag(key_width: int, rows: list[int]) -> tuple[int, ...]:
    """The key bits a hashed entry stores as its tag: all but a set of ``len(rows)`` bits (pivots)
    over which the hash is invertible, found by Gaussian elimination over GF(2).

    Two keys in one bucket (equal hashes) whose other bits are equal are equal: the hash of their
    difference, which lies in the pivots, is zero, and only zero hashes to zero there. So the bucket
    and these bits identify the key, and the tag is ``len(rows)`` bits narrower than it (Cleary's
    quotienting; network's 32-bit keys in 4,096 buckets: a 20-bit tag). Without such a set (a hash
    of lower rank) every bit is stored."""
    reduced: list[tuple[int, int]] = []  # (row, its pivot bit), each pivot cleared in the others
    for row in rows:
        for r, pivot in reduced:
            if row >> pivot & 1:
                row ^= r
        if row == 0:
            return tuple(range(key_width))
        pivot = row.bit_length() - 1
        reduced = [(r ^ row if r >> pivot & 1 else r, p) for r, p in reduced] + [(row, pivot)]
    pivots = {p for _, p in reduced}
    return tuple(b for b in range(key_width) if b not in pivots)


class TablePartitioner(wiring.Component):
    """Per-key state for ``entries`` partitions in block RAM; same protocol as
    :class:`~cepc.hw.partition.PipelinePartitioner` with ``depth`` 4 and a slot every cycle.

    ``entries`` is rounded up to a power of two (and to ``2**key_width`` when direct-indexed
    fits). ``state_width`` is the stored payload, its low ``vector_width`` bits the state vector.
    ``expiry_width``: exact eviction for WITHIN, an entry expiring ``window`` after its key's last
    time. ``now2`` is the time of the key at stage 2, beside it as it moves through the table (the
    table registers it along with the key: the time of the tuple placed is the one given ``depth`` - 2
    enabled cycles before, its expiry that plus the window). After ``rst`` the table is swept clear
    (one bucket per cycle, ``slot`` low meanwhile) if anything was written since the last sweep.
    ``relay``: on a large die, the newest write reaches the banks through a copy of its own (as with
    more than GROUP_BANKS banks), a cycle later, so the update loop's register is not pulled to them.
    """

    def __init__(self, entries: int, key_width: int, state_width: int, *, vector_width: int | None = None,
                 ways: int | None = None, evict_after: int | None = None, expiry_width: int | None = None,
                 window: int | None = None, early_key: int = 0, en_ahead: bool = False, bank_depth: int | None = None,
                 conditions: Callable[[Value, Value], Value] | None = None, cond_width: int = 0,
                 cond_in_width: int = 1, cond_bits: list[tuple[int, int]] | None = None,
                 cond_groups: list[list[int]] | None = None, relay: bool = False, lag: int = 0, stall: bool = False,
                 given_index: bool = False):
        if entries < 1:
            raise ValueError(f"the table needs at least one entry, not {entries}")
        self.direct = (1 << key_width) <= entries
        # direct-indexed, every key has an entry of its own: a tuple is never left without one
        self.places_every_key = self.direct
        if self.direct:
            self.ways, self.buckets = 1, 1 << key_width
        else:
            self.ways = ways or DEFAULT_WAYS
            # a power of two, rounded up; at least two (a one-word memory has a zero-width address)
            self.buckets = max(2, 1 << (-(-entries // self.ways) - 1).bit_length())
        self.entries = self.ways * self.buckets
        self.index_bits = max(0, (self.buckets - 1).bit_length())
        self._kw, self._sw = key_width, state_width
        self._vw = vector_width or state_width
        self._xw = expiry_width
        if expiry_width and (window is None or not 0 <= window < 1 << (expiry_width - 1)):
            # (a time of expiry_width - 1 bits plus the window must not wrap: see cepc.hw.top.within_expiry)
            raise ValueError(f"WITHIN's table needs a window of 0 to {(1 << (expiry_width - 1)) - 1} "
                             f"(its {expiry_width}-bit expiry is a time one bit narrower plus the window), "
                             f"not {window}")
        self.window = window if expiry_width else 0
        self._period = max(1, evict_after // (1 << (STAMP_BITS - 1))) if evict_after else None
        self.hash_rows = [] if self.direct else h3_matrix(key_width, self.index_bits)
        # hashed: the key bits stored as its tag (the bucket gives the rest: quotient_tag)
        self.tag_bits = () if self.direct else quotient_tag(key_width, self.hash_rows)
        self.tag_width = len(self.tag_bits)
        self.entry_width = state_width + self.tag_width + (expiry_width or 0) + (STAMP_BITS if evict_after else 0)
        self.bank_depth = bank_depth_of(self.buckets, bank_depth or BANK_DEPTH)
        self.banks = self.buckets // self.bank_depth
        self.bank_bits_low = (self.bank_depth - 1).bit_length()
        self.columns = stored_columns(self.entry_width)
        signature = _signature(key_width, state_width, expiry_width or 1)
        # WITHIN: whether an entry has expired is judged a stage early (two, for the writes ahead),
        # against the time of the key at stage 2, ``now2``, which the table registers beside the key,
        # so the lookup's flags come from registers (see the pipeline above). The expiry a write
        # stores is formed from those registers too: the table takes no ``next_expiry``.
        del signature["now"], signature["next_expiry"]
        signature["now2"] = wiring.In(expiry_width or 1)
        self.early_key = early_key
        if early_key not in (0, 2):
            raise ValueError(f"next_key is 2 enabled cycles ahead of key (0: none), not {early_key}")
        # ``given_index``: the caller gives next_key's bucket (``next_index``, :meth:`bucket_of` it) from a
        # register of its own, in place of next_key, so the compares that decide whether to hold a key
        # (``adjacent``, ``conflict``) do not follow the hash's tree of XORs
        self.given_index = given_index
        if given_index and not early_key:
            raise ValueError("next_index is next_key's bucket: it needs early_key")
        if given_index:
            signature["next_index"] = wiring.In(max(1, self.index_bits))
        elif early_key:
            # the key two enabled cycles ahead (what ``key`` will be after two enabled edges): its
            # bucket is registered, then copied beside each bank's way, so block RAM's address comes from
            # flip-flops, not a tree of XORs
            signature["next_key"] = wiring.In(key_width)
        # A partial-match core's conditions (cepc.hw.nfa_core.Conditions): ``conditions(state, inputs)``
        # for the tuple at stage 3, computed there from each state the lookup may pick (each way's word,
        # the key's older writes ahead), registered and picked beside the state (``out_cond``); for the
        # newest write the caller's ``next_cond``, registered beside it. ``inputs`` is what they read of
        # the tuple (cepc.hw.nfa_core.TupleInputs), given at stage 1 as ``cond_in`` and registered here: on a
        # large die a copy for each state whose conditions are computed (a Replica beside them)
        self._conditions = conditions if cond_width else None
        self.cond_width = cond_width if conditions else 0
        # ``cond_bits``: the bits of a state the conditions read (``[lo, hi)`` ranges: Conditions.state_bits).
        # With lag 2 on a large die they read a copy of those bits of their own, registered beside the
        # key's state at stage 5 (the rest of the state stays in that register alone)
        self._cond_bits = cond_bits
        # ``cond_groups``: the conditions' bits in groups (Conditions.groups; ``conditions(state, inputs,
        # only)`` computes a group's). With lag 2 on a large die each group is computed apart, from a
        # copy of the tuple's inputs of its own, so no comparator is shared across groups (where those
        # copies take at most GROUPED_INPUT_BITS flip-flops)
        self._cond_groups = cond_groups if cond_groups and len(cond_groups) * cond_in_width <= GROUPED_INPUT_BITS \
            else None
        # ``lag``: the two-cycle update. The lookup's results are registered (stage 5, ``depth`` 5) and the
        # caller's next state is taken a stage later, so the update loop has two registers: the lookup's
        # pick into stage 5, the caller's update from there into the write. A key's write then reaches
        # the lookup of the key two behind it, not the one behind: the caller must never inject a key
        # of the same bucket as the one injected just before. ``adjacent`` says whether the key two
        # enabled cycles ahead (``next_key``) shares the bucket of the key one ahead (given as
        # ``next_key`` a cycle before); ``hold`` keeps that one's bucket for the next enabled cycle,
        # while the caller holds that key back and injects nothing. The newest write's conditions
        # are then not the caller's but computed at the lookup from its state, for the tuple there.
        # ``lag`` 2: the three-cycle update. The lookup's results are registered at stage 5 and again
        # at stage 6, and the conditions are computed between the two, once, from the key's state
        # picked (not for every state the lookup may pick); the caller updates from stage 6. A key's
        # write reaches the lookup of the key three behind it: the caller never injects a key of the
        # bucket of either of the two injected before it (``conflict``, ``conflict_held``, as with
        # ``stall`` at a spacing of 2, and ``adjacent``).
        if lag not in (0, 1, 2):
            raise ValueError(f"a key's update takes 1 to 3 cycles (lag 0 to 2), not lag {lag}")
        self.lag = int(lag)
        self.depth = DEPTH + self.lag
        # ``stall``: nothing forwarded, a key held while one of the ``spacing`` keys ahead of it shares
        # its bucket. ``conflict``: the key two enabled cycles ahead (``next_key``) shares the bucket of a
        # key in flight that will still be within ``spacing`` of it, ``adjacent`` aside (the caller ANDs
        # that with whether there is a key one ahead); ``conflict_held``: the key one ahead, while held,
        # shares one (index_ahead's bucket: see ``hold``).
        self.stall = stall
        self.spacing = hold_spacing(self.lag, stall)
        if lag or stall:
            if not early_key:
                raise ValueError("the two-cycle update and --hazards stall need the key two enabled cycles "
                                 "ahead (early_key)")
            signature["adjacent"] = wiring.Out(1)
            signature["hold"] = wiring.In(1)
        if self.spacing is not None:
            signature["conflict"] = wiring.Out(1)
            signature["conflict_held"] = wiring.Out(1)
        if self.cond_width:
            signature["out_cond"] = wiring.Out(cond_width)
            # what the conditions read of the tuple at stage 1 (TupleInputs), registered here
            signature["cond_in"] = wiring.In(cond_in_width)
            if not lag:
                signature["next_cond"] = wiring.In(cond_width)
        # (the conditions of each state the lookup may pick, computed a stage ahead: not with lag 2,
        # which computes them once, from the state picked)
        self.candidates = bool(self.cond_width) and self.lag < 2
        # the state of the newest write (w0's: the caller's ``next_state``, registered as the write on
        # the enabled edge after its lookup, or with ``lag`` after stage 5), for a caller that would
        # otherwise register part of it again (the top's record of a match: its registers)
        signature["last_write"] = wiring.Out(state_width)
        self.en_ahead = en_ahead
        # on a large die, the write reaches the banks through a copy of its own, as with many banks
        self.relay = relay
        if en_ahead:
            # what `en` will be after the next edge: copied into a register beside each bank, so `en`
            # itself does not reach across the die
            signature["en_next"] = wiring.In(1)
        super().__init__(signature)

    def index(self, key) -> int:
        """The bucket of a key (an int), as the hardware computes it."""
        return key if self.direct else h3(key, self.hash_rows)

    def bucket_of(self, key: Value) -> Value:
        """The bucket of ``key`` (a value), as the hardware computes it."""
        if self.direct:
            return key
        if not self.hash_rows:
            return Const(0, 1)
        return Cat(*((key & row).xor() for row in self.hash_rows))

    def elaborate(self, platform):
        m = Module()
        kw, sw, vw, W, ew = self._kw, self._sw, self._vw, self.ways, self.entry_width
        ib = max(1, self.index_bits)
        low = self.bank_bits_low  # address bits inside a bank; the bits above pick the bank

        def tag_of(key):
            """The key's tag (its bits outside the hash's pivots); compared only within a bucket."""
            return Cat(*(key[b] for b in self.tag_bits)) if self.tag_bits else Const(0, 1)

        index_of = self.bucket_of

        # fields of an entry, LSB first: state, tag, expiry, stamp
        def fields(entry):
            off = 0
            state = entry[off:off + sw]
            off += sw
            tag = entry[off:off + self.tag_width] if self.tag_width else None
            off += self.tag_width
            expiry = entry[off:off + self._xw] if self._xw else None
            off += self._xw or 0
            stamp = entry[off:off + STAMP_BITS] if self._period else None
            return state, tag, expiry, stamp

        def bank_of(index):
            return index[low:] if self.banks > 1 else Const(0, 1)

        # --- reset sweep: a synchronous reset empties the table, if anything was written -----------
        # `alive` is the one register here that a reset clears: low in the cycle after any reset,
        # the domain's own or one a ResetInserter adds (the board top's sync domain has none)
        alive = Signal()
        dirty = Signal(reset_less=True)
        sweeping = Signal(reset_less=True)
        sweep_at = Signal(ib, reset_less=True)
        # whether sweep_at is the last bucket, registered as it gets there (a compare of its every bit
        # was on the path from `en` into `sweeping`)
        sweep_last = Signal(reset_less=True)
        sweeping_next = Signal()
        m.d.sync += alive.eq(1)
        m.d.comb += sweeping_next.eq(sweeping)
        with m.If(~alive):
            m.d.comb += sweeping_next.eq(dirty)
            m.d.sync += [sweep_at.eq(0), sweep_last.eq(0)]  # (at least two buckets)
        with m.Elif(sweeping & self.en):  # each swept bucket is a write (below), so it moves as they do
            m.d.sync += [sweep_at.eq(sweep_at + 1), sweep_last.eq(sweep_at == self.buckets - 2)]
            with m.If(sweep_last):
                m.d.comb += sweeping_next.eq(0)
                m.d.sync += dirty.eq(0)
        # `slot` is alive & ~sweeping, registered as they are (alive is 1 after any edge but a reset's,
        # which clears both): the top's handshake, far from here, starts from a flip-flop
        slot = Signal()
        m.d.sync += [sweeping.eq(sweeping_next), slot.eq(~sweeping_next)]
        m.d.comb += self.slot.eq(slot)

        # --- stage 0: the key's bucket address goes to every bank's read port ----------------------
        # The copies beside each bank (Replica) equal what they copy; they pay on a large die, where
        # the banks are far apart. The UP5K is small, and short of logic cells: there the banks use
        # the originals. (Simulation, with no platform, uses the copies, so the tests check them.)
        copies = not small_die(platform)
        # Data registers (keys, buckets, the writes but their valid flags) need no reset: every use is
        # gated by a valid flag. Without one, the design's reset reaches hundreds fewer flip-flops (681
        # on marathon's ECP5, 6 ns of routing); on the UP5K, whose flip-flops take an enable and a reset
        # together, the same cost 4–5 MHz (measured), so there they keep theirs.
        bare = copies
        # the conditions' inputs (of the tuple at stage 1: ``cond_in``) at stages 2 to 4: a register
        # each, or on a large die a copy per use, registered from the stage before (never inside an
        # ``If``: a copy's inputs would be gated by it)
        cond_in_at = {1: self.cond_in} if self.cond_width else {}
        for stage in range(2, 6 if self.lag == 2 else 5) if self.cond_width else ():
            cond_in_at[stage] = Signal(len(self.cond_in), name=f"cond_in{stage}", reset_less=True)
            with m.If(self.en):
                m.d.sync += cond_in_at[stage].eq(cond_in_at[stage - 1])
        cond_uses = [0]

        def conditions_at(state, stage=3):
            """The conditions of ``state`` for the tuple at ``stage`` (2 to 4; 5 with lag 2)."""
            if not copies:
                return self._conditions(state, cond_in_at[stage])
            out = Const(0, self.cond_width)
            # (lag 2: each group of bits apart, as the update reads them, so that a comparator shared
            # by two is not placed far from one of them: finance5, mshape and finance0 at 34fac55, a
            # 1.3–2.6 ns route from one condition's compare into another's register)
            for only in self._cond_groups if stage == 5 and self._cond_groups else [None]:
                cond_uses[0] += 1
                copy = m.submodules[f"{Replica.PREFIX}cond_in{stage}_{cond_uses[0]}"] = Replica(len(self.cond_in))
                m.d.comb += [copy.d.eq(cond_in_at[stage - 1]), copy.en.eq(self.en)]
                out = out | (self._conditions(state, copy.q) if only is None else self._conditions(state, copy.q, only))
            return out
        # Many banks span much of the die: the write then reaches them through a copy per group of
        # banks, and block RAM takes it a cycle later (one more write to forward)
        # With `relay` (a long update loop: a partial-match core's), so do a few banks: w0, the loop's
        # register, then feeds the core and one copy, not every way's copy beside the banks, which pulled
        # it across the die (mshape at f455950: a 7.4 ns route from the core into w0)
        groups = -(-self.banks // GROUP_BANKS) if copies and (self.banks > GROUP_BANKS or self.relay) else 0
        forward = FORWARD + (1 if groups else 0)
        def way_copy(kind, b, w, width, init=None):
            """A copy (:class:`Replica`) of ``kind`` beside bank b's way w (beside bank b: one way)."""
            name = f"{Replica.PREFIX}{kind}{b}" + (f"_way{w}" if W > 1 else "")
            m.submodules[name] = copy = Replica(width, init=init)
            return copy

        # [bank][way]: `en` beside each bank's way (its block RAMs' enables, its registers): a copy
        # registered from `en_next` (kept apart), else `en` itself
        bank_en = []
        for b in range(self.banks):
            row = []
            for w in range(W):
                if self.en_ahead and copies:
                    copy = way_copy("en", b, w, 1, init=1)
                    m.d.comb += [copy.d.eq(self.en_next), copy.en.eq(1)]
                    row.append(copy.q)
                else:
                    row.append(self.en)
            bank_en.append(row)

        def group_copies(name, value, hold=None):
            """Per group of banks (none without groups): a copy of ``value`` in its midst, registered
            on the same enabled edges as ``value``'s register (but where ``hold``), which the group's
            banks take."""
            out = []
            for g in range(groups):
                copy = m.submodules[f"{Replica.PREFIX}{name}_group{g}"] = Replica(len(value))
                en = bank_en[g * GROUP_BANKS][0]
                m.d.comb += [copy.d.eq(value), copy.en.eq(en if hold is None else en & ~hold)]
                out.append(copy.q)
            return out

        index0 = Signal(ib, reset_less=bare)
        # [bank][way]: the read address (with the key early, on a large die, a copy of index0's low
        # bits per bank and way: see `taken`)
        read_at = []
        if self.early_key:  # index_of(key) by construction: all move on the same enabled edges from 0
            next_index = self.next_index if self.given_index else index_of(self.next_key)
            index_ahead = Signal(ib, name="index_ahead", reset_less=bare)
            with m.If(self.en):
                m.d.sync += index0.eq(index_ahead)
                with m.If(~self.hold if self.lag or self.stall else Const(1)):  # (held: index_ahead keeps its bucket)
                    m.d.sync += index_ahead.eq(next_index)
            if self.lag or self.stall:  # (next_key's bucket is index_ahead's D input: the one tree of XORs)
                m.d.comb += self.adjacent.eq(next_index == index_ahead)
            group_read = group_copies("read", next_index[:max(1, low)],
                                      self.hold if self.lag or self.stall else None)  # (index_ahead's)
            for b in range(self.banks):
                if not copies:
                    read_at.append([index0[:low]] * W)
                    continue
                row = []
                for w in range(W):
                    copy = way_copy("read", b, w, max(1, low))
                    m.d.comb += [copy.d.eq(group_read[b // GROUP_BANKS] if groups else index_ahead[:low]),
                                 copy.en.eq(bank_en[b][w])]
                    row.append(copy.q)
                read_at.append(row)
        else:
            m.d.comb += index0.eq(index_of(self.key))
            read_at = [[index0[:low]] * W] * self.banks

        # The writes, registered: the one of the key one ahead, and the five before it, kept for
        # forwarding. The one before it (w1) is copied beside each bank's way, and block RAM takes it from
        # there (the long route is between flip-flops); while the table is swept, the writes are the
        # swept buckets'.
        # Each writes one entry (or none) of its bucket: `ways` one-hot, `entry` the new entry; `keep`
        # (its vector is not zero) is kept beside it so the forwarding multiplexer need not OR it again.
        # (on a large die only `valid` has a reset: see `bare`)
        writes = [{"valid": Signal(name=f"w{j}_valid"), "index": Signal(ib, name=f"w{j}_index", reset_less=bare),
                   "ways": Signal(W, name=f"w{j}_ways", reset_less=bare),
                   "entry": Signal(ew, name=f"w{j}_entry", reset_less=bare),
                   "keep": Signal(name=f"w{j}_keep", reset_less=bare),
                   "key": Signal(max(1, self.tag_width), name=f"w{j}_key", reset_less=bare),  # its tag
                   "was": Signal(name=f"w{j}_was", reset_less=bare)}  # the entry it writes was in use
                  for j in range(forward)]
        w0 = writes[0]
        m.d.comb += self.last_write.eq(fields(w0["entry"])[0])
        # Direct-indexed with nothing stale, every key writes its own entry: the write always targets
        # the one way, and whether it keeps a state is read off its entry, not registered from the
        # core's next state (that OR was the end of the update loop's path)
        lean = self.direct and self._xw is None and self._period is None
        if lean:
            w0["keep"] = Signal(name="w0_keep")
            m.d.comb += w0["keep"].eq(w0["entry"][:vw].any())

        # --- block RAM: banks × ways × columns, each bank's output registered ---------------------------
        # The key's bank, one-hot, at stage 2 (a register beside the key's): only that bank's stage-3
        # registers take block RAM's word, the others are cleared (a synchronous reset, off the data
        # path), and the bank is picked by an OR over the banks, not a multiplexer whose select lines
        # would have to reach every bank.
        sel2 = Signal(self.banks, name="bank2", reset_less=True)
        # [bank][way]: what the way's block RAMs in the bank take from w1 (with groups, w2): the write
        # enable (valid, this way, this bank), the address in the bank and the stored word (the entry
        # and its `keep`). On a large die each is a copy of its own (a bank's ways' block RAMs, a block
        # per bit of the word in a 16,384-deep bank, spread over the die), the enable decided before
        # the copy's register, not after it.
        taken = []
        fields_ = ("valid", "index", "ways", "entry", "keep")
        group_write = group_copies("write", Cat(*(w0[f] for f in fields_)))  # (w1's)
        for b in range(self.banks):
            if copies:
                source, parts, off = group_write[b // GROUP_BANKS] if groups else Cat(*(w0[f] for f in fields_)), {}, 0
                for f in fields_:
                    parts[f] = source[off:off + len(w0[f])]
                    off += len(w0[f])
            else:
                parts = writes[1]
            row = []
            for w in range(W):
                wants = parts["valid"] & parts["ways"][w] & (bank_of(parts["index"]) == b)
                if not copies:
                    row.append({"en": wants, "addr": parts["index"][:low], "stored": Cat(parts["entry"], parts["keep"])})
                    continue
                copy = way_copy("write", b, w, 1 + max(1, low) + ew + 1)
                m.d.comb += [copy.d.eq(Cat(wants, parts["index"][:max(1, low)], parts["entry"], parts["keep"])),
                             copy.en.eq(bank_en[b][w])]
                row.append({"en": copy.q[0], "addr": copy.q[1:1 + max(1, low)], "stored": copy.q[1 + max(1, low):]})
            taken.append(row)
        bank_q = []  # [bank][way]: the stage-3 registers of the bank's read data, zero unless the key's
        # [bank][way]: beside them, whether the way is in use (its vector is not zero): block RAM stores
        # it, the write's `keep`, in a bit of its own above the entry, so the flag is a bit of the read
        # word registered, not an OR of the vector's bits after block RAM (marathon's critical path)
        bank_used = []
        # [bank][way] (hashed, with `lag` on a large die): and whether its tag is the key's, compared
        # beside the bank with a copy of the key's tag, as block RAM's word is registered. The lookup's
        # picks then AND flags from flip-flops: finance0's critical path with the two-cycle update
        # was the tag compare at stage 3 (9.0 ns: 1.7 ns of logic, a 2.6 ns route into `pick4_way0`).
        # It is registered in chunks of COMPARE_CHUNK bits, joined at stage 3: from block RAM's output
        # register the whole compare was finance0's critical path once the three-cycle update's
        # conditions read copies of their own (7.0–8.1 ns at nextpnr's seeds 1–3: 0.96 ns of
        # clock-to-out, a 2.7–3.4 ns route from block RAM, three levels of LUTs)
        bank_tags = [] if copies and self.lag and self.tag_width else None
        # [bank][way] (WITHIN, with `lag` on a large die): and whether its expiry is below the key's time,
        # compared beside the bank against `now2` (the time of the key whose word block RAM's output
        # register holds), in slices of EXPIRY_SLICE bits, each slice's "below" and "equal" registered
        # and joined at stage 3. From block RAM's word at stage 3, that compare led into the state's select
        # lines across the die (finance2 at seeds 1 and 2: 9.5-10.2 ns, 6.6-7.5 ns of them routes).
        bank_expiry = [] if copies and self.lag and self._xw else None
        key_copies = []
        for b in range(self.banks):
            row, row_used = [], []
            for w in range(W):
                en = bank_en[b][w]
                # (one bank, the key's always: nothing to clear. That clear, from `en`'s copy and `bank2`,
                # was a synchronous reset fanned out to mshape's 1,087 bits of each way's word, a 3.5 ns
                # route: 139 of its late inputs at 45eba48's seed 1)
                clear = None
                if self.banks > 1:
                    clear = Signal(name=f"bank{b}_way{w}_clear")
                    m.d.comb += clear.eq(en & ~sel2[b])

                def load(target, value, en=en, clear=clear):
                    """``target`` takes ``value`` on ``en``, and zero instead where ``clear``."""
                    if clear is None:
                        with m.If(en):
                            m.d.sync += target.eq(value)
                        return
                    with m.If(clear):
                        m.d.sync += target.eq(0)
                    with m.Elif(en):
                        m.d.sync += target.eq(value)
                # the stored word's registers: the entry, then whether it is in use
                q = Signal(ew, name=f"bank{b}_way{w}", reset_less=True)  # (v3 says whether it is a key's)
                u = Signal(name=f"bank{b}_way{w}_used", reset_less=True)
                row_used.append(u)
                stored = Cat(q, u)
                read = []  # (block RAM's word, its columns' output registers)
                for c, (lo, hi) in enumerate(self.columns):
                    # read through block RAM's own output register (on ECP5; elsewhere a flip-flop)
                    ram = RegisteredRam(hi - lo, self.bank_depth)
                    m.submodules[f"bank{b}_way{w}_col{c}"] = ram
                    m.d.comb += [ram.r_addr.eq(read_at[b][w][:low]), ram.r_en.eq(en), ram.o_en.eq(en)]
                    load(stored[lo:hi], ram.r_data)
                    # w1's copy: written again in a stall, which changes nothing (the word is the same)
                    m.d.comb += [ram.w_addr.eq(taken[b][w]["addr"][:low]), ram.w_data.eq(taken[b][w]["stored"][lo:hi]),
                                 ram.w_en.eq(taken[b][w]["en"])]
                    read.append(ram.r_data)
                if bank_tags is not None:  # (the key at stage 2, as its word is: taken with k2, below)
                    key = way_copy("key", b, w, self.tag_width)
                    m.d.comb += key.en.eq(en)
                    key_copies.append(key)
                    tag = fields(Cat(*read))[1]
                    step = TAG_CHUNK if copies and sw <= TAG_CHUNK_STATE else COMPARE_CHUNK
                    parts = [tag[c:c + step] == key.q[c:c + step] for c in range(0, self.tag_width, step)]
                    t = Signal(len(parts), name=f"bank{b}_way{w}_tagged", reset_less=True)
                    load(t, Cat(*parts))
                    bank_tags.append(t.all())
                if bank_expiry is not None:
                    below, equal = sliced(fields(Cat(*read))[2], self.now2)
                    e = Signal(2 * len(below), name=f"bank{b}_way{w}_expired", reset_less=True)
                    load(e, Cat(*below, *equal))
                    bank_expiry.append(e)
                row.append(q)
            bank_q.append(row)
            bank_used.append(row_used)

        # --- stages 1–4: the key, and its bucket as block RAM had it when the read was sampled ----------
        # (on a large die a key and its bucket have no reset: `v` says whether they hold one)
        v1, k1, i1 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        v2, k2, i2 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        v3, k3, i3 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        v4, k4, i4 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        # with `lag`, the key whose write is being formed is a stage behind the lookup, at stage 5 (6)
        v5, k5, i5 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        v6, k6, i6 = Signal(), Signal(kw, reset_less=bare), Signal(ib, reset_less=bare)
        stages = [(v3, i3, k3), (v4, i4, k4), (v5, i5, k5), (v6, i6, k6)]  # stages 3 to 6
        cands = self.candidates
        m.d.comb += [key.d.eq(tag_of(k1)) for key in key_copies]
        word4 = [Signal(ew, name=f"word4_way{w}") for w in range(W)]
        cw = self.cond_width
        cond4 = [Signal(cw, name=f"cond4_way{w}", reset_less=True) for w in range(W)] if cands else []
        # the newest write's conditions: the caller's for the key behind it, registered with it
        w0_cond = Signal(cw, name="w0_cond", reset_less=True)
        # (stall: nothing forwarded, so no write's conditions are ever picked)
        if cands and not self.lag and not self.stall:
            with m.If(self.en):
                m.d.sync += w0_cond.eq(self.next_cond)
        elif cands and not self.stall:  # (lag: computed at the lookup, from w0's state, for the tuple there)
            m.d.comb += w0_cond.eq(conditions_at(fields(w0["entry"])[0], 4))
        used4 = [Signal(name=f"used4_way{w}") for w in range(W)]
        tagged4 = [Signal(name=f"tagged4_way{w}") for w in range(W)]
        # Block RAM missed the writes ahead (six; seven with groups of banks), taken with and after the
        # read: whether each wrote this
        # bucket, and whether it was this key, is compared at stage 2 with the writes as they will be at
        # stage 3, registered, and registered again for stage 4.
        same_bucket = [Signal(name=f"fwd{j}") for j in range(forward)]
        same_key = [Signal(name=f"fwd{j}_key") for j in range(forward)]
        # after the next enabled edge: the key at stage 4, the write it forms, then the registered
        # writes (the swept buckets' among them: no key is at stage 2 while the table is swept)
        # (keys as their tags: a key is compared only with those in its bucket, where the tag identifies it)
        # (with `lag` the key one ahead is never of the bucket, by the caller's promise: the writes the
        # lookup sees are those of the keys two to `forward` + 1 ahead)
        # (lag 2: the keys one and two ahead never are; those three to `forward` + 2 ahead)
        forming = stages[self.lag:self.lag + 2]
        ahead = [(v, i, tag_of(k)) for v, i, k in forming] + \
            [(wr["valid"], wr["index"], wr["key"]) for wr in writes[:-2]]
        if self.stall:
            # No key ahead within the spacing is of the bucket: nothing is forwarded, and synthesis
            # leaves out what the flags, constant zero, would have picked.
            ahead = [(Const(0), i, k) for _, i, k in ahead]
        if self.spacing is not None:
            # The keys in flight that will be within the spacing of the key two ahead once it is
            # injected, newest first: the one injected now, those at stages 1 to 4 (5), then the writes.
            # (The key one ahead, in between, is `adjacent`'s.)
            flight = ([(self.inject, index0), (v1, i1), (v2, i2)] + [(v, i) for v, i, _ in stages[:2 + self.lag]]
                      + [(wr["valid"], wr["index"]) for wr in writes])[:self.spacing - 1]
            m.d.comb += [self.conflict.eq(Cat(*(v & (i == next_index) for v, i in flight)).any()),
                         self.conflict_held.eq(Cat(*(v & (i == index_ahead) for v, i in flight)).any())]
        # the key's bank's ways: whether each is in use and holds the key; the writes ahead: whether each
        # is to the key's bucket and was the key's
        used3 = [Signal(name=f"used3_way{w}") for w in range(W)]
        tagged3 = [Signal(name=f"tagged3_way{w}") for w in range(W)]
        word3 = []  # the key's bank's ways: the OR of every bank's (all zero but the key's)
        # The key at stages 2 and 3 equals the top's tuple registers there, which synthesis would merge
        # it with: one register fanning out across the die to the tag compares of every way of every
        # query, and to the spill FIFO (network's critical path: a 5.2 ns route; marathon's, direct-
        # indexed, where the bucket is the key). Each way's tag compare takes a copy of its own; the
        # compares with the writes ahead start a stage earlier, from stage 1's key (below).
        def copy_of(name, value, d):
            if not copies:
                return value
            copy = m.submodules[f"{Replica.PREFIX}{name}"] = Replica(len(value))
            m.d.comb += [copy.d.eq(d), copy.en.eq(self.en)]
            return copy.q
        for w in range(W):
            k3_tag = copy_of(f"key3_way{w}", tag_of(k3), tag_of(k2)) if self.tag_width and bank_tags is None else None
            word = Const(0, ew)
            for b in range(self.banks):
                word = word | bank_q[b][w]
            wd = Signal(ew, name=f"word3_way{w}")
            m.d.comb += wd.eq(word)
            word3.append(wd)
            _, tag, _, _ = fields(wd)
            # (in use: the OR of each bank's flag, decided beside the bank, not from the word's OR)
            if bank_tags is not None:  # (the OR of each bank's, as the flag)
                is_key = Cat(*(bank_tags[b * W + w] for b in range(self.banks))).any()
            else:
                is_key = tag == k3_tag if tag is not None else 1
            m.d.comb += [used3[w].eq(Cat(*(bank_used[b][w] for b in range(self.banks))).any()),
                         tagged3[w].eq(is_key)]
        bucket3 = [Signal(name=f"bucket3_ahead{j}") for j in range(forward)]
        key3 = [Signal(name=f"key3_ahead{j}") for j in range(forward)]
        # The writes two or more ahead are registers already at stage 2: whether each is the key's
        # (its bucket, its key, a way written) and which ways it touched are decided there too, so at
        # stage 3 the newest of them is picked from flip-flops; only the write one ahead (w0 then,
        # being formed now) is judged at stage 3. (On the UP5K the pick of the key's older state
        # through a chain of six LUTs, from bucket3 to older4_state, was network's critical path.)
        mine3r = {j: Signal(name=f"mine3_ahead{j}") for j in range(2, forward)}
        touch3r = {j: Signal(W, name=f"touch3_ahead{j}") for j in range(2, forward)}

        def mine_of(j, valid, same_index, same_key_):
            """Whether the write ``j`` ahead (two or more) is the key's: valid, its bucket and key, a way
            written (what mine3r takes)."""
            return valid & same_index & same_key_ & writes[j - 2]["ways"].any()

        def judged(j, valid, same_index, same_key_):
            """mine3r and touch3r of the write ``j`` ahead (``ahead[j]``: writes[j - 2] at stage 2)."""
            if j < 2:
                return []
            wr = writes[j - 2]
            return [mine3r[j].eq(mine_of(j, valid, same_index, same_key_)),
                    touch3r[j].eq((valid & same_index).replicate(W) & wr["ways"])]
        # (`lag` on a large die: what the older writes' select lines will be at stage 3, for copies of
        # them: the write one ahead's flag but for w0's ways, and mine3r's; see `older_copies`)
        older_next = None
        if copies:
            # On a large die the compares are started a stage earlier, in chunks: at stage 1, the key
            # and its bucket with what each of those ahead will be after the next enabled edge (what
            # it is at stage 2), a register per chunk; at stage 2 the chunks are joined with `valid`.
            # (Every register here moves on the same enabled edges. The key at stage 4 forms w0: no key
            # is at stage 1 while the table is swept, and a swept bucket's write is compared once it
            # is registered.)
            keys = [(i, k) for _, i, k in ([(v2, i2, k2)] + stages)[self.lag:self.lag + 3]]
            before = [(i, tag_of(k)) for i, k in keys] + [(wr["index"], wr["key"]) for wr in writes[:-3]]

            def chunked(name, a, b):
                parts = [a[c:c + COMPARE_CHUNK] == b[c:c + COMPARE_CHUNK] for c in range(0, len(a), COMPARE_CHUNK)]
                reg = Signal(len(parts), name=name, reset_less=True)
                with m.If(self.en):
                    m.d.sync += reg.eq(Cat(*parts))
                return reg.all()

            early = [(chunked(f"bucket2_ahead{j}", index, i1), chunked(f"key2_ahead{j}", key, tag_of(k1)) if self.tag_width
                      else Const(1)) for j, (index, key) in enumerate(before)]
            with m.If(self.en):
                for j, ((valid, _, _), (same_index, same_key_)) in enumerate(zip(ahead, early)):
                    m.d.sync += [bucket3[j].eq(valid & same_index), key3[j].eq(same_key_)]
                    m.d.sync += judged(j, valid, same_index, same_key_)
            if self.lag and not self.stall:
                older_next = ([ahead[1][0] & early[1][0] & early[1][1]] +
                              [mine_of(j, ahead[j][0], *early[j]) for j in range(2, forward)])
        else:  # (the UP5K: logic cells are short; the key's own registers)
            with m.If(self.en):
                for j, (valid, index, key) in enumerate(ahead):
                    # (direct-indexed, the bucket is the key: a write to it was the key's)
                    same_index, same_key_ = index == i2, (key == tag_of(k2) if self.tag_width else Const(1))
                    m.d.sync += [bucket3[j].eq(valid & same_index), key3[j].eq(same_key_)]
                    m.d.sync += judged(j, valid, same_index, same_key_)

        def newest_of(one, later, values, zero):
            """The value of the newest write ahead that is flagged: ``one`` the flag of the write one
            ahead (values[0]), ``later`` those of the writes two or more ahead (registers, newest first;
            values[1:]); ``zero`` if none. The later ones' priority is a gate each, from flip-flops."""
            rest = zero
            for f, v in zip(first(later), values[1:]):
                rest = rest | Mux(f, v, 0)
            return Mux(one, values[0], rest)

        def older_of(values, zero, lo=None, hi=None, copy=None):
            """The key's older write's ``values`` (bits [lo, hi)), picked by `older_one` and mine3r, or by
            ``copy`` of them (that flag and mine3r's flags, their priority taken after the copy)."""
            part = [v if lo is None else v[lo:hi] for v in values]
            if copy is None:
                return newest_of(older_one, [mine3r[j] for j in range(2, forward)], part, zero)
            return newest_of(copy.q[0], list(copy.q[1:]), part, zero)
        way_conds = [conditions_at(fields(word3[w])[0]) for w in range(W)] if cands else []
        with m.If(self.en):
            m.d.sync += [
                v1.eq(self.inject & ~sweeping), k1.eq(self.key), i1.eq(index0),
                v2.eq(v1), k2.eq(k1), i2.eq(i1),
                v3.eq(v2), k3.eq(k2), i3.eq(i2),
                v4.eq(v3), k4.eq(k3), i4.eq(i3),
            ]
            if self.lag:
                m.d.sync += [v5.eq(v4), k5.eq(k4), i5.eq(i4)]
            if self.lag == 2:
                m.d.sync += [v6.eq(v5), k6.eq(k5), i6.eq(i5)]
            m.d.sync += sel2.eq(1 << bank_of(i1))
            for w in range(W):
                m.d.sync += [word4[w].eq(word3[w]), used4[w].eq(used3[w]), tagged4[w].eq(tagged3[w])]
                if cands:  # the conditions of each way's state, for the tuple beside the key
                    m.d.sync += cond4[w].eq(way_conds[w])
            m.d.sync += [same_bucket[j].eq(bucket3[j]) for j in range(forward)]
            m.d.sync += [same_key[j].eq(key3[j]) for j in range(forward)]

        # --- stage 4: the key's entry ------------------------------------------------------------------
        epoch = None
        if self._period is not None:
            epoch = Signal(STAMP_BITS)
            ticks = Signal(range(self._period))
            with m.If(self.en):
                m.d.sync += ticks.eq(Mux(ticks == self._period - 1, 0, ticks + 1))
                with m.If(ticks == self._period - 1):
                    m.d.sync += epoch.eq(epoch + 1)

        stale_free = self._xw is None and self._period is None
        now3 = next_expiry = None
        if self._xw:
            now3 = Signal(self._xw, name="now3")  # WITHIN: the time of the key at stage 3
            # and the expiry of the key at stage 3, 4 (and 5, with `lag`): its time plus the window,
            # added at stage 2, so a write's expiry is a register, not an adder after the caller's tuple
            expiry_at = {k: Signal(self._xw, name=f"expiry{k}") for k in range(3, self.depth + 1)}
            with m.If(self.en):
                m.d.sync += [now3.eq(self.now2), expiry_at[3].eq(self.now2 + self.window)]
                m.d.sync += [expiry_at[k + 1].eq(expiry_at[k]) for k in range(3, self.depth)]
            next_expiry = expiry_at[self.depth]  # the placed key's, which the write it forms stores
        # With `lag` on a large die, the older write's select lines (`older_one`, and the priority of
        # those two or more ahead) pick its conditions: one flag register fanned out across the die
        # (mshape's critical path with the two-cycle update: 7.8 ns of its 10.2 were routes from
        # `key3_ahead1`). The conditions take a copy of their own of the flags the select lines come
        # from (`older_one`'s and mine3r's), decided a stage early (wired below, once w0's ways are
        # known) and moving with the registers they copy, and take their priority after it.
        # The older write's state (finance0's 563 bits, mshape's 902) is not picked from the writes'
        # registers at all: each enabled edge writes w0's state into a small LUT RAM (`history`; on
        # ECP5, TRELLIS_DPR16X4s) at `history_at`, so the write k ahead of w0 is at history_at - k, and
        # the state is read at an address decided a stage early, a copy of it per SELECT_CHUNK bits
        # (HISTORY_CHUNK with the three-cycle update) with whether the key's older write is w0 or an
        # older one (`history_read`; w0's is taken from its register). Picked from the writes, with
        # copies of the flags per chunk, the pick's inputs were six registers as wide as the state,
        # spread across the die by their other loads (block RAM's copies of the write, the conditions),
        # and its routes, from the copies and from the writes, were finance0's and mshape's critical
        # paths (7.1 and 7.9 ns of routes).
        # With WITHIN or `evict_after` too: the older write the state is read for is the same one (the
        # newest write ahead of the key's that wrote a way: `older_one` and mine3r), and whether the way
        # it wrote is still live is a flag of its own (`pick4_older`), not the state.
        use_history = older_next is not None and sw > SELECT_CHUNK
        older_copies, history, zero_half = [], [], False
        if use_history:
            # (deep enough for the writes forwarded: the oldest read is forward - 2 behind w0)
            history_at = Signal(range(1 << (forward - 1).bit_length()), name="history_at")
            for c in range(1 if cands and stale_free else 0):  # (the conditions')
                copy = m.submodules[f"{Replica.PREFIX}older{c}"] = Replica(forward - 1)
                m.d.comb += copy.en.eq(self.en)
                older_copies.append(copy)
            with m.If(self.en):
                m.d.sync += history_at.eq(history_at + 1)
            chunk = HISTORY_CHUNK if self.lag == 2 else SELECT_CHUNK
            # With the three-cycle update on a large die, the LUT RAM is twice as deep (a TRELLIS_DPR16X4
            # is 16 deep; the writes take half of it): an address in the half never written reads zero,
            # so where the key has no older write the read is already the zero the pick wants, with no
            # gate after the LUT RAM (finance0's path into `state5` at every seed of a112817: the copy's
            # address, the LUT RAM, that gate, the pick, 6.7-7.0 ns, four levels and their routes)
            zero_half = self.lag == 2 and copies
            depth = 1 << (len(history_at) + zero_half)
            for c in range(-(-sw // chunk)):
                lo, hi = c * chunk, min(sw, (c + 1) * chunk)
                mem = m.submodules[f"history{c}"] = Memory(shape=hi - lo, depth=depth, init=[])
                write, read = mem.write_port(), mem.read_port(domain="comb")
                # (the copy: whether the key's older write is w0, whether it is an older one, where)
                at = m.submodules[f"{Replica.PREFIX}history_read{c}"] = Replica(2 + len(history_at))
                # (with zero_half the copy's bit 1 is whether the key has no older write: the address's
                # top bit from the flip-flop itself, no inverter in front of the LUT RAM)
                address = Cat(at.q[2:], at.q[1]) if zero_half else at.q[2:]
                m.d.comb += [write.addr.eq(history_at), write.data.eq(fields(writes[0]["entry"])[0][lo:hi]),
                             write.en.eq(self.en), read.addr.eq(address), at.en.eq(self.en)]
                history.append((lo, hi, at, read.data))

        # Each way's flags as the lookup sees them: patched with the newest write (w0) if it touched the
        # way, else with the newest of the older writes ahead that did, else block RAM's. What the older
        # writes and block RAM say is decided a stage early and registered, from the writes' registers
        # and block RAM's word (whose OR across the banks has that stage to itself), so the lookup patches
        # the flags with w0 alone, not through a chain of six multiplexers. With WITHIN or `evict_after`,
        # whether each entry is stale is decided there too, against the key's time and the epoch as
        # they will be at the lookup: block RAM's word's, each older write's and w0's (as it is formed;
        # the writes' expiries a stage earlier still, against `now2`). The lookup then compares
        # nothing: finance2's 65-bit compare of an expiry, after a chain of seven multiplexers of each
        # way's entry, was in its update loop.
        older_any = [Signal(name=f"older4_way{w}") for w in range(W)]  # a write ahead but the newest touched it
        older_used = [Signal(name=f"older4_used_way{w}") for w in range(W)]  # the newest of those: its `keep`
        older_own = [Signal(name=f"older4_own_way{w}") for w in range(W)]  # and whether it was the key's
        older_stale = [Signal(name=f"older4_stale_way{w}") for w in range(W)]  # and whether its entry is stale
        stale4 = [Signal(name=f"stale4_way{w}") for w in range(W)]  # block RAM's entry is stale
        w0_stale = Signal(name="w0_stale")  # w0's entry is stale at the lookup of the key behind it
        used, own, live = [], [], []
        for w in range(W):
            sel = same_bucket[0] & writes[0]["ways"][w]
            u = Mux(sel, writes[0]["keep"], Mux(older_any[w], older_used[w], used4[w]))
            o = tagged4[w] if self.tag_width else Const(1)
            if not self.direct:  # (direct-indexed, a write to the key's bucket was the key's)
                o = Mux(sel, same_key[0], Mux(older_any[w], older_own[w], o))
            stale = Const(0) if stale_free else Mux(sel, w0_stale, Mux(older_any[w], older_stale[w], stale4[w]))
            us = Signal(name=f"way{w}_used")
            ow = Signal(name=f"way{w}_own")
            lv = Signal(name=f"way{w}_live")
            m.d.comb += [us.eq(u), ow.eq(us & o), lv.eq(us & ~stale)]
            used.append(us)
            own.append(ow)
            live.append(lv)

        def first(flags):
            """One-hot of the first set flag."""
            out, seen = [], Const(0)
            for f in flags:
                out.append(f & ~seen)
                seen = seen | f
            return out

        def older_conditions():
            """The older writes' conditions for the key at stage 3, in `older_of`'s order: the write one
            ahead's (w0 then) computed there; each write two or more ahead's a stage earlier, from that
            write's register then, for the tuple at stage 2, and registered (the writes and the tuples
            move on the same enabled edges): at stage 3 they are picked from flip-flops, and the routes
            from the writes' wide registers have a cycle of their own (mshape with the two-cycle update:
            3.3 ns from an older write into the comparators, then the pick)."""
            conds = [conditions_at(fields(writes[0]["entry"])[0])]
            for j in range(2, forward):
                early = Signal(cw, name=f"cond3_ahead{j}", reset_less=True)
                value = conditions_at(fields(writes[j - 2]["entry"])[0], 2)
                with m.If(self.en):
                    m.d.sync += early.eq(value)
                conds.append(early)
            return conds

        hits = first([own[w] & live[w] for w in range(W)])
        hit = Cat(*hits).any()
        # a key reuses its own stale entry before any other, so it is never held twice
        owns_stale = first([own[w] & ~live[w] for w in range(W)])
        frees = first([~live[w] for w in range(W)])
        reuse = Cat(*owns_stale).any()
        alloc = [Mux(reuse, owns_stale[w], frees[w]) for w in range(W)]
        free = Cat(*frees).any()
        # The key's state: the newest write of its own among the missed ones, else block RAM's word of
        # the way it hits. (A key is held at most once, so a hit on a way that a missed write touched is
        # a hit on the key's own newest write; only the state's select lines depend on the ways.)
        # The wide state is thus picked by flags from registers, not patched into every way.
        words = [fields(writes[j]["entry"])[0] for j in range(forward)] + [fields(word4[w])[0] for w in range(W)]
        state_out = Signal(sw)

        def drive_older_state(older_state):
            """Drive ``older_state``, the key's newest older write's state at stage 4 (zero if none): read
            from the LUT RAM where there is one, else picked from the writes' registers at stage 3."""
            if history and self.lag == 2:
                # (the three-cycle update: the lookup reads the older write's state from the LUT RAM
                # itself, every older write in it by then, at an address decided at stage 2 and
                # registered, the copies taking that register: the compares have a cycle to themselves,
                # the route to the copies its own)
                for lo, hi, at, data in history:
                    m.d.comb += older_state[lo:hi].eq(data if zero_half else Mux(at.q[1], data, 0))
            elif history:
                w0_state = fields(writes[0]["entry"])[0]
                for lo, hi, at, data in history:
                    with m.If(self.en):
                        m.d.sync += older_state[lo:hi].eq(Mux(at.q[0], w0_state[lo:hi], Mux(at.q[1], data, 0)))
            else:
                older_values = [fields(writes[j - 1]["entry"])[0] for j in range(1, forward)]
                with m.If(self.en):
                    m.d.sync += older_state.eq(older_of(older_values, Const(0, sw)))
        older_one = Signal()  # the write one ahead is the key's (set below; those two or more ahead: mine3r)
        if stale_free:
            # Nothing goes stale, so only the key itself changes its entry: its own newest write ahead is
            # its state (even one that cleared it: a zero vector is a fresh partition), else block RAM's
            # way that is in use, holds the key and no write ahead touched. Which write is decided a stage
            # early and registered, so the state's select lines come from flip-flops (a gate for the ways).
            # Only the newest write (w0, the update loop's own register) is picked at stage 4: the newest
            # older write of the key's is picked at stage 3 from the registers it is in then (not waiting
            # for the lookup that forms w0), and its state registered (zero if none); w0's, if the key's,
            # wins over it at stage 4, so the loop's multiplexer has three inputs, not forward + 1.
            newest_next = Signal()  # the key's own write is the one being formed (set below)
            older_state = Signal(sw, name="older4_state")
            pick_newest = Signal(name="pick4_write0")
            # direct-indexed, the one way is the key's: block RAM's word is picked when it is in use and
            # no write ahead touched it, decided at stage 3 beside used4 (one gate less in the loop)
            pick_bram = Signal(name="pick4_bram") if self.direct else None
            if self.direct:
                picks = [pick_bram]
            else:
                # hashed: each way's word is picked when it is in use, holds the key, and no older write
                # ahead touched it, decided at stage 3 beside used4 and tagged4 (set below). (Not by w0,
                # so stage 3 does not wait for the lookup that forms it: if w0 is the key's it is picked
                # instead; else it touched no way of the key's, as nothing goes stale: a way the key
                # holds, only the key writes.)
                picks = [Signal(name=f"pick4_way{w}") for w in range(W)]
            # (block RAM's ways; the older write's state is zero unless picked)
            newest, base, words = (pick_newest, words[0]), older_state, words[forward:]
            if self.stall:  # (block RAM's ways alone)
                newest, base = None, Const(0, sw)
            older_conds = older_conditions() if cands and not self.stall else None
            drive_older_state(older_state)
            with m.If(self.en):
                m.d.sync += pick_newest.eq(newest_next)
                if cands and self.stall:
                    cond_newest, cond_base, cond_words = None, Const(0, cw), cond4
                elif cands:
                    # and its conditions, each write's computed beside its own register and picked
                    # alike (picked first, the comparators would follow the picking): zero if none,
                    # as the state, since the ways' are ORed in. (Yosys' `share` pass merges their
                    # multipliers, if any, into one behind the pick: finance5's MIN(price) * 1005,
                    # 28 MULT18X18Ds rather than 48. Picked by masks, each kept its own, but nextpnr's
                    # estimate after placement moved by 3 % (28.5 → 29.4 MHz: the update loop's own
                    # conditions are as deep) and router1 stalled: as it is, measured.)
                    older_cond = Signal(cw, name="older4_cond", reset_less=True)
                    m.d.sync += older_cond.eq(older_of(older_conds, Const(0, cw),
                                                       copy=older_copies[-1] if older_copies else None))
                    cond_newest, cond_base, cond_words = w0_cond, older_cond, cond4
        else:  # a stale entry is no state: only the way the key hits, live, holds its state
            # The key's own newest write ahead is its state if the way it wrote is live (else it has
            # none): w0's, the older one's (the newest of them, read from the LUT RAM or picked at
            # stage 3 from registers, as above) or block RAM's word of the way the key holds, untouched by the
            # writes ahead. Which is decided at stage 3 and registered (below: the flags there are
            # registers or block RAM's word, and w0 is being formed), so, as without anything stale,
            # the state's select lines come from flip-flops. The older write's conditions are each
            # older write's, computed beside its register and picked alike, as above. (Computed once,
            # from the picked state, the picking was in front of the comparators: finance2's critical
            # path, 15.6 ns at 0a4cc39 from `mine3_ahead2` through the pick and a carry chain into
            # `older4_cond`. They were once computed once to save carry cells, while finance2's
            # conditions multiplied prices by constants; its scaled registers multiply nothing now.)
            # (The older write's select lines are not copied per SELECT_CHUNK bits here, as they are
            # without anything stale. Tried at 69aed97, with whether the write one ahead hit or had a
            # way to take copied and its `keep` register beside each copy: finance2 at seed 2, 83.9 MHz
            # against 92.6 without, its path then w0's conditions into `cond5`, and router1 slower on
            # every seed tried.)
            older_state = Signal(sw, name="older4_state")
            drive_older_state(older_state)
            pick_newest = Signal(name="pick4_write0")
            picks = [Signal(name="pick4_older")] + [Signal(name=f"pick4_way{w}") for w in range(W)]
            newest, base, words = (pick_newest, words[0]), Const(0, sw), [older_state] + words[forward:]
            if self.stall:  # (block RAM's ways alone)
                picks, newest, words = picks[1:], None, words[1:]
                if cands:
                    cond_newest, cond_base, cond_words = None, Const(0, cw), cond4
            elif cands:  # w0's conditions the caller's, the older write's picked at stage 3
                older_cond = Signal(cw, name="older4_cond", reset_less=True)
                value = older_of(older_conditions(), Const(0, cw))
                with m.If(self.en):
                    m.d.sync += older_cond.eq(value)
                cond_newest, cond_base, cond_words = w0_cond, Const(0, cw), [older_cond] + cond4
        def picked(selects, lo, hi):
            """Bits [lo, hi) of the key's state, picked by ``selects`` (newest's, then picks'; with
            ``stall`` picks' alone)."""
            part = base[lo:hi]
            for pick, word in zip(selects if newest is None else selects[1:], words):
                part = part | Mux(pick, word[lo:hi], 0)
            return part if newest is None else Mux(selects[0], newest[1][lo:hi], part)

        selects = picks if newest is None else [newest[0]] + picks
        # every select is a register; on a large die a wide state takes a copy of them per SELECT_CHUNK
        # bits (wired below, from what they take), so no select line reaches them all. (A copy per
        # HISTORY_CHUNK bits, beside the LUT RAM's read address, was tried: the selects' logic then fanned
        # out to 113 copies through 2.9-4.7 ns routes, mshape's path, 0.94x on the mean of seeds 1-3;
        # finance0 0.99x on seeds 1-6: bench/results/synth-rounds.md)
        select_copies = []
        if copies and sw > SELECT_CHUNK:
            for c in range(-(-sw // SELECT_CHUNK)):
                copy = m.submodules[f"{Replica.PREFIX}pick{c}"] = Replica(len(selects))
                m.d.comb += copy.en.eq(self.en)
                select_copies.append(copy)
            m.d.comb += state_out.eq(Cat(*(picked(list(copy.q), c * SELECT_CHUNK, min(sw, (c + 1) * SELECT_CHUNK))
                                           for c, copy in enumerate(select_copies))))
        else:
            m.d.comb += state_out.eq(picked(selects, 0, sw))
        cond_out = Const(0, 1)
        if cands:  # the conditions of that state, picked alike
            cond = cond_base
            for pick, word in zip(picks, cond_words):
                cond = cond | Mux(pick, word, 0)
            cond_out = cond if newest is None else Mux(newest[0], cond_newest, cond)
        # What the write takes of the lookup: at once, or (`lag`) registered at stage 5 with the key's
        # state, which the caller updates there; with `lag` 2 registered again at stage 6, with the
        # conditions of the key's state for its tuple, computed once between the two (the tuple at
        # stage 5). (The write's stamp: the epoch of its lookup.)
        def staged(value, name):
            reg = Signal(len(value), name=name, reset_less=name.startswith("state") or name.startswith("cond"))
            with m.If(self.en):
                m.d.sync += reg.eq(value)
            return reg
        stamp = epoch
        vw_, kw_, iw_ = v4, k4, i4
        cond_state = None  # (lag 2) the state the conditions read at stage 5, if not `state5`
        for stage, (v, k, i) in zip((5, 6), ((v5, k5, i5), (v6, k6, i6))[:self.lag]):
            if stage == 5 and cands:
                cond_out = staged(cond_out, "cond5")
            elif stage == 5 and cw:
                if copies and self._cond_bits:
                    # on a large die, a copy of the bits they read (a Replica: kept apart from `state5`),
                    # so the comparators and `cond6` are placed by what they read, not by the whole state
                    # (finance0 at 34fac55: `cond_in5`'s copy through a compare into `cond6`, 7.1 ns,
                    # 5.6 ns of it routes); the bits not read are zero there
                    read = m.submodules[f"{Replica.PREFIX}cond_state5"] = Replica(sum(hi - lo for lo, hi in self._cond_bits))
                    m.d.comb += [read.d.eq(Cat(*(state_out[lo:hi] for lo, hi in self._cond_bits))), read.en.eq(self.en)]
                    cond_state, at = Signal(sw, name="cond_state5"), 0
                    for lo, hi in self._cond_bits:
                        m.d.comb += cond_state[lo:hi].eq(read.q[at:at + hi - lo])
                        at += hi - lo
            elif stage == 6 and cw:
                cond_out = staged(conditions_at(state_out if cond_state is None else cond_state, 5), "cond6")
            hit, free = staged(hit, f"hit{stage}"), staged(free, f"free{stage}")
            hits = [staged(h, f"hit{stage}_way{w}") for w, h in enumerate(hits)]
            alloc = [staged(a, f"alloc{stage}_way{w}") for w, a in enumerate(alloc)]
            used = [staged(u, f"used{stage}_way{w}") for w, u in enumerate(used)]
            own = [staged(o, f"own{stage}_way{w}") for w, o in enumerate(own)]
            live = [staged(lv, f"live{stage}_way{w}") for w, lv in enumerate(live)]
            state_out = staged(state_out, f"state{stage}")
            stamp = staged(stamp, f"epoch{stage}") if stamp is not None else None
            vw_, kw_, iw_ = v, k, i
        if cw:
            m.d.comb += self.out_cond.eq(cond_out)
        m.d.comb += [
            self.out_valid.eq(vw_), self.out_key.eq(kw_), self.out_hit.eq(hit), self.out_free.eq(free),
            self.out_state.eq(state_out),
        ]

        # --- write back: the key's entry (or a free one) takes the next state, a cycle later -----------
        keep = self.next_state[:vw].any()
        if lean:  # (hit or free: the key's own way)
            target = [Const(1)]
        elif stale_free:
            # nothing is stale, so a free entry holds nothing: a key without one takes one even if
            # its state is empty (it stays free, as its vector is zero), and the entry written does
            # not wait for the core's next state (`keep` is only registered beside it)
            target = [Mux(hit, hits[w], alloc[w]) for w in range(W)]
        else:  # taking a stale entry evicts it: only for a state worth keeping
            target = [Mux(hit, hits[w], alloc[w] & keep) for w in range(W)]
        new_entry = Cat(self.next_state, *([tag_of(kw_)] if self.tag_width else []),
                        *([next_expiry] if self._xw else []), *([stamp] if self._period else []))
        writing = self.en & vw_
        was = Cat(*(target[w] & used[w] for w in range(W))).any()
        with m.If(self.en):
            m.d.sync += [w0["valid"].eq(vw_), w0["index"].eq(iw_), w0["ways"].eq(Cat(*target)),
                         w0["entry"].eq(new_entry), w0["key"].eq(tag_of(kw_)), w0["was"].eq(was)]
            if not lean:
                m.d.sync += w0["keep"].eq(keep)
            with m.If(sweeping):  # the swept bucket: every way cleared (no key is in flight)
                m.d.sync += [w0["valid"].eq(1), w0["index"].eq(sweep_at), w0["ways"].eq(-1), w0["was"].eq(0)]
                # A way is free by its stored `keep`, and a state by its vector: no lookup reads the
                # rest of a way's entry not in use, nor the registers of a state whose vector is zero
                # (each use of them is gated by a bit of the vector), which a swept write forwarded to
                # a key whose tag its `key` happens to hold is. So the sweep clears the vector alone, not
                # the entry, whose clear was a synchronous reset of hundreds of flip-flops from `en` and
                # `sweeping` (finance0's critical path once MIN and MAX were conditions: 6.6 ns of routes).
                m.d.sync += w0["entry"][:vw].eq(0)
                if not lean:
                    m.d.sync += w0["keep"].eq(0)
            for older, newer in zip(writes[1:], writes):
                m.d.sync += [older[f].eq(newer[f]) for f in older]
        if use_history:
            # (the write one ahead's flag at stage 3 takes w0's ways: those the key forming it targets.
            # A swept bucket's write is no key's, and no key is in flight while the table is swept.)
            # (mine3r's flags, not their priority: the priority's gates are taken beside each copy,
            # after it, so the one net into the copies across the die comes from two gates, not a
            # chain of them: finance0's critical path at 9e13792 was the priority, 7.8 ns)
            one_next, *mine_next = older_next
            one_next = one_next & Cat(*target).any()
            for copy in older_copies:
                m.d.comb += copy.d.eq(Cat(one_next, *mine_next))
            # the newest of the writes two or more ahead that is the key's (mine_next[i]: the write i
            # after w1 once the next enabled edge has moved the writes and history_at): then at
            # history_at - i, as history_at is now
            offset = Const(0, len(history_at))
            for i in reversed(range(len(mine_next))):
                offset = Mux(mine_next[i], i, offset)
            read_next = Signal(len(history_at), name="history_read_next")
            if self.lag == 2:
                # (the three-cycle update reads at the lookup, every older write in the LUT RAM by then:
                # w(j) is at history_at + 2 - j, as history_at is now. The address is registered, and
                # the copies take that register a stage later, so the compares' logic is not on the
                # routes to the copies across the die)
                m.d.comb += read_next.eq(Mux(one_next, history_at + 1, history_at - offset))
                read3 = Signal(len(history_at), name="history_read3", reset_less=True)
                # (with zero_half: whether none is the key's, so after a reset too it reads zero. Its name
                # stays `history_any3` either way: nextpnr's placement follows the netlist's names, and
                # named `history_none3` finance0 reached 141.7 MHz at seed 4, not 157.2)
                any3 = Signal(name="history_any3", init=int(zero_half))
                older = Cat(one_next, *mine_next).any()
                with m.If(self.en):
                    m.d.sync += [read3.eq(read_next), any3.eq(~older if zero_half else older)]
                for _, _, at, _ in history:
                    m.d.comb += at.d.eq(Cat(Const(0), any3, read3))
            else:
                m.d.comb += read_next.eq(history_at - offset)
                for _, _, at, _ in history:
                    m.d.comb += at.d.eq(Cat(one_next, Cat(*mine_next).any(), read_next))
        # The next key (at stage 3): the writes ahead of it as they will be once it is at stage 4, and for
        # each way the newest of them but the one being formed that touched it (those are registers now),
        # with its flags: the lookup patches with that, then w0
        ways3 = [Cat(*target)] + [wr["ways"] for wr in writes[:-1]]
        older3 = []  # per way: (the write one ahead touched it, those later did, either did, its keep, the key's)
        for w in range(W):
            one = bucket3[1] & ways3[1][w]
            later = [touch3r[j][w] for j in range(2, forward)]
            flags = (Cat(one, *later).any(),
                     newest_of(one, later, [writes[j - 1]["keep"] for j in range(1, forward)], Const(0)),
                     newest_of(one, later, [key3[j] for j in range(1, forward)], Const(0)))
            with m.If(self.en):
                m.d.sync += [older_any[w].eq(flags[0]), older_used[w].eq(flags[1]), older_own[w].eq(flags[2])]
            older3.append((one, later, *flags))
        if stale_free:  # the next key's picks
            # (target: a hit's or a free one. Nothing is stale, so "a hit or a free way" is "some way
            # free or the key's": the flags, without the first-of priorities that pick the way)
            placed = Cat(*(~used[w] | own[w] for w in range(W))).any()
            writes3 = [Const(1) if lean else placed] + [wr["ways"].any() for wr in writes[:-1]]
            mine3 = [bucket3[j] & key3[j] & writes3[j] for j in range(forward)]
            # a way a write ahead touched is the key's own write (then picked instead) or not the key's
            # (direct-indexed, w0's too: its one way is the key's, a constant; hashed, not w0's: see picks).
            # (Whether those two or more ahead touched each way, ORed into a register of its own a stage
            # early, took a LUT level off the picks' copies, and their paths left the late endpoints, but
            # the clock fell: finance5 0.93x on the mean of seeds 1-4, finance0 0.88x at seed 1, mshape
            # 0.99x on seeds 1 and 3: bench/results/synth-rounds.md)
            touched3 = [Cat(*(bucket3[j] & ways3[j][w] for j in range(0 if self.direct else 1, 2)),
                            *(touch3r[j][w] for j in range(2, forward))).any() for w in range(W)]
            m.d.comb += [newest_next.eq(mine3[0]), older_one.eq(mine3[1])]
            if self.direct:
                picks_next = [used3[0] & ~touched3[0]]
            else:
                picks_next = [used3[w] & tagged3[w] & ~touched3[w] for w in range(W)]
        else:  # the same, with entries that go stale
            # whether the write one ahead is the key's, as it will be once the key is at stage 4
            m.d.comb += older_one.eq(bucket3[1] & key3[1] & writes[0]["ways"].any())
            # the epoch at the lookup of the key now at stage 3 (after the next enabled edge)
            epoch_next = Mux(ticks == self._period - 1, epoch + 1, epoch)[:STAMP_BITS] if epoch is not None else None

            def expired(expiry, now):
                """Whether ``expiry`` is below ``now`` (on a large die in slices of EXPIRY_SLICE bits)."""
                return below_joined(*sliced(expiry, now)) if copies else expiry < now

            def stale_at(expiry, stamp, w=None):
                """Whether an entry of ``expiry`` and ``stamp`` is stale at that lookup (``w``: block RAM's word
                of way ``w``, whose expiry may have been compared beside the banks)."""
                out = Const(0)
                if expiry is not None and w is not None and bank_expiry is not None:
                    # (each bank's slices, zero but in the key's bank, ORed, then joined from the top)
                    n = len(bank_expiry[0]) // 2
                    flags = Const(0, 2 * n)
                    for b in range(self.banks):
                        flags = flags | bank_expiry[b * W + w]
                    out = out | below_joined(list(flags[:n]), list(flags[n:]))
                elif expiry is not None:
                    out = out | expired(expiry, now3)
                if stamp is not None:
                    out = out | (epoch_next - stamp)[STAMP_BITS - 1]  # older than half the epoch range
                return out
            # Every expiry is compared a stage early, against the time of the key at stage 2 (`now2`),
            # and registered (the writes, the keys and their times move on the same enabled edges), so
            # at stage 3 the flags are picked from flip-flops. w0 as it is formed: its expiry that of the
            # key placed (`next_expiry`), so a stage early the expiry of the key behind it; its stamp
            # this epoch (not stale an epoch later: only after half the epoch range). (finance2 at
            # bee76b1: the tuple's time through the window's adder and the compare with `now3`, then
            # the ways' flags, 11.5 ns.)
            w0_stale_next = Const(0)
            if self._xw:
                w0_stale_next = Signal(name="w0_stale3")
                with m.If(self.en):
                    m.d.sync += w0_stale_next.eq(expired(expiry_at[self.depth - 1], self.now2))
            # each older write's, its expiry from the register it was in a stage earlier: the write one
            # ahead's from w0 as it was formed (the expiry placed; a swept bucket's write stores 0
            # instead, but it keeps nothing, so whether it is stale is never read), each write two or
            # more ahead's from the write before it (finance2 at 6fa89db: `now` through the 65-bit
            # compares of the older writes' expiries and then the flags of the ways, 14.4 ns)
            expiries_before = [next_expiry] + [fields(wr["entry"])[2] for wr in writes[:forward - 2]]
            older_stale_of = []
            for j in range(1, forward):
                stale = stale_at(None, fields(writes[j - 1]["entry"])[3])
                if self._xw:
                    early = Signal(name=f"stale3_ahead{j}")
                    with m.If(self.en):
                        m.d.sync += early.eq(expired(expiries_before[j - 1], self.now2))
                    stale = stale | early
                older_stale_of.append(stale)
            own_live3 = []
            for w, (one, later, touched, u, o) in enumerate(older3):
                stale_older = newest_of(one, later, older_stale_of, Const(0))
                stale_bram = stale_at(*fields(word3[w])[2:], w=w)
                with m.If(self.en):
                    m.d.sync += [older_stale[w].eq(stale_older), stale4[w].eq(stale_bram)]
                # the way's flags, as the lookup will see them but for w0
                tag_ok = tagged3[w] if self.tag_width else Const(1)
                own_live3.append(Mux(touched, u & o & ~stale_older, used3[w] & tag_ok & ~stale_bram))
            # w0, formed now, is the key's and live at its lookup (the key's entry then is w0's); else a
            # way w0 does not touch, where the key is held, live: the newest older write's if one touched
            # it (the key's own, as only its own writes leave a way it holds), else block RAM's word.
            # (A key is held at most once: see `hits`.)
            touched0 = [bucket3[0] & ways3[0][w] for w in range(W)]
            older_any3 = [touched for _, _, touched, _, _ in older3]
            newest_next = bucket3[0] & key3[0] & keep & Cat(*target).any() & ~w0_stale_next
            picks_next = [Cat(*(~touched0[w] & older_any3[w] & own_live3[w] for w in range(W))).any()] + \
                [~touched0[w] & ~older_any3[w] & own_live3[w] for w in range(W)]
            if self.stall:  # (no older write: block RAM's ways alone)
                picks_next = picks_next[1:]
            with m.If(self.en):
                m.d.sync += [w0_stale.eq(w0_stale_next), pick_newest.eq(newest_next)]
        with m.If(self.en):
            m.d.sync += [pick.eq(d) for pick, d in zip(picks, picks_next)]
        for copy in select_copies:  # (each moves with the registers it copies)
            m.d.comb += copy.d.eq(Cat(*picks_next) if newest is None else Cat(newest_next, *picks_next))
        # a stale entry (another key's, or the key's own) taken over or cleared: its state is lost
        # (registered: the lookup's long path ends here, not in the caller's counter). Without WITHIN
        # or `evict_after` nothing goes stale: `evicted` stays 0 (and the caller's counter with it,
        # which synthesis then leaves out; on the UP5K its adder was marathon's critical path)
        if not stale_free:
            m.d.sync += self.evicted.eq(writing & Cat(*(target[w] & used[w] & ~live[w] for w in range(W))).any())

        # as block RAM takes a write, from its registers: whether anything is in the table, and how
        # many entries hold a non-zero vector
        committing = self.en & w0["valid"] & w0["ways"].any()
        with m.If(committing & w0["keep"]):
            m.d.sync += dirty.eq(1)
        count = Signal(range(self.entries + 1))
        m.d.comb += self.occupied.eq(count)
        with m.If(sweeping):
            m.d.sync += count.eq(0)
        with m.Elif(committing):
            m.d.sync += count.eq(count + w0["keep"] - w0["was"])
        return m
