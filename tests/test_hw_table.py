"""The table partitioner (block RAM, one key per cycle) against a software model of it, in
``amaranth.sim``: back-to-back keys, bucket collisions, full buckets, stalls, WITHIN expiry,
the reset sweep."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Fragment, Module, Mux, ResetInserter, Signal
from amaranth.sim import Simulator
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cepc.hw import sizing
from cepc.hw.ecp5 import dp16kd_blocks
from cepc.hw.layouts import tuple_layout
from cepc.hw.nfa_core import PartialMatchCore
from cepc.hw.partition import TablePartitioner
from cepc.hw.partition.table import (
    BANK_DEPTH,
    COMPARE_CHUNK,
    DEPTH,
    FORWARD,
    STAMP_BITS,
    TAG_CHUNK_STATE,
    h3,
    h3_matrix,
    quotient_tag,
)
from cepc.hw.replica import Replica
from cepc.hw.top import table_partitioner
from cepc.lang.check import check
from cepc.lang.parse import parse_file
from cepc.nfa.lower import lower

import hwsim


class Model:
    """What the table holds: per bucket, up to ``ways`` keys with a non-zero state."""

    def __init__(self, dut: TablePartitioner):
        self.dut = dut
        self.buckets: dict[int, dict[int, int]] = {}

    def lookup(self, key: int) -> tuple[int, bool, bool]:
        bucket = self.buckets.get(self.dut.index(key), {})
        return bucket.get(key, 0), key in bucket, len(bucket) < self.dut.ways

    def store(self, key: int, state: int) -> None:
        bucket = self.buckets.setdefault(self.dut.index(key), {})
        if state:
            if key in bucket or len(bucket) < self.dut.ways:
                bucket[key] = state
        else:
            bucket.pop(key, None)


class WithinModel:
    """A table whose entries go stale (WITHIN): per bucket, ``ways`` slots of (in use, key, state,
    expiry), as the hardware picks them: the first way holding the key live is its hit; else a
    state worth keeping takes the key's own stale way, else the first way not live (unused or
    stale); a stale entry taken over is evicted."""

    def __init__(self, dut: TablePartitioner):
        self.dut = dut
        self.buckets: dict[int, list[list]] = {}

    def flags(self, key: int, now: int, epoch: int):
        ways = self.buckets.setdefault(self.dut.index(key), [[False, None, 0, 0, 0] for _ in range(self.dut.ways)])
        own = [u and k == key for u, k, _, _, _ in ways]
        # (--evict-after: stale once older than half the epoch range)
        live = [u and not e < now and not (epoch - stamp) % (1 << STAMP_BITS) >= 1 << (STAMP_BITS - 1)
                for u, _, _, e, stamp in ways]
        return ways, own, live

    def lookup(self, key: int, now: int, epoch: int = 0) -> tuple[int, bool, bool]:
        ways, own, live = self.flags(key, now, epoch)
        hits = [w for w in range(len(ways)) if own[w] and live[w]]
        return (ways[hits[0]][2] if hits else 0), bool(hits), not all(live)

    def store(self, key: int, state: int, now: int, expiry: int, epoch: int = 0) -> bool:
        """Writes the key's next state; whether a stale entry was evicted."""
        ways, own, live = self.flags(key, now, epoch)
        hits = [w for w in range(len(ways)) if own[w] and live[w]]
        if hits:
            target = hits[0]
        elif not state:
            return False
        else:
            mine = [w for w in range(len(ways)) if own[w] and not live[w]]
            free = [w for w in range(len(ways)) if not live[w]]
            target = (mine or free or [None])[0]
            if target is None:  # no way for it: dropped
                return False
        evicted = ways[target][0] and not live[target]
        ways[target] = [bool(state), key, state, expiry, epoch]
        return evicted

    def occupied(self) -> int:
        return sum(ways_[0] for ways in self.buckets.values() for ways_ in ways)


class Ahead(Elaboratable):
    """A table wired as the top wires it: ``next_key`` is its key two enabled cycles ahead (the key
    and ``inject`` given here reach the table two enabled cycles later), and ``en_next`` is ``en``
    a cycle ahead (``en`` given here is the table's after the next edge). With the two-cycle update
    (``lag``) it keeps a key of the bucket of the one just before back for a cycle, as the top does
    (``ready`` low: the key given is not taken)."""

    def __init__(self, dut: TablePartitioner, platform=None):
        assert dut.early_key in (0, 2)
        self.dut, self.platform = dut, platform
        self.key, self.inject, self.en = Signal(len(dut.key)), Signal(), Signal(init=1)
        # WITHIN: the key's time, carried beside it as the top carries its tuple: the table reads the
        # time at stage 2 (now2)
        self.time = Signal(len(dut.now2))
        self.ready = Signal()

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        if self.platform is None:
            m.submodules.dut = dut
        else:  # the table as it is built for that platform, its submodules too (block RAM's shape)
            m.submodules.dut = hwsim.OnPlatform(dut, self.platform)
        if dut.en_ahead:
            en = Signal(init=1)
            m.d.sync += en.eq(self.en)
            m.d.comb += [dut.en.eq(en), dut.en_next.eq(self.en)]
        else:
            m.d.comb += dut.en.eq(self.en)
        time = self.time
        if dut.early_key == 2:
            line = [(Signal(len(dut.key), name=f"key{i}"), Signal(name=f"inject{i}"), Signal(len(time), name=f"time{i}"))
                    for i in range(2)]
            # (lag) the keys at line[0] and line[1] share a bucket: line[0]'s waits a cycle, line[1]
            # gets a bubble. Registered, as the top does, from the key taken into line[0] and the one
            # there now, which the table compares (`adjacent`); with lag 2 also while a key in flight
            # within the table's spacing (the one injected before line[1]'s) shares it (`conflict`;
            # `conflict_held`, for the key held)
            hold = Signal()
            if dut.lag:
                spaced = dut.spacing is not None
                taken = self.inject & self.ready & (line[0][1] & dut.adjacent | (dut.conflict if spaced else 0))
                with m.If(dut.en):
                    m.d.sync += hold.eq(Mux(hold, dut.conflict_held if spaced else 0, taken))
                m.d.comb += dut.hold.eq(hold)
            m.d.comb += self.ready.eq(~hold)
            with m.If(dut.en):
                with m.If(~hold):
                    m.d.sync += [line[0][0].eq(self.key), line[0][1].eq(self.inject), line[0][2].eq(self.time)]
                m.d.sync += [line[1][0].eq(line[0][0]), line[1][1].eq(line[0][1] & ~hold), line[1][2].eq(line[0][2])]
            m.d.comb += [dut.key.eq(line[1][0]), dut.inject.eq(line[1][1])]
            if dut.given_index:  # (its bucket, as the top gives it from a register of its own)
                m.d.comb += dut.next_index.eq(dut.bucket_of(self.key))
            else:
                m.d.comb += dut.next_key.eq(self.key)
            time = line[1][2]
        else:
            m.d.comb += [dut.key.eq(self.key), dut.inject.eq(self.inject), self.ready.eq(1)]
        times = [Signal(len(time), name=f"time_stage{i}") for i in range(1, dut.depth + 1)]  # beside k1 … k4 (k5)
        with m.If(dut.en):
            m.d.sync += [t.eq(d) for t, d in zip(times, [time] + times[:-1])]
        m.d.comb += dut.now2.eq(times[DEPTH - 3])  # (the time at stage 2)
        return m


def submodule_names(dut: TablePartitioner) -> set[str]:
    """The names of the table's submodules as it elaborates with no platform (a large die's copies)."""
    return {name for _, name, _ in Fragment.get(dut, None).subfragments}


def drive(dut: TablePartitioner, keys: list[int], update, stall: float = 0.0, seed: int = 0, platform=None,
          times: list[int] | None = None):
    """Inject ``keys`` one per enabled cycle (``en`` drops at random); at the output apply
    ``update(key, state) -> next`` and check hit/free/state against the model. A table that takes
    its key or ``en`` ahead gets them through :class:`Ahead`. With ``times`` (WITHIN), each key's
    time, its entry expiring the table's ``window`` after it, checked against :class:`WithinModel` (and so is
    ``evicted``); so is a table with ``evict_after`` (given no times, every key's time is 0)."""
    top = Ahead(dut, platform)
    stales = times is not None or dut._period is not None
    if stales and times is None:
        times = [0] * len(keys)
    model = WithinModel(dut) if stales else Model(dut)
    edges = 0  # enabled edges: the epoch of --evict-after is a count of them
    evictions = []  # (WITHIN) whether each write evicted a stale entry, in the model and in the table
    rng = random.Random(seed)
    seen = []
    pending = list(keys)

    async def bench(ctx):
        nonlocal edges
        cycles = 0
        en_now = True  # the table's `en` in this cycle (set a cycle ahead when it takes `en_next`)
        while len(seen) < len(keys):
            en = rng.random() >= stall
            ctx.set(top.en, en)
            if dut.en_ahead:
                en, en_now = en_now, en
            if pending and ctx.get(dut.slot):
                ctx.set(top.inject, 1)
                ctx.set(top.key, pending[0])
                if times is not None:
                    ctx.set(top.time, times[len(keys) - len(pending)])
                if en and ctx.get(top.ready):
                    pending.pop(0)
            else:
                ctx.set(top.inject, 0)
            writing = False
            if ctx.get(dut.out_valid) and en:
                k, s, h, f = (ctx.get(dut.out_key), ctx.get(dut.out_state), ctx.get(dut.out_hit),
                              ctx.get(dut.out_free))
                # (the epoch of the lookup: with `lag`, an enabled edge before the write's stage)
                epoch = ((edges - dut.lag) // dut._period) % (1 << STAMP_BITS) if dut._period else 0
                if not stales:
                    assert (s, bool(h), bool(f)) == model.lookup(k), f"key {k} at tuple {len(seen)}"
                else:
                    now = times[len(seen)]
                    assert (s, bool(h), bool(f)) == model.lookup(k, now, epoch), \
                        f"key {k} at tuple {len(seen)}, time {now}, epoch {epoch}"
                nxt = update(k, s)
                ctx.set(dut.next_state, nxt)
                if not stales:
                    model.store(k, nxt)
                else:
                    evictions.append([model.store(k, nxt, now, now + dut.window, epoch)])
                    writing = True
                seen.append((k, s, h, f, nxt))
            await ctx.tick()
            edges += en
            if writing:  # (registered: the cycle after the lookup)
                evictions[-1].append(bool(ctx.get(dut.evicted)))
            cycles += 1
            assert cycles < 20 * len(keys) + 50
        ctx.set(top.inject, 0)
        ctx.set(top.en, 1)
        await ctx.tick()  # block RAM takes the last write (and counts it) in the next enabled cycle
        if dut.en_ahead:
            await ctx.tick()
        seen.append(ctx.get(dut.occupied))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    occupied = seen.pop()
    if not stales:
        assert occupied == sum(len(b) for b in model.buckets.values())
    else:
        assert occupied == model.occupied()
        assert [x[0] for x in evictions] == [x[1] for x in evictions]
    return seen, model


def count_up(key: int, state: int) -> int:
    return (state + key + 1) & 0xFF or 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=80), st.sampled_from([4, 8, 16, 64]),
       st.sampled_from([1, 2, 4]), st.floats(0, 0.5), st.integers(0, 1000))
def test_hashed_table_equals_the_model(keys, entries, ways, stall, seed):
    rng = random.Random(seed)
    table = {}

    def update(key, state):  # grow, or forget the key now and then
        table[key] = 0 if rng.random() < 0.2 else count_up(key, state)
        return table[key]

    dut = TablePartitioner(entries, 8, 8, ways=ways)
    assert not dut.direct
    drive(dut, keys, update, stall, seed)


@pytest.mark.parametrize("ways, lag", [(2, 1), (4, 2)])
def test_a_hashed_table_of_wide_states_tells_keys_one_tag_bit_apart(ways, lag):
    # the two- and three-cycle updates compare each way's tag beside block RAM (on a large die, as here):
    # a state wider than TAG_CHUNK_STATE (mshape's 902 bits) in COMPARE_CHUNK-bit chunks, a narrower one
    # in TAG_CHUNK-bit chunks (the other tests' tables).
    # Keys of one bucket whose tags differ in one bit, for every bit, each pair in turn: a bit left out
    # of the compare hands one key the other's state
    dut = TablePartitioner(16, 12, TAG_CHUNK_STATE + 8, ways=ways, early_key=2, en_ahead=True, lag=lag)
    assert not dut.direct and dut.tag_width > COMPARE_CHUNK

    def tag(key):
        return sum((key >> b & 1) << i for i, b in enumerate(dut.tag_bits))

    bucket = {key: h3(key, dut.hash_rows) for key in range(1 << 12)}
    by_bucket = {}
    for key, b in bucket.items():
        by_bucket.setdefault(b, []).append(key)
    keys, pairs = [], []
    for i in range(dut.tag_width):
        first, other = next((k, o) for group in by_bucket.values() for k in group for o in group
                            if tag(k) ^ tag(o) == 1 << i)
        pairs += [first, other]
        # (each visit apart from the other by more keys than the writes in flight, so that the key's
        # bucket comes from block RAM, tags and all, not forwarded from a write whose whole key is compared)
        fill = [k for k, b in bucket.items() if b != bucket[first]][:FORWARD + 2]
        for key in (first, other, first, other):
            keys += [key, *fill]
    visits = {}

    def update(key, state):  # each of a pair stored at its first visit and freed at its second
        visits[key] = visits.get(key, 0) + 1
        return count_up(key, state) | key << (TAG_CHUNK_STATE - 8) if key in pairs and visits[key] == 1 else 0

    drive(dut, keys, update, 0.2, 7)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=120), st.sampled_from([1, 2, 4]), st.sampled_from([2, 4, 8]),
       st.floats(0, 0.5), st.integers(0, 1000))
def test_a_table_cut_into_banks_equals_the_model(keys, ways, depth, stall, seed):
    # several banks, each a block RAM deep: the bank's output register, then the OR over banks
    rng = random.Random(seed)

    def update(key, state):
        return 0 if rng.random() < 0.2 else count_up(key, state)

    dut = TablePartitioner(64, 9, 8, ways=ways, bank_depth=depth)
    assert dut.banks == dut.buckets // depth > 1
    drive(dut, keys, update, stall, seed)


Ice40 = hwsim.Ice40  # the UP5K: the table uses no copies beside its banks


@pytest.mark.parametrize("ways, entries, depth, stall, seed, platform", [
    (1, 64, 4, 0.0, 1, None), (2, 64, 4, 0.3, 2, None), (4, 64, 4, 0.5, 3, None), (4, 32, 4, 0.2, 4, None),
    (1, 512, 64, 0.3, 5, None), (2, 64, 4, 0.3, 6, Ice40()), (1, 512, 64, 0.3, 7, Ice40()),
    # more than GROUP_BANKS banks: the write reaches them through a copy per group, a cycle later
    (1, 512, 16, 0.3, 8, None), (2, 256, 4, 0.4, 9, None), (1, 512, 16, 0.3, 10, Ice40())])
def test_a_table_given_its_key_and_en_ahead_equals_the_model(ways, entries, depth, stall, seed, platform):
    # as the top wires it: the bucket hashed into a register two stages ahead, then copied beside
    # each bank (Replica) for its read address, and `en` copied beside each bank from `en_next`;
    # hashed, and direct (512 entries for 9-bit keys)
    rng = random.Random(seed)
    keys = [rng.choice([rng.randrange(300), rng.randrange(8)]) for _ in range(400)]

    def update(key, state):
        return 0 if rng.random() < 0.2 else count_up(key, state)

    dut = TablePartitioner(entries, 9, 8, ways=ways, bank_depth=depth, early_key=2, en_ahead=True)
    assert dut.banks > 1 and dut.direct == (entries == 512)
    drive(dut, keys, update, stall, seed, platform)


@pytest.mark.parametrize("ways, entries, depth, stall, seed", [
    (1, 512, 512, 0.3, 11), (2, 64, 32, 0.0, 12), (4, 64, 4, 0.4, 13), (4, 256, 64, 0.2, 14), (1, 512, 64, 0.3, 15)])
def test_a_relayed_write_equals_the_model(ways, entries, depth, stall, seed):
    # a partial-match core's table: the newest write reaches a few banks (one to four) through a
    # copy of its own, as with many banks, and block RAM takes it a cycle later: one write more to
    # forward. Back-to-back keys of one bucket and a few hot keys make that write the one a key needs.
    rng = random.Random(seed)
    keys = [rng.choice([rng.randrange(300), rng.randrange(4), 7]) for _ in range(400)]

    def update(key, state):
        return 0 if rng.random() < 0.2 else count_up(key, state)

    dut = TablePartitioner(entries, 9, 8, ways=ways, bank_depth=depth, early_key=2, en_ahead=True, relay=True)
    assert dut.banks <= 8 and dut.direct == (entries == 512)
    names = submodule_names(dut)
    assert f"{Replica.PREFIX}write_group0" in names and f"{Replica.PREFIX}write_group1" not in names
    drive(dut, keys, update, stall, seed)


def test_the_top_relays_the_write_of_partial_match_queries_only():
    # a partial-match core's update is the long loop through the newest write: its table relays that
    # write to the banks; an NFA's (marathon, network) does not, and forwards no write more
    root = Path(__file__).resolve().parent.parent
    for name, tracks in [("mshape/mshape.sql", True), ("finance/finance2/finance2.sql", True),
                         ("marathon/marathon.sql", False), ("network/network.sql", False)]:
        design = lower(check(parse_file(root / "examples" / name)))
        q = design.queries[0]
        assert q.tracks_matches == tracks
        core = PartialMatchCore(q, tuple_layout(design.tuple)) if tracks else None
        if core is not None:
            core._MustUse__silence = True  # (only its conditions are read: never elaborated here)
        dut = table_partitioner(q, design.tuple, 1024, core=core)
        assert dut.relay == tracks and (f"{Replica.PREFIX}write_group0" in submodule_names(dut)) == tracks, name


def test_a_direct_table_cut_into_banks_and_columns_equals_the_model():
    # 1,100-bit states: each way is split into columns of at most COLUMN_BITS
    dut = TablePartitioner(1 << 6, 6, 1100, vector_width=8, bank_depth=16)
    assert dut.direct and dut.banks == 4 and len(dut.columns) == 3
    keys = [random.Random(2).randrange(64) for _ in range(300)]

    def grow(key, state):  # all 1,100 bits move; bit 0 keeps the vector non-zero
        return (state * 3 + key + 1) % (1 << 1100) | 1

    seen, _ = drive(dut, keys, grow, stall=0.2, seed=2)
    assert all(h or f for _, _, h, f, _ in seen)


def test_banks_are_one_block_ram_at_its_deepest():
    dut = TablePartitioner(1 << 16, 16, 9)  # marathon's direct table: 4 banks of 16,384 × 1 blocks
    dut._MustUse__silence = True
    assert (dut.direct, dut.banks, dut.bank_depth) == (True, 4, BANK_DEPTH)
    dut = TablePartitioner(2048, 16, 9)  # a shallower table is one bank
    dut._MustUse__silence = True
    assert (dut.banks, dut.bank_depth) == (1, 512)


def test_direct_table_holds_every_key_and_never_drops():
    dut = TablePartitioner(1 << 8, 8, 8)
    assert dut.direct and dut.ways == 1 and dut.entries == 256
    keys = [random.Random(1).randrange(256) for _ in range(600)]
    seen, model = drive(dut, keys, count_up, stall=0.3)
    assert all(f or h for _, _, h, f, _ in seen)


@pytest.mark.parametrize("pattern", ["same", "alternating", "colliding"])
def test_back_to_back_keys_see_each_others_updates(pattern):
    # one key every cycle: each tuple must see the state the tuple before it just wrote
    dut = TablePartitioner(64, 16, 8, ways=4)
    if pattern == "same":
        keys = [7] * 30
    elif pattern == "alternating":
        keys = [7, 9] * 15
    else:  # keys of one bucket, one after the other: forwarding of whole buckets
        bucket = dut.index(7)
        same = [k for k in range(1, 5000) if dut.index(k) == bucket][:4]
        keys = same * 8
    seen, model = drive(dut, keys, count_up)
    states = {}
    for k, s, h, _, nxt in seen:
        assert s == states.get(k, 0) and bool(h) == (k in states)
        states[k] = nxt


def test_a_full_bucket_turns_the_fifth_key_away():
    dut = TablePartitioner(8, 16, 8, ways=4)
    bucket = dut.index(1)
    keys = [k for k in range(1, 5000) if dut.index(k) == bucket][:5]
    seen, model = drive(dut, keys + keys, lambda k, s: 1)
    fifth = seen[4]
    assert fifth[0] == keys[4] and not fifth[2] and not fifth[3]  # neither hit nor free: dropped
    assert all(h for _, _, h, _, _ in seen[5:9])  # the first four keep their entries


@pytest.mark.filterwarnings("ignore:.*created but never used")  # (the tables that refused to be built)
@pytest.mark.parametrize("window", [None, 1 << 15])
def test_within_needs_a_window_a_time_plus_it_cannot_wrap(window):
    # a 16-bit expiry is a 15-bit time plus the window
    with pytest.raises(ValueError, match="WITHIN's table needs a window of 0 to 32767"):
        TablePartitioner(4, 8, 4, ways=4, expiry_width=16, window=window)
    gc.collect()  # (its warning, here under the filter, not in the next test)


def test_within_frees_expired_entries_for_others():
    dut = TablePartitioner(4, 8, 4, ways=4, expiry_width=16, window=10)
    same = [k for k in range(256) if dut.index(k) == dut.index(1)][:6]
    # four keys fill a bucket, a fifth finds it full, a sixth comes after their windows
    seen, model = drive(dut, same, lambda key, state: 1, times=[0, 1, 2, 3, 4, 50])
    assert seen[4][:4] == (same[4], 0, 0, 0)  # bucket full, nothing expired yet: dropped
    assert seen[5][:4] == (same[5], 0, 0, 1)  # at time 50 every entry has expired: one is reclaimed
    assert model.occupied() == 4


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(4, 1), (16, 2), (16, 4), (64, 4), (256, 1)]),
       st.sampled_from([0.0, 0.3]), st.sampled_from([0, 1, 3, 8]), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([0, 1, 2]), st.booleans())
# (always: times across 2**16 with the two- and three-cycle updates on a large die, a state wide and narrow,
# and a window long enough that entries written before 2**16 expire after it and are read from block RAM
# before it)
@example(seed=5, shape=(16, 4), stall=0.0, window=300, ahead=True, ice40=False, wide=True, lag=2, late=True)
@example(seed=6, shape=(64, 4), stall=0.3, window=200, ahead=True, ice40=False, wide=False, lag=1, late=True)
@example(seed=7, shape=(16, 2), stall=0.0, window=8, ahead=True, ice40=False, wide=False, lag=2, late=True)
def test_a_table_whose_entries_expire_equals_the_model(seed, shape, stall, window, ahead, ice40, wide, lag, late):
    # WITHIN: whether an entry is stale is decided a stage before the lookup, from block RAM's word,
    # each older write and the newest as it is formed; keys of a few buckets back to back, times that
    # mostly rise (and now and then fall), entries cleared now and then, so that keys find their own
    # entries live and stale, others' stale entries to take, and full buckets; with the key ahead,
    # also with the two- and three-cycle updates (`lag` 1, 2). `late`: 24-bit times that cross 2**16, so
    # that an expiry and a time differ in both of the 16-bit slices they are compared in on a large die
    rng = random.Random(seed)
    entries, ways = shape
    hot = [rng.randrange(256) for _ in range(6)]
    keys = [rng.choice(hot) if rng.random() < 0.7 else rng.randrange(256) for _ in range(150)]
    times, t = [], (1 << 16) - 250 if late else 100
    for _ in keys:
        t = max(0, t + rng.choice([0, 0, 1, 1, 2, 5, 12, -3]))
        times.append(t)

    def update(key, state):  # (wide: a state of 100 bits, all moving, whose select lines are copied)
        if rng.random() < 0.15:
            return 0
        return (state * 3 + key + 1) % (1 << 100) | 1 if wide else count_up(key, state)

    dut = TablePartitioner(entries, 8, 100 if wide else 8, vector_width=8, ways=ways, expiry_width=24 if late else 12,
                           window=window,
                           bank_depth=16 if entries > 16 else None, early_key=2 if ahead else 0, en_ahead=ahead,
                           relay=ahead and entries > 16, lag=lag if ahead else 0)
    seen, _ = drive(dut, keys, update, stall, seed, Ice40() if ice40 else None, times=times)
    assert len(seen) == len(keys)


@pytest.mark.parametrize("entries, ways, ahead, stall, evict_after, within, lag, width", [
    (8, 4, False, 0.0, 30, False, False, 8), (8, 2, True, 0.2, 30, False, False, 8), (256, 1, True, 0.1, 30, False, False, 8),
    (16, 1, False, 0.3, 30, False, False, 8),
    (8, 4, True, 0.1, 4096, False, False, 8),  # an epoch of two enabled cycles
    (8, 2, False, 0.1, 30, True, False, 8), (64, 4, True, 0.2, 30, True, False, 8),  # and WITHIN beside it
    # the two-cycle update: the write stamped with its lookup's epoch
    (8, 2, True, 0.2, 30, False, True, 8), (8, 4, True, 0.1, 4096, False, True, 8), (64, 4, True, 0.2, 30, True, True, 8),
    # the three-cycle update: staged twice
    (8, 2, True, 0.2, 30, False, 2, 8), (64, 4, True, 0.2, 30, True, 2, 8),
    # a state wider than 64 bits: the older write's read from a LUT RAM
    (64, 4, True, 0.2, 30, False, 2, 100), (8, 2, True, 0.1, 30, False, True, 100)])
def test_a_table_whose_entries_age_equals_the_model(entries, ways, ahead, stall, evict_after, within, lag, width):
    # --evict-after: an entry is stale once older than half the epoch range (2,048 epochs),
    # judged a stage before the lookup against the epoch it will be then; keys take entries, a
    # quiet key (no state) ages them past it, and keys then take, find or lose them (some are
    # touched now and then, so they stay live). With WITHIN too, an entry is stale either way.
    rng = random.Random(entries + ways)
    first = [rng.randrange(256) for _ in range(24)]
    period = max(1, evict_after // 2048)
    keys = first + [first[i % 4] if i % 300 == 0 else 7 for i in range(2100 * period)] + \
        [rng.choice(first + [rng.randrange(256)]) for _ in range(120)]
    # (WITHIN: times that rise slowly, so that some entries expire by time before they age)
    times = [i // 40 for i in range(len(keys))] if within else None

    def update(key, state):  # (a wide state: every bit moving)
        if key == 7 or rng.random() < 0.1:
            return 0
        return count_up(key, state) if width == 8 else (state * 3 + key + 1) % (1 << width) | 1

    dut = TablePartitioner(entries, 8, width, vector_width=8, ways=ways, evict_after=evict_after,
                           expiry_width=16 if within else None, window=20, early_key=2 if ahead else 0, en_ahead=ahead,
                           lag=lag)
    assert dut._period == period
    drive(dut, keys, update, stall, seed=entries, times=times)


@pytest.mark.parametrize("inserted", [False, True], ids=["domain-reset", "reset-inserter"])
def test_reset_sweeps_the_table(inserted):
    # the domain's reset, or (as in the board top) a reset-less domain and a ResetInserter
    dut = TablePartitioner(16, 8, 4)
    top = Module()
    top.domains.sync = sync = ClockDomain(reset_less=inserted)
    rst = Signal() if inserted else sync.rst
    top.submodules.dut = ResetInserter(rst)(dut) if inserted else dut
    got, sweep = [], []

    async def bench(ctx):
        ctx.set(dut.en, 1)
        for phase in range(2):
            for key in (3, 3):
                while not ctx.get(dut.slot):
                    await ctx.tick()
                ctx.set(dut.inject, 1)
                ctx.set(dut.key, key)
                await ctx.tick()
                ctx.set(dut.inject, 0)
                for _ in range(DEPTH - 1):
                    await ctx.tick()
                got.append(ctx.get(dut.out_state))
                ctx.set(dut.next_state, 5)
                await ctx.tick()
            if phase == 0:
                ctx.set(rst, 1)
                await ctx.tick()
                ctx.set(rst, 0)
                while not ctx.get(dut.slot):
                    sweep.append(1)
                    await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8, domain="sync")
    sim.add_testbench(bench)
    sim.run()
    assert got == [0, 5, 0, 5]  # the reset forgot key 3
    assert len(sweep) == 1 + dut.buckets  # the cycle after the reset, then one bucket cleared per cycle


@pytest.mark.parametrize("entries, ways, depth", [(256, 1, 64), (64, 4, 4), (256, 1, 8)])
def test_keys_right_after_the_sweep_find_the_table_empty(entries, ways, depth):
    # Every bucket written, a reset, and keys back to back from the first cycle with a slot, the
    # buckets swept last first: their reads miss the last swept buckets' writes, which they must
    # see forwarded (a key found there would be state from before the reset).
    dut = TablePartitioner(entries, 8, 8, ways=ways, bank_depth=depth)
    top = Module()
    top.domains.sync = ClockDomain(reset_less=True)
    rst = Signal()
    top.submodules.dut = ResetInserter(rst)(dut)
    order = sorted(range(256), key=lambda k: -dut.index(k))  # the last swept bucket's keys first
    found = {}

    async def run(ctx, keys):
        for key in [*keys, *[None] * DEPTH]:
            ctx.set(dut.inject, key is not None)
            ctx.set(dut.key, key or 0)
            if ctx.get(dut.out_valid):
                found.setdefault(ctx.get(dut.out_key), ctx.get(dut.out_state))
                ctx.set(dut.next_state, 7)
            await ctx.tick()

    async def bench(ctx):
        ctx.set(dut.en, 1)
        while not ctx.get(dut.slot):
            await ctx.tick()
        await run(ctx, order)  # fill: every bucket, as many keys as fit
        found.clear()
        ctx.set(rst, 1)
        await ctx.tick()
        ctx.set(rst, 0)
        await ctx.tick()
        assert not ctx.get(dut.slot)  # sweeping
        while not ctx.get(dut.slot):
            await ctx.tick()
        await run(ctx, order[:40])

    sim = Simulator(top)
    sim.add_clock(1e-8, domain="sync")
    sim.add_testbench(bench)
    sim.run()
    assert len(found) == 40 and set(found.values()) == {0}


def test_h3_hash_spreads_keys():
    dut = TablePartitioner(1 << 12, 32, 4, ways=4)
    dut._MustUse__silence = True  # only its hash is used here
    counts = {}
    for k in range(1 << 14):
        counts[dut.index(k)] = counts.get(dut.index(k), 0) + 1
    assert len(counts) == dut.buckets and max(counts.values()) <= 40  # 16 keys a bucket on average
    assert dut.index(12345) == h3(12345, dut.hash_rows)


@pytest.mark.parametrize("key_width,index_bits", [(8, 1), (8, 4), (10, 6), (12, 11), (13, 7)])
def test_the_bucket_and_the_quotient_tag_identify_the_key(key_width, index_bits):
    # every key of the width: no two share both the bucket and the tag, which is index_bits narrower
    rows = h3_matrix(key_width, index_bits)
    tag = quotient_tag(key_width, rows)
    assert len(tag) == key_width - index_bits
    seen = {}
    for key in range(1 << key_width):
        code = (h3(key, rows), sum((key >> b & 1) << i for i, b in enumerate(tag)))
        assert code not in seen, f"keys {seen[code]} and {key} share a bucket and a tag"
        seen[code] = key


def test_a_hash_of_lower_rank_keeps_the_whole_key_as_its_tag():
    assert quotient_tag(6, [0b000011, 0b001100, 0b001111]) == tuple(range(6))  # row 3 = row 1 ^ row 2


def test_a_hashed_entry_stores_the_quotient_tag():
    # network's 32-bit source address in 4,096 buckets: 20 tag bits, not 32
    root = Path(__file__).resolve().parent.parent
    network = lower(check(parse_file(root / "examples" / "network" / "network.sql")))
    q = network.queries[0]
    dut = table_partitioner(q, network.tuple, 1 << 14)
    dut._MustUse__silence = True
    assert (dut.direct, dut.buckets, dut.tag_width) == (False, 4096, 20)
    assert dut.entry_width == q.state_width + 20
    assert sizing.table_plan(network, q, 1 << 14, sizing.DEVICES["ecp5-85f"]).entry_bits == dut.entry_width


def test_the_ways_asked_are_the_tables():
    # --ways: a hashed table of that many ways, the largest that fits (finance0 on the ECP5-85F: 2,048
    # partitions as with 4, its 1,024 buckets two entries each), or as many partitions as asked; a
    # direct-indexed table has one way whatever is asked; the pipeline partitioner has none
    root = Path(__file__).resolve().parent.parent
    ecp5 = sizing.DEVICES["ecp5-85f"]
    finance = lower(check(parse_file(root / "examples" / "finance" / "finance0" / "finance0.sql")))
    assert sizing.choose(finance, ecp5).ways == 4
    for ways in (4, 2, 1):
        choice = sizing.choose(finance, ecp5, ways=ways)
        assert (choice.ways, choice.partitions, choice.tables[0].ways) == (ways, 2048, ways)
        asked = sizing.choose(finance, ecp5, partitions=64, ways=ways)
        assert (asked.ways, asked.tables[0].entries) == (ways, 64)
        dut = table_partitioner(finance.queries[0], finance.tuple, asked.partitions, asked.ways)
        dut._MustUse__silence = True  # (built to read its shape, not elaborated)
        assert (dut.ways, dut.buckets) == (ways, 64 // ways)
    marathon = lower(check(parse_file(root / "examples" / "marathon" / "marathon.sql")))
    assert sizing.choose(marathon, ecp5, ways=2).tables[0].direct
    with pytest.raises(ValueError, match="--ways is 4, 2 or 1, not 3"):
        sizing.choose(finance, ecp5, ways=3)
    with pytest.raises(ValueError, match="--ways is the table partitioner's"):
        sizing.choose(finance, ecp5, "pipeline", ways=2)


def test_sizing_counts_the_block_rams_of_banks_ways_and_columns():
    # what `--partitioner auto` reports is what TablePartitioner stores: one memory per way, in columns
    root = Path(__file__).resolve().parent.parent
    ecp5 = sizing.DEVICES["ecp5-85f"]
    marathon = lower(check(parse_file(root / "examples" / "marathon" / "marathon.sql")))
    plan = sizing.table_plan(marathon, marathon.queries[0], 1 << 16, ecp5)
    # 4 banks of 16,384 × 1 blocks, one per bit: the 9-bit entry and whether it is in use
    assert (plan.direct, plan.entries, plan.blocks) == (True, 1 << 16, 40)
    finance = lower(check(parse_file(root / "examples" / "finance" / "finance0" / "finance0.sql")))
    q = finance.queries[0]
    plan = sizing.table_plan(finance, q, 2048, ecp5)
    assert plan.ways == 4 and plan.entry_bits > 504  # two columns a way: 504 bits, then the rest and the flag
    rest = plan.entry_bits + 1 - 504
    assert plan.blocks == 4 * (ecp5.blocks_for(512, 504) + ecp5.blocks_for(512, rest))
    # and what the table instantiates: DP16KDs per bank, way and column
    for design, query, n in ((marathon, marathon.queries[0], 1 << 16), (finance, q, 2048)):
        dut = table_partitioner(query, design.tuple, n)
        dut._MustUse__silence = True
        blocks = dut.banks * dut.ways * sum(dp16kd_blocks(hi - lo, dut.bank_depth) for lo, hi in dut.columns)
        assert sizing.table_plan(design, query, n, ecp5).blocks == blocks
        assert sizing.table_plan(design, query, n, ecp5).entry_bits == dut.entry_width


@pytest.mark.parametrize("lag, ways, entries, depth, stall, seed, relay, platform, wide", [
    (1, 1, 64, 4, 0.0, 21, False, None, False), (1, 2, 64, 4, 0.3, 22, True, None, False),
    (1, 4, 64, 4, 0.5, 23, False, None, False), (1, 4, 256, 64, 0.2, 24, True, None, False),
    (1, 1, 512, 64, 0.3, 25, True, None, False), (1, 2, 64, 4, 0.3, 26, False, Ice40(), False),
    (1, 1, 512, 16, 0.3, 27, False, None, False), (1, 2, 256, 4, 0.4, 28, True, None, False),
    (1, 1, 512, 512, 0.0, 29, True, None, False),
    # a state of 150 bits: three copies of the older write's select lines, and those of the lookup's picks
    (1, 4, 64, 4, 0.3, 30, True, None, True), (1, 1, 256, 16, 0.2, 31, False, None, True),
    # the three-cycle update (given next_key's bucket on the even seeds)
    (2, 1, 64, 4, 0.0, 41, False, None, False), (2, 2, 64, 4, 0.3, 42, True, None, False),
    (2, 4, 64, 4, 0.5, 43, False, None, False), (2, 4, 256, 64, 0.2, 44, True, None, False),
    (2, 2, 64, 4, 0.3, 46, False, Ice40(), False), (2, 1, 512, 16, 0.3, 47, False, None, False),
    (2, 4, 64, 4, 0.3, 50, True, None, True), (2, 1, 256, 16, 0.2, 51, False, None, True)])
def test_a_table_whose_update_takes_two_or_three_cycles_equals_the_model(lag, ways, entries, depth, stall, seed, relay,
                                                                         platform, wide):
    # `lag`: the lookup's results registered at stage 5, the write formed there; a key of the bucket
    # of the key just before it waits a cycle (Ahead holds it), so each sees the other's update
    # through the write two ahead. `lag` 2: registered at stages 5 and 6, the write formed at 6; a
    # key of the bucket of either of the two keys before it waits (`adjacent`, `conflict`), so each
    # sees the other's update through the write three ahead or later. Hot keys and one bucket's keys
    # back to back.
    rng = random.Random(seed)
    keys = [rng.choice([rng.randrange(300), rng.randrange(4), 7]) for _ in range(400)]

    def update(key, state):  # (wide: every bit of the state moving)
        if rng.random() < 0.2:
            return 0
        return (state * 3 + key + 1) % (1 << 150) | 1 if wide else count_up(key, state)

    dut = TablePartitioner(entries, 9, 150 if wide else 8, ways=ways, bank_depth=depth, early_key=2, en_ahead=True,
                           relay=relay, lag=lag, given_index=lag == 2 and seed % 2 == 0)
    assert dut.depth == DEPTH + lag and dut.spacing == (2 if lag == 2 else None)
    drive(dut, keys, update, stall, seed, platform)


@pytest.mark.parametrize("lag", [1, 2], ids=["two-cycle", "three-cycle"])
@pytest.mark.parametrize("ways, stall", [(4, 0.0), (2, 0.0), (1, 0.0), (4, 0.3)])
def test_a_two_cycle_table_sees_past_a_write_that_kept_nothing(ways, stall, lag):
    # WITHIN, the two- and three-cycle updates, a 150-bit state (the older write's state read from a
    # LUT RAM the writes go into, as where nothing goes stale): a key writes its state, looks it up again late
    # (stale: it misses, and its update keeps nothing, so that write takes no way), and then early
    # again (time fell: the first write is live), three tuples later, so that the empty write is the
    # one just ahead of its lookup among the older writes and the first write is further ahead. The
    # third lookup's state is the first write's: the write one ahead is the key's only if it took a
    # way, which a miss does only with `keep`.
    dut = TablePartitioner(64, 9, 150, ways=ways, expiry_width=12, window=10, bank_depth=4, early_key=2,
                           en_ahead=True, relay=True, lag=lag)
    rng = random.Random(ways)
    keys, times = [], []
    for i in range(40):
        key = rng.choice([1, 2, 3, 300 + i])
        others = [k for k in range(400) if dut.index(k) != dut.index(key)]
        keys += [key, rng.choice(others), key, rng.choice(others), rng.choice(others), key]
        base = 100 + 3 * i
        times += [base, base, base + 40, base, base, base]
    calls = []

    def update(key, state):  # (the second lookup of each key keeps nothing)
        calls.append(key)
        if len(calls) % 6 == 3:
            return 0
        return (state * 3 + key + 1) % (1 << 150) | 1

    seen, _ = drive(dut, keys, update, stall, seed=ways, times=times)
    assert len(seen) == len(keys)
    # (the third lookup of each key hit the first's entry, live again, wherever the first took a way:
    # most of them, a way's bucket full of other keys' live entries now and then)
    took = [bool(seen[i][2] or seen[i][3]) for i in range(0, len(keys), 6)]
    assert [bool(seen[i][2]) for i in range(5, len(keys), 6)] == took and sum(took) > len(took) // 2


@pytest.mark.parametrize("ways, entries, depth, relay, seed", [(4, 64, 4, True, 1), (1, 256, 16, False, 2),
                                                               (2, 64, 4, False, 3)])
def test_a_two_cycle_table_reset_with_keys_in_flight_sweeps_and_equals_the_model(ways, entries, depth, relay, seed):
    # A 150-bit state (the older write's select lines copied per 64 bits, copies without a reset):
    # three runs of hot keys and one bucket's keys, stalls, each cut short by a reset with keys in
    # flight; after each the table is swept and must look empty (a fresh model), whatever the copies
    # held before the reset.
    width = 150
    dut = TablePartitioner(entries, 9, width, ways=ways, bank_depth=depth, early_key=2, en_ahead=True,
                           relay=relay, lag=True)
    ahead = Ahead(dut)
    top = Module()
    top.domains.sync = ClockDomain(reset_less=True)
    rst = Signal()
    top.submodules.ahead = ResetInserter(rst)(ahead)
    rng = random.Random(seed)
    models, checked = [Model(dut)], []

    def update(key, state):
        return 0 if rng.random() < 0.2 else (state * 3 + key + 1) % (1 << width) | 1

    async def bench(ctx):
        en_now = True  # (the table's `en` in this cycle: Ahead takes it a cycle ahead)
        for run in range(3):
            pending = [rng.choice([rng.randrange(300), rng.randrange(4), 7]) for _ in range(1000)]
            for cycle in range(rng.randrange(150, 400)):
                en = rng.random() >= 0.3
                ctx.set(ahead.en, en)
                en, en_now = en_now, en
                if pending and ctx.get(dut.slot):
                    ctx.set(ahead.inject, 1)
                    ctx.set(ahead.key, pending[0])
                    if en and ctx.get(ahead.ready):
                        pending.pop(0)
                else:
                    ctx.set(ahead.inject, 0)
                if ctx.get(dut.out_valid) and en:
                    k, s, h, f = (ctx.get(dut.out_key), ctx.get(dut.out_state), ctx.get(dut.out_hit),
                                  ctx.get(dut.out_free))
                    assert (s, bool(h), bool(f)) == models[-1].lookup(k), f"run {run}, cycle {cycle}, key {k}"
                    state = update(k, s)
                    ctx.set(dut.next_state, state)
                    models[-1].store(k, state)
                    checked.append(k)
                await ctx.tick()
            ctx.set(ahead.inject, 0)
            ctx.set(ahead.en, 1)
            ctx.set(rst, 1)
            await ctx.tick()
            ctx.set(rst, 0)
            en_now = True  # (Ahead's `en` register resets to 1)
            models.append(Model(dut))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(checked) > 100
