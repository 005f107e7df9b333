"""The table partitioner: per-key state in block RAM, one tuple per clock cycle.

Woods et al.'s pipeline partitioner (§6) holds a few hundred partitions and
takes a tuple every other cycle. This one keeps every partition's state — the
NFA state vector, the partial-match registers, a tag, an expiry — in a table
in block RAM (``amaranth.lib.memory``), read and written back every cycle:

* **Direct-indexed** when the key is narrow enough (2^key bits ≤ entries): the
  key is the address, the table holds every possible partition, nothing is
  ever dropped, and no tag is stored.
* **Hashed** otherwise: an H3 hash of the key picks a bucket of ``ways``
  entries, each with the full key as its tag, searched in parallel (a probe
  bounded by the bucket). A tuple whose key has no entry and finds no free
  one in its bucket cannot be placed: the caller drops it (SPEC §3.6).

An entry is free when its state vector is zero (exactly a fresh partition,
as in the pipeline partitioner), or when it is stale: with WITHIN, past its
expiry (its key's last time plus the window) compared with the time of the
tuple being placed; with ``evict_after``, not written for that many cycles.

Pipeline (``depth`` = 2 enabled cycles, one key per cycle):

1. the key's bucket address goes to the read port;
2. the bucket arrives from block RAM and is registered (its slow
   clock-to-out ends in a flip-flop);
3. the bucket is patched with the writes of the two keys just ahead (they
   were not in block RAM yet when it was read) — which keys collide is
   decided in the stages before, from registers — the key's entry is found
   and offered on ``out_*``; the caller's ``next_state`` is written back to
   block RAM in the same cycle.

So back-to-back tuples of one key, or of keys sharing a bucket, see each
other's updates by forwarding, never by stalling.
"""

from __future__ import annotations

import random

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import memory, wiring

from .pipeline import _signature

DEPTH = 2  # enabled cycles from inject to out_*
DEFAULT_WAYS = 4
STAMP_BITS = 12  # --evict-after: a write's epoch; stale after half the epoch range


def h3_matrix(key_width: int, index_bits: int, seed: int = 0x5EED) -> list[int]:
    """The H3 hash (Carter & Wegman): index bit i is the parity of the key bits in row i."""
    rng = random.Random(seed + 1000 * key_width + index_bits)
    return [rng.getrandbits(key_width) | (1 << (i % key_width)) for i in range(index_bits)]


def h3(key: int, rows: list[int]) -> int:
    """The H3 hash in software, for tests and host tools."""
    return sum((bin(key & row).count("1") & 1) << i for i, row in enumerate(rows))


class TablePartitioner(wiring.Component):
    """Per-key state for ``entries`` partitions in block RAM; same protocol as
    :class:`~cepc.hw.partition.PipelinePartitioner` with ``depth`` 2 and a slot every cycle.

    ``entries`` is rounded up to a power of two (and to ``2**key_width`` when direct-indexed
    fits). ``state_width`` is the stored payload, its low ``vector_width`` bits the state vector.
    ``expiry_width``: exact eviction for WITHIN (``now`` is the time of the tuple being placed,
    ``next_expiry`` its time plus the window). After ``rst`` the table is swept clear (one bucket
    per cycle, ``slot`` low meanwhile) if anything was written since the last sweep.
    """

    def __init__(self, entries: int, key_width: int, state_width: int, *, vector_width: int | None = None,
                 ways: int | None = None, evict_after: int | None = None, expiry_width: int | None = None,
                 early_key: bool = False):
        if entries < 1:
            raise ValueError(f"the table needs at least one entry, not {entries}")
        self.direct = (1 << key_width) <= entries
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
        self._period = max(1, evict_after // (1 << (STAMP_BITS - 1))) if evict_after else None
        self.tag_width = 0 if self.direct else key_width
        self.entry_width = state_width + self.tag_width + (expiry_width or 0) + (STAMP_BITS if evict_after else 0)
        self.word_width = self.entry_width * self.ways
        self.hash_rows = [] if self.direct else h3_matrix(key_width, self.index_bits)
        signature = _signature(key_width, state_width, expiry_width or 1)
        self.early_key = early_key and not self.direct
        if self.early_key:
            # the key one enabled cycle ahead (what ``key`` will be after the next enabled edge): its
            # hash is registered, so the block RAM address comes from flip-flops, not a tree of XORs
            signature["next_key"] = wiring.In(key_width)
        super().__init__(signature)

    def index(self, key) -> int:
        """The bucket of a key (an int), as the hardware computes it."""
        return key if self.direct else h3(key, self.hash_rows)

    def elaborate(self, platform):
        m = Module()
        kw, sw, vw, W = self._kw, self._sw, self._vw, self.ways
        m.submodules.table = table = memory.Memory(shape=self.word_width, depth=self.buckets, init=[])
        rd = table.read_port()
        wr = table.write_port()

        def index_of(key):
            if self.direct:
                return key
            if not self.hash_rows:
                return Const(0, 1)
            return Cat(*((key & row).xor() for row in self.hash_rows))

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

        ib = max(1, self.index_bits)
        # --- reset sweep: a synchronous reset empties the table, if anything was written -----------
        # `alive` is the one register here that a reset clears: low in the cycle after any reset,
        # the domain's own or one a ResetInserter adds (the board top's sync domain has none)
        alive = Signal()
        dirty = Signal(reset_less=True)
        sweeping = Signal(reset_less=True)
        sweep_at = Signal(ib, reset_less=True)
        m.d.sync += alive.eq(1)
        with m.If(~alive):
            m.d.sync += [sweeping.eq(dirty), sweep_at.eq(0)]
        with m.Elif(sweeping):
            m.d.sync += sweep_at.eq(sweep_at + 1)
            with m.If(sweep_at == self.buckets - 1):
                m.d.sync += [sweeping.eq(0), dirty.eq(0)]
        m.d.comb += self.slot.eq(alive & ~sweeping)

        # --- stage 1: address ------------------------------------------------------------------------
        v1, k1, i1 = Signal(), Signal(kw), Signal(ib)
        index0 = Signal(ib)
        if self.early_key:  # index_of(key) by construction: both move on the same enabled edges from 0
            with m.If(self.en):
                m.d.sync += index0.eq(index_of(self.next_key))
        else:
            m.d.comb += index0.eq(index_of(self.key))
        m.d.comb += [rd.addr.eq(index0), rd.en.eq(self.en)]

        # the write of this cycle (stage 3), and the last two, for forwarding
        we, w_index, w_data = Signal(), Signal(ib), Signal(self.word_width)
        last1, last2 = Signal(self.word_width), Signal(self.word_width)
        # stage 3 registers: the bucket as block RAM had it when the key's read was sampled
        v3, k3, i3, word3 = Signal(), Signal(kw), Signal(ib), Signal(self.word_width)
        # Block RAM missed the writes of the two keys ahead (committed with and after the read):
        # whether they hit this bucket is decided from registers in the stages before.
        fwd_b1, fwd_a3, fwd_b3 = Signal(), Signal(), Signal()
        with m.If(self.en):
            m.d.sync += [
                v1.eq(self.inject & ~sweeping), k1.eq(self.key), i1.eq(index0),
                fwd_b1.eq(we & (w_index == index0)),  # the key two ahead writes now
                v3.eq(v1), k3.eq(k1), i3.eq(i1), word3.eq(rd.data),
                fwd_a3.eq(we & (w_index == i1)), fwd_b3.eq(fwd_b1),  # the key one ahead writes now
                last1.eq(w_data), last2.eq(last1),
            ]
        # --- stage 3: the key's entry ------------------------------------------------------------------
        bucket = Signal(self.word_width)
        m.d.comb += bucket.eq(Mux(fwd_a3, last1, Mux(fwd_b3, last2, word3)))
        entries = [bucket[w * self.entry_width:(w + 1) * self.entry_width] for w in range(W)]

        epoch = None
        if self._period is not None:
            epoch = Signal(STAMP_BITS)
            ticks = Signal(range(self._period))
            with m.If(self.en):
                m.d.sync += ticks.eq(Mux(ticks == self._period - 1, 0, ticks + 1))
                with m.If(ticks == self._period - 1):
                    m.d.sync += epoch.eq(epoch + 1)

        used, own, live = [], [], []
        for w, entry in enumerate(entries):
            state, tag, expiry, stamp = fields(entry)
            u = Signal(name=f"way{w}_used")
            o = Signal(name=f"way{w}_own")
            lv = Signal(name=f"way{w}_live")
            stale = Const(0)
            if expiry is not None:
                stale = stale | (expiry < self.now)
            if stamp is not None:
                stale = stale | (epoch - stamp)[STAMP_BITS - 1]  # older than half the epoch range
            m.d.comb += [u.eq(state[:vw].any()), o.eq(u & (tag == k3) if tag is not None else u),
                         lv.eq(u & ~stale)]
            used.append(u)
            own.append(o)
            live.append(lv)

        def first(flags):
            """One-hot of the first set flag."""
            out, seen = [], Const(0)
            for f in flags:
                out.append(f & ~seen)
                seen = seen | f
            return out

        hits = first([own[w] & live[w] for w in range(W)])
        hit = Cat(*hits).any()
        # a key reuses its own stale entry before any other, so it is never held twice
        owns_stale = first([own[w] & ~live[w] for w in range(W)])
        frees = first([~live[w] for w in range(W)])
        reuse = Cat(*owns_stale).any()
        alloc = [Mux(reuse, owns_stale[w], frees[w]) for w in range(W)]
        free = Cat(*frees).any()
        state_out = Const(0, sw)
        for w in range(W):
            state_out = state_out | Mux(hits[w], fields(entries[w])[0], 0)
        m.d.comb += [
            self.out_valid.eq(v3), self.out_key.eq(k3), self.out_hit.eq(hit), self.out_free.eq(free),
            self.out_state.eq(state_out),
        ]

        # --- write back: the key's entry (or a free one) takes the next state --------------------------
        keep = self.next_state[:vw].any()
        target = [Mux(hit, hits[w], alloc[w] & keep) for w in range(W)]
        new_entry = Cat(self.next_state, *([k3] if self.tag_width else []),
                        *([self.next_expiry] if self._xw else []), *([epoch] if self._period else []))
        patched = Cat(*(Mux(target[w], new_entry, entries[w]) for w in range(W)))
        writing = self.en & v3
        m.d.comb += [
            we.eq(writing | sweeping), w_index.eq(Mux(sweeping, sweep_at, i3)),
            w_data.eq(Mux(sweeping, 0, patched)),
            wr.addr.eq(w_index), wr.data.eq(w_data), wr.en.eq(we),
        ]
        with m.If(writing & keep):
            m.d.sync += dirty.eq(1)
        # a stale entry (another key's, or the key's own) taken over or cleared: its state is lost
        m.d.comb += self.evicted.eq(writing & Cat(*(target[w] & used[w] & ~live[w] for w in range(W))).any())

        # occupancy: entries holding a non-zero vector
        count = Signal(range(self.entries + 1))
        m.d.comb += self.occupied.eq(count)
        before = Cat(*(target[w] & used[w] for w in range(W))).any()
        with m.If(sweeping):
            m.d.sync += count.eq(0)
        with m.Elif(writing & Cat(*target).any()):
            m.d.sync += count.eq(count + keep - before)
        return m
