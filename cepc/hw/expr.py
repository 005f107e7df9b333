"""Plan expressions (:mod:`cepc.plan`) as Amaranth values.

One builder for the predicate decoder, the per-edge predicates with
aggregates and the measures. ENUM fields compare as their codes, CHAR fields
as little-endian byte strings; Amaranth's arithmetic widens and
sign-extends, so mixed signed/unsigned comparisons and sums are exact.
"""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Cat, Const, Mux, Signal, Value

from ..plan import PAgg, PArith, PBool, PCmp, PConst, PExpr, PField, PNeg

# ordered(chained=True): only orderings wider than this many bits take their slices' equalities from carry
# chains. (mshape's 32-bit ones, chained too, took 144 more carry cells for 148 fewer LUTs, and nextpnr's
# HeAP placer, at 91 % of the UP5K's logic cells, did not finish legalising their chains at seeds 1 and 3;
# finance0's, 1.02x on the mean of seeds 1-5.)
CHAINED_ABOVE = 32

CMP = {"==": Value.__eq__, "!=": Value.__ne__, "<": Value.__lt__, "<=": Value.__le__,
        ">": Value.__gt__, ">=": Value.__ge__}


def extended(v: Value, width: int) -> Value:
    """``v``'s bits to ``width``: extended by its own signedness, or cut (``v`` modulo 2**width)."""
    if len(v) > width:
        return v.as_unsigned()[:width]
    top = v[-1] if v.shape().signed else Const(0, 1)
    return Cat(v, top.replicate(width - len(v)))


def with_carry(a: Value, b: Value, carry: Value) -> Value:
    """``a + b + carry`` (``a``, ``b`` of one width, ``carry`` a bit) and its carry out, one bit wider: one
    adder, so one carry chain, the carry in taken as the sum of two extra low bits."""
    return (Cat(carry, a) + Cat(carry, b))[1:len(a) + 2]


def slices_of(width: int, n: int) -> list[tuple[int, int]]:
    """[lo, hi) of ``n`` slices of ``width`` bits, lowest first, as even as they can be (the lowest the widest)."""
    bounds = [width - width * i // n for i in range(n, -1, -1)]
    return list(zip(bounds, bounds[1:]))


# select_sum: bits per slice of a sum across two cycles (finance5's 65-bit `time - 20000` and `took`,
# three slices; a slice's carry chain on the UP5K about 0.35 ns a bit)
SELECT_SLICE = 22


def select_sum(m, x: Value, y: Value | int, carry, load: Value, name: str, slice_bits: int = SELECT_SLICE,
               x_next: Value | None = None) -> Value:
    """``x + y + carry`` modulo 2**w (``x`` of ``w`` bits, ``y`` of ``w`` bits or an int, ``carry`` a bit or
    0 or 1) as a carry-select adder across two cycles, with no carry chain longer than ``slice_bits`` + 1.
    In the first, from ``x`` and ``y`` as they are then: each slice of ``slice_bits`` bits summed side by
    side, the lowest with ``carry``, each above it twice (a carry in of 0 and of 1), each sum with its carry
    out into a register loaded on the edges where ``load`` is high. In the second, from those registers
    alone: each slice's sum picked by the carry out of the one below it as picked, a LUT or two. Returns the
    sum after the registers. (Two carry chains of half the width, one in each cycle, each still took 33
    logic levels on the UP5K: finance5's critical paths, 20.7-22.7 ns.)

    ``y`` an int: a slice of it that is all zeros or all ones (a small constant's extension: finance5's
    ``time - 20000`` adds ~20000) sums to ``x``'s slice itself with one of the two carries in, so that sum
    takes no chain: it is ``x_next``'s slice where given (a register that takes ``x`` on the same edges),
    else a register of its own."""
    w = len(x)
    constant = isinstance(y, int)
    y_value = Const(y % (1 << w), w) if constant else y

    def summed(a: Value, b: Value, c: Value) -> Value:  # a + b + c and its carry out
        return a + b if isinstance(c, Const) and c.value == 0 else with_carry(a, b, c)

    def registered(v: Value, tag: str) -> Value:
        r = Signal(len(v), name=f"{name}_{tag}", reset_less=True)
        with m.If(load):
            m.d.sync += r.eq(v)
        return r

    carry = Const(carry, 1) if isinstance(carry, int) else carry
    parts = []
    for i, (lo, hi) in enumerate(slices_of(w, -(-w // slice_bits))):
        a, b = x[lo:hi], y_value[lo:hi]
        if i == 0:
            parts.append([registered(summed(a, b, carry), "s0")])
            continue
        k = (y >> lo) & ((1 << (hi - lo)) - 1) if constant else None
        if k in (0, (1 << (hi - lo)) - 1):  # (x + 0 + 0 and x + ~0 + 1 are x, carry out k's top bit)
            same = x_next[lo:hi] if x_next is not None else registered(a, f"s{i}_x")
            other = registered(summed(a, b, Const(int(k == 0), 1)), f"s{i}_c{int(k == 0)}")
            passed = Cat(same, Const(int(k != 0), 1))
            parts.append([passed, other] if k == 0 else [other, passed])
        else:
            parts.append([registered(summed(a, b, Const(c, 1)), f"s{i}_c{c}") for c in (0, 1)])
    out, c = [parts[0][0][:-1]], parts[0][0][-1]
    for zero, one in parts[1:]:
        out.append(Mux(c, one[:-1], zero[:-1]))
        c = Mux(c, one[-1], zero[-1])
    return Cat(*out)


def staged_sum(m, x: Value, y: Value, carry, name: str, cycles: int) -> Value:
    """``x + y + carry`` modulo 2**w (``x`` and ``y`` of ``w`` bits, ``carry`` a bit or 0 or 1) across
    ``cycles`` cycles, for ``x`` and ``y`` that hold through them: cut into ``cycles`` slices, the lowest
    summed with ``carry`` into a register with its carry out, each above it in the next cycle with the
    carry of the one below from its register, into a register of its own, the highest after the last
    register. The registers load every cycle, so each holds its slice for as long as ``x`` and ``y`` hold.
    Returns the sum, right from the last cycle on. A carry chain a slice long, and one chain a bit (where
    :func:`select_sum`, for inputs that hold through two cycles, takes two for each slice above the lowest
    and a LUT a bit to pick them)."""
    w = len(x)
    carry = Const(carry, 1) if isinstance(carry, int) else carry
    out = []
    for i, (lo, hi) in enumerate(slices_of(w, cycles)):
        total = with_carry(x[lo:hi], y[lo:hi], carry)
        if hi == w:
            out.append(total[:-1])
            break
        r = Signal(hi - lo + 1, name=f"{name}_s{i}", reset_less=True)
        m.d.sync += r.eq(total)
        out.append(r[:-1])
        carry = r[-1]
    return Cat(*out)


def ordered(op: str, a: Value, b: Value, chunk: int | None = None,
            inverse: tuple[Value | None, Value | None] = (None, None), chained: bool = False,
            cut: Callable[[Value], Value] | None = None) -> Value:
    """``a op b`` for an ordering ``op`` (``<``, ``<=``, ``>``, ``>=``), exact as Amaranth's over mixed
    signedness; with ``chunk``, with no carry chain longer than that: both are widened to a common width
    (signed values offset by their sign bit, so that they order as unsigned), cut into ``chunk``-bit
    slices compared side by side, and the slices' results joined from the most significant (a few
    gates). Yosys maps an ordering onto one carry chain of the operands' width: finance5's 66-bit
    compare of a time, 33 CCU2Cs and 5.1 ns of logic, was its critical path.

    ``inverse``: ``~a`` or ``~b`` where given (a register of its own). A slice then compares as the
    carry out of a sum that takes the inverted operand as it is: for ``u`` the operand whose inverse is
    given (``a``, where both are) and ``v`` the other, ``u < v`` is the carry of ``v + ~u``, and
    ``u <= v`` that of ``v + ~u + 1``. An ordering is a subtraction, and the iCE40's carry logic takes
    its operands straight from the logic cell's inputs, so the inverter Yosys puts in front of the
    chain is a logic cell of its own and a route (finance0 on the UP5K: 2.6 ns of its 21.6 ns critical
    path). Every ordering of a pair takes the same chains but in the lowest slice, where ``u <= v``
    and ``u > v`` (not ``u <= v``) take the carry in, and ``u < v`` and ``u >= v`` do not: a pair
    ordered both ways shares its chains, as Yosys' own compares of a pair share one. (A chain a way
    took mshape to 5,273 of the UP5K's 5,280 logic cells, where nextpnr could not place it; shared,
    5,149.)

    ``chained`` (with an inverse, for operands wider than CHAINED_ABOVE bits): whether each slice's
    operands are equal is read off carry chains too, ``v >= u`` (the carry of ``v + ~u + 1``) and not
    ``v > u``, not compared in LUTs. On the iCE40, ABC maps a slice's equality into a string of LUTs,
    each taking the one before's on its last input, and that string, a route between each of its LUTs,
    was the conditions' path (finance5 on the UP5K: six LUTs, 28.0 ns from the state into `cond`; 24.0
    chained, with its terms inverted: cepc.hw.top); a chain's carries ripple along a column.

    ``cut``: a register stage between the slices and their join (``cut(v)``: the register of ``v``). Each
    slice's compares (its carry outs, its equality) are registered, and the join, a few gates, reads the
    registers a cycle later (Woods' pipeline taking a tuple every three cycles: :class:`~cepc.hw.top.Top`)."""
    a, b = Value.cast(a), Value.cast(b)
    cut = cut or (lambda v: v)
    sa, sb = a.shape().signed, b.shape().signed
    signed = sa or sb
    width = max(len(a) + (signed and not sa), len(b) + (signed and not sb))
    na, nb = inverse
    if na is None and nb is None and (not chunk or width <= chunk):
        return cut(CMP[op](a, b))

    def widened(v, s, ones=False):  # (ones: v is an inverse: ~widened(u) for v = ~u)
        top = v[-1] if s else Const(int(ones), 1)
        v = Cat(v, top.replicate(width - len(v))) if width > len(v) else v
        return Cat(v[:-1], ~v[-1]) if signed else v

    x, y = widened(a, sa), widened(b, sb)
    step = chunk or width
    chained = chained and width > CHAINED_ABOVE
    if na is None and nb is None:  # (slices alone: each ordering as Yosys' compare of its slices)
        if op in (">", ">="):
            x, y = y, x
        less, equal = Const(0), Const(1)
        for lo in reversed(range(0, width, step)):
            less = less | (equal & cut(x[lo:lo + step] < y[lo:lo + step]))
            equal = equal & cut(x[lo:lo + step] == y[lo:lo + step])
        return less if op in ("<", ">") else less | equal

    # the chains compute u < v, or u <= v (a carry in), for u the operand with its inverse nu
    if na is not None:
        u, v, nu = x, y, widened(Value.cast(na), sa, True)
    else:  # (u < v is then b < a)
        u, v, nu = y, x, widened(Value.cast(nb), sb, True)
        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
    or_equal = op in ("<=", ">")  # (u > v is not u <= v)
    less, equal = Const(0), Const(1)
    for lo in reversed(range(0, width, step)):
        vs, nus = v[lo:lo + step], nu[lo:lo + step]
        above = cut((vs + nus)[len(vs)])  # v + ~u carries when v > u
        # v + ~u + 1 carries when v >= u (its 1 from the low bits' 1 + 1)
        at_least = (Cat(Const(1, 1), vs) + Cat(Const(1, 1), nus))[len(vs) + 1]
        if lo or not or_equal:
            less = less | (equal & above)
            equal = equal & (cut(at_least) & ~above if chained else cut(u[lo:lo + step] == vs))
        else:
            less = less | (equal & cut(at_least))
    return less if op in ("<", "<=") else ~less


class ExprBuilder:
    """Builds plan expressions over ``field(name)`` and ``register(index)``, sharing equal
    sub-expressions (two predicates comparing the same field with the same constant use one
    comparator). ``uses`` counts how often each sub-expression was asked for. With ``chunk``, an
    ordering comparison takes no carry chain longer than that (:func:`ordered`)."""

    def __init__(self, field: Callable[[str], Value], register: Callable[[int], Value] | None = None,
                 known: dict[PExpr, Value] | None = None, chunk: int | None = None,
                 inverse: dict[PExpr, Value] | None = None, chained: bool = False,
                 cut: Callable[[Value], Value] | None = None):
        self._field, self._register, self._chunk, self._chained = field, register, chunk, chained
        # ``cut``: the compares registered before what joins them (:func:`ordered`)
        self._cut = cut or (lambda v: v)
        # ``inverse``: sub-expressions' inverses, given (registers): an ordering takes them (:func:`ordered`)
        self._inverse = inverse or {}
        # ``known``: sub-expressions whose values are given (a tuple's products, computed a stage ahead)
        self._cache: dict[PExpr, Value] = dict(known or {})
        self.uses: dict[PExpr, int] = {}

    def value(self, e: PExpr) -> Value:
        self.uses[e] = self.uses.get(e, 0) + 1
        if e in self._cache:
            return self._cache[e]
        if isinstance(e, PConst):
            v = Const(e.value)
        elif isinstance(e, PField):
            v = self._field(e.name)
        elif isinstance(e, PAgg):
            if self._register is None:
                raise ValueError("an aggregate outside a partial match")
            v = self._register(e.register)
        elif isinstance(e, PNeg):
            v = -self.value(e.operand)
        elif isinstance(e, PArith):
            a, b = self.value(e.left), self.value(e.right)
            v = a + b if e.op == "+" else a - b if e.op == "-" else a * b
        elif isinstance(e, PCmp):
            a, b = self.value(e.left), self.value(e.right)
            v = self._cut(CMP[e.op](a, b)) if e.op in ("==", "!=") else \
                ordered(e.op, a, b, self._chunk, (self._inverse.get(e.left), self._inverse.get(e.right)),
                        self._chained, self._cut)
        elif isinstance(e, PBool):
            parts = [self.truth(o) for o in e.operands]
            if e.op == "not":
                v = ~parts[0]
            else:
                v = parts[0]
                for p in parts[1:]:
                    v = (v & p) if e.op == "and" else (v | p)
        else:  # pragma: no cover
            raise TypeError(e)
        self._cache[e] = v
        return v

    def truth(self, e: PExpr) -> Value:
        """A one-bit condition."""
        v = self.value(e)
        return v.bool() if len(v) != 1 or v.shape().signed else v

    @property
    def shared(self) -> int:
        """Comparators asked for more than once."""
        return sum(n - 1 for e, n in self.uses.items() if isinstance(e, PCmp) and n > 1)
