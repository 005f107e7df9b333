"""VHDL-2008 from the hardware plan, through the Jinja2 templates in ``hdl_templates/``.

Yosys writes no VHDL, so this back end renders the design itself: one entity per
component of :mod:`cepc.hw` (framer, predicate decoder, one NFA core per query,
the partitioners, delay line, FIFO, top), with the same ports and the same
observable behaviour as the Amaranth top that the Verilog comes from.

This module only computes what the templates need — names, widths, bit ranges,
the NFA tables, the predicate expression trees with the exact shape of every
node — and never writes HDL text; all of that lives in the templates. The
templates live in the checkout's ``hdl_templates/*.vhd.j2``, beside ``boards/``
and ``sim/``, which cepc also reads from its checkout.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
from amaranth.hdl import Const, Shape, Signal, Value, signed, unsigned

from ..errors import ToolError
from ..hw.layouts import COUNTER_WIDTH, SEQ_WIDTH, key_width, query_id_width, record_key_width, record_measures_width
from ..hw.partition.pipeline import TIMER_MAX, tick_period
from ..hw.partition.table import FORWARD, STAMP_BITS, hold_spacing
from ..hw.top import OUTPUT_FIFO_DEPTH, Top, partitioner_depth, stall_margin, table_partitioner, within_expiry
from ..plan import DesignPlan, PAgg, PArith, PBool, PCmp, PConst, PExpr, PField, PNeg, QueryPlan
from .sidecar import header_lines, sidecar

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "hdl_templates"

# VHDL-2008 reserved words (LRM 15.10), PSL's, and names from STD/IEEE that a generated
# name must not hide.
RESERVED = frozenset("""
abs access after alias all and architecture array assert assume assume_guarantee attribute begin block body
buffer bus case component configuration constant context cover default disconnect downto else elsif end
entity exit fairness file for force function generate generic group guarded if impure in inertial inout is
label library linkage literal loop map mod nand new next nor not null of on open or others out package
parameter port postponed procedure process property protected pure range record register reject release rem
report restrict restrict_guarantee return rol ror select sequence severity shared signal sla sll sra srl
strong subtype then to transport type unaffected units until use variable vmode vprop vunit wait when while
with xnor xor
std ieee work bit boolean character integer natural positive real string time now severity_level
std_logic std_ulogic std_logic_vector unsigned signed resize rising_edge
""".split())

_INT_LIMIT = 2**31 - 1  # VHDL-2008 guarantees integers in -(2**31 - 1) .. 2**31 - 1


def is_identifier(name: str) -> bool:
    """A legal VHDL basic identifier that is not a reserved word."""
    return (re.fullmatch(r"[A-Za-z](_?[A-Za-z0-9])*", name) is not None) and name.lower() not in RESERVED


class Names:
    """Legal, distinct VHDL identifiers (VHDL does not tell case apart)."""

    def __init__(self, taken=()):
        self._taken = {n.lower() for n in taken}

    @staticmethod
    def clean(text: str) -> str:
        s = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")
        if not s:
            s = "x"
        if not s[0].isalpha():
            s = "n" + s if s[0].isdigit() else "x" + s
        return s

    def _free(self, name: str) -> bool:
        return name.lower() not in self._taken and name.lower() not in RESERVED

    def take(self, text: str, suffixes=("",)) -> str:
        """A fresh name from ``text``; every ``name + suffix`` is free and taken from now on."""
        base = self.clean(text)
        name, n = base, 1
        while not all(self._free(name + s) for s in suffixes):
            name, n = f"{base}_{n}", n + 1
        for s in suffixes:
            self._taken.add((name + s).lower())
        return name


def _shape(s: Shape) -> dict:
    return {"width": s.width, "signed": s.signed}


def _common(a: Shape, b: Shape) -> Shape:
    """The shape in which both ``a`` and ``b`` are exact (as Amaranth compares them)."""
    if a.signed == b.signed:
        return a if a.width >= b.width else b
    width = max(a.width + (0 if a.signed else 1), b.width + (0 if b.signed else 1))
    return signed(width)


class _Expressions:
    """Predicate expressions (:mod:`cepc.plan`) → trees of dicts for the ``expr`` macros.

    Every node carries its own shape, computed by Amaranth exactly as the
    decoder of :mod:`cepc.hw.decoder` builds it (arithmetic widens, so it is
    exact), and ``target``: the shape its parent needs it in. Constants also
    say whether an integer literal is exact in their place (``literal``), and
    carry the ENUM member or CHAR string they stand for (``note``).
    """

    def __init__(self, design: DesignPlan, fields: dict[str, str]):
        self.tuple = design.tuple
        self.fields = fields  # SQL field name → VHDL signal
        self.used: list[str] = []
        # a partial match's registers (PAgg), by index: (VHDL signal, shape); set by the caller for
        # each place an aggregate is read (a predecessor's registers, the chosen ones, the match's)
        self.registers: dict[int, tuple[str, Shape]] = {}

    def value(self, e: PExpr) -> Value:
        if isinstance(e, PConst):
            return Const(e.value)
        if isinstance(e, PField):
            f = self.tuple.field(e.name)
            return Signal(signed(f.width) if f.signed else unsigned(f.width))
        if isinstance(e, PAgg):
            return Signal(self.registers[e.register][1])
        if isinstance(e, PNeg):
            return -self.value(e.operand)
        if isinstance(e, PArith):
            a, b = self.value(e.left), self.value(e.right)
            return a + b if e.op == "+" else a - b if e.op == "-" else a * b
        return Signal()  # a condition used as a number: one bit

    def node(self, e: PExpr, target: Shape | None = None, note: str = "", literal: bool = False) -> dict:
        own = self.value(e).shape()
        n = {"shape": _shape(own), "target": _shape(target if target is not None else own)}
        t = target if target is not None else own
        if isinstance(e, PConst):
            small = -_INT_LIMIT <= e.value <= _INT_LIMIT
            n.update(kind="const", value=e.value, small=small, literal=literal and small,
                     note=note or ("" if small else str(e.value)),  # a wide constant is written in hex
                     hex=format(e.value & ((1 << t.width) - 1), "x"))
        elif isinstance(e, PField):
            if e.name not in self.used:
                self.used.append(e.name)
            n.update(kind="field", signal=self.fields[e.name])
        elif isinstance(e, PAgg):
            n.update(kind="field", signal=self.registers[e.register][0])
        elif isinstance(e, PNeg):
            n.update(kind="neg", operand=self.node(e.operand, own))
        elif isinstance(e, PArith):
            # operands in the result's shape: every operand value and the result are exact in it
            both_const = isinstance(e.left, PConst) and isinstance(e.right, PConst)
            n.update(kind="arith", op=e.op, left=self.node(e.left, own, literal=not both_const),
                     right=self.node(e.right, own, literal=not both_const))
        elif isinstance(e, PCmp):
            common = _common(self.value(e.left).shape(), self.value(e.right).shape())

            def side(x: PExpr, other: PExpr) -> dict:
                # both operands in the common shape (numeric_std would compare unequal widths
                # exactly too, but GHDL 2.0's synthesis fails on some); a small constant stays
                # an integer literal, which numeric_std compares exactly with any width
                return self.node(x, common, note=self.note(x, other), literal=True)

            n.update(kind="cmp", op=e.op, left=side(e.left, e.right), right=side(e.right, e.left))
        elif isinstance(e, PBool) and e.op == "not":
            n.update(kind="not", operand=self.node(e.operands[0]))
        elif isinstance(e, PBool):
            n.update(kind="logic", op=e.op, operands=[self.node(o) for o in e.operands])
        else:  # pragma: no cover
            raise TypeError(e)
        return n

    def note(self, x: PExpr, other: PExpr) -> str:
        """What a constant compared with an ENUM or CHAR field stands for, for a comment."""
        if not isinstance(x, PConst) or not isinstance(other, PField):
            return ""
        f = self.tuple.field(other.name)
        if f.kind == "enum" and 0 <= x.value < len(f.members):
            text = f.members[x.value]
        elif f.kind == "char" and x.value >= 0:
            text = f.decode(x.value & ((1 << f.width) - 1))
        else:
            return ""
        return "'" + text.replace("*/", "* /").replace("\n", " ") + "'"


def _nfa_states(q: QueryPlan, pred_names: list[str], names: Names) -> list[dict]:
    """The states of one query's NFA core, named after their labels ('.' is 'any')."""
    labels = [names.take("any" + lab[1:] if lab.startswith(".") else lab, ("_state", "_reach"))
              for lab in q.nfa.labels]
    read = {t for preds in q.nfa.predecessors for t in preds}
    states = []
    for s, label in enumerate(q.nfa.labels):
        p = q.nfa.pred[s]
        states.append({
            "index": s, "label": label, "name": labels[s], "start": q.nfa.start[s], "accept": q.nfa.accept[s],
            "pred": pred_names[p] if p is not None else None,
            "predecessors": [labels[t] for t in q.nfa.predecessors[s]],
            "read": s in read,  # some state's predecessor: its current bit is used
        })
    return states


def _partial_match(q: QueryPlan, design: DesignPlan, names: Names, pred_aliases: list[str]) -> dict:
    """The core of a query with partial-match registers: mirrors :class:`cepc.hw.nfa_core.PartialMatchCore`.

    Everything is named after the query (states after their labels, registers after their
    aggregates); every expression is a tree for the ``expr`` macros, with each register read
    where the hardware reads it: a predecessor's (DEFINE aggregates, WITHIN, the length bound),
    the chosen predecessor's (the update), the match's (MEASURES).
    """
    nfa, regs, n = q.nfa, q.registers, q.nfa.n_states
    tup = design.tuple
    fields = {f.name: names.take("f_" + f.name) for f in tup.fields}
    exprs = _Expressions(design, fields)
    shapes = [Shape(r.width, r.signed) for r in regs]
    # (distinct: a scaled register's name, `min_v_x3`, may be another's, MIN of a field `v_x3`)
    reg_namer = Names()
    reg_names = [reg_namer.take(r.name) for r in regs]
    per_state = ("_state", "_fresh", "_took", "_on", "_fresh_wins", "_end",
                 *(f"_{r}{x}" for r in reg_names for x in ("", "_base", "_new")))
    labels = [names.take("any" + lab[1:] if lab.startswith(".") else lab, per_state) for lab in nfa.labels]

    def registers_of(s: int, suffix: str) -> dict[int, tuple[str, Shape]]:
        return {r: (f"{labels[s]}_{reg_names[r]}{suffix}", shapes[r]) for r in range(len(regs))}

    def cond(e: PExpr, registers: dict) -> dict:
        exprs.registers = registers
        return exprs.node(e)

    def fit(e: PExpr, r: int, registers: dict) -> dict:
        """A value assigned to register r: Amaranth's ``.eq``, extended by its own signedness or truncated."""
        exprs.registers = registers
        return {"kind": "fit", "node": exprs.node(e), "width": regs[r].width}

    def holds(s: int, p: int | None) -> dict | None:
        """s's predicate against p's partial match (None: no partial match); None: no predicate."""
        idx = nfa.pred[s]
        if idx is None:
            return None
        pred = q.predicates[idx]
        if not pred.aggregate:
            return {"kind": "bit", "signal": pred_aliases[idx]}
        return {"kind": "cond", "node": cond(pred.expr, registers_of(p, ""))}

    count = next((i for i, r in enumerate(regs) if r.func == "COUNT"), None)
    order = q.order_register
    smaller_wins = q.latest and regs[order].func == "COUNT"
    better = "<" if smaller_wins else ">"

    def updated(s: int, r: int, fresh: bool) -> list[dict]:
        """Register r of state s after the tuple, as a chain of (condition, value)."""
        reg = regs[r]
        base = registers_of(s, "_base")
        if reg.func == "COUNT":
            return [{"value": fit(PConst(1) if fresh else PArith("+", PAgg(r), PConst(1)), r, base)}]
        f = reg.source
        if reg.func == "LAST" or fresh:
            return [{"value": fit(f, r, base)}]
        if reg.func == "FIRST":
            return [{"value": {"kind": "signal", "signal": base[r][0]}}]
        if reg.func in ("MIN", "MAX"):
            op = "<" if reg.func == "MIN" else ">"
            return [{"when": {"kind": "cond", "node": cond(PCmp(op, f, PAgg(r)), base)}, "value": fit(f, r, base)},
                    {"value": {"kind": "signal", "signal": base[r][0]}}]
        return [{"value": fit(PArith("+", PAgg(r), f), r, base)}]  # SUM

    states = []
    for s in range(n):
        cands = []
        for p in nfa.predecessors[s]:
            cname = names.take(f"{labels[s]}_from_{labels[p]}", ("", "_win", "_over"))
            olds = registers_of(p, "")
            cands.append({
                "name": cname, "source": labels[p], "holds": holds(s, p),
                # WITHIN: the window is at least the time since p's match began
                "extend": cond(PCmp(">=", PConst(q.within),
                                    PArith("-", PField(q.time_field), PAgg(q.start_time_register))), olds)
                if q.within is not None else None,
                "full": cond(PCmp("==", PAgg(count), PConst(q.max_length)), olds)
                if count is not None and not q.bounded else None,
                "key": olds[order][0],
            })
        registers = []
        for r, reg in enumerate(regs):
            lo = q.register_offset(s, r)
            fresh = updated(s, r, True)
            chain = ([{"when": {"kind": "bit", "signal": f"{labels[s]}_fresh_wins"}, "value": fresh[0]["value"]}]
                     + updated(s, r, False)) if cands else fresh
            registers.append({
                "name": reg.name, "old": f"{labels[s]}_{reg_names[r]}", "base": f"{labels[s]}_{reg_names[r]}_base",
                "new": f"{labels[s]}_{reg_names[r]}_new", "lo": lo, "hi": lo + reg.width - 1,
                "width": reg.width, "signed": reg.signed, "chain": chain,
                # (a register kept once, not per state, is written from the first state's: all are equal)
                "writes": s == 0 or r not in q.shared_registers,
                "sources": [{"win": c["name"] + "_win", "old": f"{labels[p]}_{reg_names[r]}"}
                            for c, p in zip(cands, nfa.predecessors[s])],
            })
        states.append({
            "index": s, "label": nfa.labels[s], "name": labels[s], "start": nfa.start[s], "accept": nfa.accept[s],
            "fresh": holds(s, None) if nfa.start[s] else None, "candidates": cands, "registers": registers,
            "key": f"{labels[s]}_{reg_names[order]}_new",
        })
    measure_regs = [names.take(f"match_{reg_names[r]}") for r in range(len(regs))]
    exprs.registers = {r: (measure_regs[r], shapes[r]) for r in range(len(regs))}
    measures, lo = [], 0
    for meas in q.measures:
        node = exprs.node(meas.expr)
        measures.append({"name": meas.name, "lo": lo, "hi": lo + meas.width - 1, "width": meas.width,
                         "bool": meas.kind == "bool", "node": node})
        lo += meas.width
    nodes = [c[k]["node"] for st in states for c in st["candidates"] for k in ("holds",)
             if c[k] and c[k]["kind"] == "cond"]
    nodes += [c[k] for st in states for c in st["candidates"] for k in ("extend", "full") if c[k]]
    nodes += [step[k]["node"] for st in states for r in st["registers"] for step in r["chain"]
              for k in ("when", "value") if k in step and step[k]["kind"] in ("cond", "fit")]
    nodes += [m["node"] for m in measures]

    # what the core reads, so that it declares nothing else (GHDL warns of an unused signal)
    refs: set[str] = set()

    def walk(node: dict) -> None:
        if node.get("kind") == "field":
            refs.add(node["signal"])
        for key in ("left", "right", "operand"):
            if key in node:
                walk(node[key])
        for o in node.get("operands", ()):
            walk(o)

    for node in nodes:
        walk(node)
    for st in states:
        for c in st["candidates"]:
            if c["holds"] and c["holds"]["kind"] == "bit":
                refs.add(c["holds"]["signal"])
            if len(st["candidates"]) > 1:  # candidates compete by their order register
                refs.add(c["key"])
        if st["fresh"] and st["fresh"]["kind"] == "bit":
            refs.add(st["fresh"]["signal"])
        for r in st["registers"]:
            refs.update(step["value"]["signal"] for step in r["chain"] if step["value"]["kind"] == "signal")
    for st in states:
        for r in st["registers"]:
            if r["base"] in refs:  # the chosen predecessor's register: a multiplexer over theirs
                refs.update(src["old"] for src in r["sources"])
    reported = any(m in refs for m in measure_regs)  # the accepting state that reports is chosen
    accepting = [st for st in states if st["accept"]]
    if reported and len(accepting) > 1:
        refs.update(st["key"] for st in accepting)
    fits = [step["value"]["node"] for st in states for r in st["registers"] for step in r["chain"]
            if step["value"]["kind"] == "fit"] + [m["node"] for m in measures if not m["bool"]]
    used = [{"name": f, "signal": fields[f], "lo": tup.field(f).offset,
             "hi": tup.field(f).offset + tup.field(f).width - 1, "width": tup.field(f).width,
             "signed": tup.field(f).signed} for f in exprs.used]
    return {
        "states": states, "fields": used, "better": better, "latest": q.latest, "order": regs[order].name,
        "registers": [{"name": r.name, "width": r.width, "signed": r.signed, "match": measure_regs[i]}
                      for i, r in enumerate(regs)],
        "measures": measures, "measures_width": max(1, q.measures_width), "payload_width": q.payload_width,
        "needs_to_u1": _needs_to_u1(nodes), "within": q.within,
        "refs": sorted(refs), "reported": reported,
        "fit_unsigned": any(not n["shape"]["signed"] for n in fits),
        "fit_signed": any(n["shape"]["signed"] for n in fits),
    }


def _table(q: QueryPlan, tup, top: Top) -> dict:
    """The parameters of a query's table partitioner, as :class:`~cepc.hw.partition.TablePartitioner` computes them."""
    table = table_partitioner(q, tup, top.partitions, top.ways, top.evict_after)
    table._MustUse__silence = True  # a calculator here: the VHDL comes from the template
    kw = key_width(tup, q)
    return {
        "direct": table.direct, "ways": table.ways, "buckets": table.buckets,
        "index_bits": max(1, table.index_bits), "bank_depth": table.bank_depth,
        "bank_bits": table.bank_bits_low,
        # the H3 rows as one bit string, row 0 in the lowest bits (written last)
        "hash_rows": "".join(format(row, f"0{kw}b") for row in reversed(table.hash_rows)) or "0",
        # the key's bits stored as its tag (quotient_tag), MSB first
        "tag_mask": "".join("1" if b in table.tag_bits else "0" for b in reversed(range(kw))),
        "stamp_period": table._period or 0,
    }


def _within(q: QueryPlan, tup) -> dict:
    """WITHIN's exact eviction (:func:`cepc.hw.top.within_expiry`); the template biases a signed time."""
    f = tup.field(q.time_field)
    width, window = within_expiry(q, tup)
    return {"field": q.time_field, "lo": f.offset, "hi": f.offset + f.width - 1, "signed": f.signed,
            "expiry_width": width, "window": format(window, f"0{width}b")}


def unsupported(design: DesignPlan, decoder: bool = True) -> str | None:
    """What in ``design`` the VHDL backend cannot build yet, as a user-facing message; None if nothing.

    The DFA of ``--automaton dfa`` and the per-state predicates of ``--no-decoder`` are Verilog-only:
    a design that needs them is refused rather than given different hardware.
    """
    if any(q.dfa is not None for q in design.queries):
        return "--automaton dfa is Verilog-only for now: the VHDL backend builds the NFA; use --hdl verilog"
    if not decoder:
        return "--no-decoder is Verilog-only for now: the VHDL backend has the shared decoder; use --hdl verilog"
    return None


# the device primitives the VHDL can instantiate, by family: ``render(primitives="ecp5")``
PRIMITIVES = ("ecp5",)


def context(design: DesignPlan, top: Top, name: str, options: dict, primitives: str | None = None,
            models: bool = False) -> dict:
    """Everything the templates need, computed from the plan and the top's options (``render``
    says what ``primitives`` and ``models`` do)."""
    if primitives not in (None, *PRIMITIVES):
        raise ValueError(f"the VHDL instantiates the primitives of {' or '.join(PRIMITIVES)}, not {primitives!r}")
    tup = design.tuple
    # the two-cycle update (Top.update_cycles 2: the table partitioner, a keyed design): each table's
    # lookup registered at a fifth stage, the hold of a tuple of the bucket of the one before it, and
    # a second record register; the three-cycle update (lag 2): registered at a sixth stage too, a
    # register stage after the framer (`front`), and the hold of a tuple of the bucket of either of
    # the two before it
    lag = top.update_cycles - 1
    spacing = hold_spacing(lag, top.hazards == "stall")  # (None: the tables space no keys)
    depth = partitioner_depth(design, top.partitions, top.partitioner, top.update_cycles)
    entity = {part: f"{name}_{part}" for part in
              ("framer", "decoder", "delay_line", "fifo", "pipeline_partitioner", "partition_element",
               "partition_tail", "table_partitioner", "single_partition", "replica")}

    # the decoder: fields as named signals, one named signal per predicate
    dec = Names(["tuple_data", "preds", "to_u1", "rtl"])
    field_signal = {f.name: dec.take("f_" + f.name) for f in tup.fields}
    exprs = _Expressions(design, field_signal)
    predicates, pred_base = [], 0
    # the top: fixed names first, then a prefix per query that leaves them alone
    top_names = Names(list(top.signature.members) + [
        # the top's own signals, constants and types
        "clk", "rst", "en", "slot", "accept", "a_valid", "a_raw", "b_valid", "b_raw", "b_preds",
        "t_valid", "t_data", "t_raw", "t_preds", "t_seq", "line_valid", "line_data", "f_valid", "f_data", "f_ready",
        "spill_valid", "spill_data", "dropping", "turn", "chosen", "pick", "waiting", "waited", "evictions", "room", "hold",
        "tuple_width", "pred_width",
        "seq_width", "key_width", "query_width", "record_bits", "depth", "fifo_depth", "stall_margin", "queries",
        "out_valid", "out_data", "out_read", "levels", "tuples_in_count", "matches_out_count", "dropped_count",
        "evicted_count", "record_array", "level_array", "m_valid", "decoded", "malformed_count",
        # labels
        "framer", "decoder", "payload", "spill", "reads", "tuple_stage", "predicate_stage", "seq_stage", "spill_stage",
        "stall_bucket", "payload5", "mid_valid", "mid_data", "front_valid", "front_data", "front_stage", "takes",
        "stall", "arbiter", "output_stage", "rtl", name, *entity.values()])
    suffixes = ("_key", "_slot", "_out_valid", "_out_key", "_out_state", "_hit", "_free", "_next", "_match",
                "_evicted", "_drop", "_record", "_record_valid", "_partitioner", "_nfa", "_matches", "_record_stage",
                "_record6", "_record6_valid", "_record6_stage", "_next_key", "_adjacent", "_now", "_next_expiry",
                "_now_stage", "_measures", "_overflow")
    queries = []
    for q in design.queries:
        prefix = top_names.take(q.name, suffixes)
        pred_names = [dec.take(f"{prefix}_{p.name}") for p in q.predicates]
        for i, p in enumerate(q.predicates):
            # a predicate with aggregates reads the partial match: the NFA core evaluates it per edge
            predicates.append({"signal": pred_names[i], "query": q.name, "name": p.name, "index": pred_base + i,
                               "expr": None if p.aggregate else exprs.node(p.expr)})
        nfa_names = Names(["state", "preds", "next_state", "match", "rtl", "tuple_data", "measures", "overflow", "fit",
                           "matched", "to_u1"])
        keys = []
        for k in q.key_fields:
            f = tup.field(k)
            keys.append({"field": k, "lo": f.offset, "hi": f.offset + f.width - 1})
        kind = top.partitioner if q.key_fields else "single"
        queries.append({
            "name": q.name, "index": q.index, "prefix": prefix, "skip": q.skip, "pattern": q.pattern,
            "keyed": bool(q.key_fields), "key_parts": keys, "key_width": key_width(tup, q) if q.key_fields else 1,
            "n_preds": len(q.predicates), "pred_lo": pred_base, "pred_hi": pred_base + len(q.predicates) - 1,
            "pred_width": max(1, len(q.predicates)),
            "preds": [{"name": n, "label": p.name, "index": i, "alias": nfa_names.take("pred_" + p.name)}
                      for i, (n, p) in enumerate(zip(pred_names, q.predicates))],
            "n_states": q.nfa.n_states, "states": None, "nfa_entity": f"{name}_{prefix}_nfa",
            "kind": kind, "partitioner": {"single": entity["single_partition"], "table": entity["table_partitioner"],
                                          "pipeline": entity["pipeline_partitioner"]}[kind],
            "table": _table(q, tup, top) if kind == "table" else None,
            "pm": None,
            # the partition's payload: the state vector, then (with partial matches) each state's registers
            "state_width": q.state_width, "vector_width": q.vector_width,
            "measures_width": q.measures_width,
            "within": _within(q, tup) if q.within is not None and q.key_fields else None,
        })
        # state names live in the NFA entity; predicate aliases there too
        aliases = [p["alias"] for p in queries[-1]["preds"]]
        if q.tracks_matches:
            queries[-1]["pm"] = _partial_match(q, design, nfa_names, aliases)
        else:
            queries[-1]["states"] = _nfa_states(q, aliases, nfa_names)
        pred_base += len(q.predicates)

    fields = []
    for fname in exprs.used:
        f = tup.field(fname)
        note = ""
        if f.kind == "enum":
            note = ", ".join(f"{i} '{m}'" for i, m in enumerate(f.members))
        elif f.kind == "char":
            note = f"CHAR({f.length}), first character in the lowest byte"
        fields.append({"name": fname, "signal": field_signal[fname], "lo": f.offset, "hi": f.offset + f.width - 1,
                       "width": f.width, "signed": f.signed, "kind": f.kind, "note": note.replace("\n", " ")})

    text_options = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())
    uses = {kind: any(q["kind"] == kind for q in queries) for kind in ("pipeline", "table", "single")}
    dp16kd = primitives == "ecp5" and uses["table"]
    header = header_lines(design, top, text_options)
    if dp16kd:
        header.append("Block RAM: the ECP5's DP16KD, instantiated (read through its output register)"
                      + ("; its behavioural model is in this file, for simulation only" if models else ""))
    return {
        "name": name,
        "entity": entity,
        "header": header,
        "bus_width": top.bus_width,
        "bus_bytes": top.bus_width // 8,
        "tuple_bits": tup.width,
        "tuple_bytes": tup.nbytes,
        "tuple_width": top.tuple_width,
        "seq_width": SEQ_WIDTH,
        "counter_width": COUNTER_WIDTH,
        "record_key_width": record_key_width(design),
        "query_width": query_id_width(design),
        "record_width": top.record_width,
        "measures_width": record_measures_width(design),
        "fifo_depth": OUTPUT_FIFO_DEPTH,
        "stall_margin": stall_margin(top.update_cycles),  # (cepc.hw.top: `room`)
        "lag": lag,
        # --hazards stall: each table forwards nothing, and the top holds a tuple while a key of its
        # bucket is within the spacing ahead of it (with `lag`, the same hold; with `lag` 2, while it
        # is either of the two ahead of it)
        "stall": top.hazards == "stall",
        "holds": bool(lag) or top.hazards == "stall",
        "spaced": spacing is not None,
        "stall_spacing": top.stall_spacing,
        # (the tables' SPACING; a constant of 2 where they do not space their keys, never read)
        "table_spacing": spacing or 2,
        "depth": depth,
        "pipelined": top.pipelined,
        "tick_period": tick_period(top.evict_after) if top.evict_after else 0,
        "timer_max": TIMER_MAX,
        "pred_width": max(1, pred_base),
        "fields": fields,
        "predicates": predicates,
        "needs_to_u1": _needs_to_u1([p["expr"] for p in predicates if p["expr"]]),
        "queries": queries,
        # the partitioner entities some query uses (the file holds only those)
        "uses": uses,
        # the table's banks as DP16KD instances, and the model of one beside them (simulation only)
        "dp16kd": dp16kd, "dp16kd_model": dp16kd and models,
        "stamp_bits": STAMP_BITS, "table_forward": FORWARD,
        "stream": design.stream,
    }


def _needs_to_u1(nodes: list[dict]) -> bool:
    """Whether some condition is used as a number (a comparison of comparisons)."""
    def walk(n: dict, as_number: bool) -> bool:
        if n["kind"] in ("cmp", "logic", "not") and as_number:
            return True
        if n["kind"] == "cmp":
            return walk(n["left"], True) or walk(n["right"], True)
        if n["kind"] == "logic":
            return any(walk(o, False) for o in n["operands"])
        if n["kind"] == "not":
            return walk(n["operand"], False)
        if n["kind"] == "neg":
            return walk(n["operand"], True)
        if n["kind"] == "arith":
            return walk(n["left"], True) or walk(n["right"], True)
        return False

    return any(walk(n, False) for n in nodes)


def environment() -> jinja2.Environment:
    if not (TEMPLATES / "design.vhd.j2").exists():
        raise ToolError(f"the VHDL templates are missing ({TEMPLATES}); run cepc from its checkout")
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)


def render(design: DesignPlan, top: Top, name: str, options: dict, primitives: str | None = None,
           models: bool = False) -> str:
    """The whole design as one VHDL-2008 file.

    ``primitives="ecp5"``: a table partitioner's banks are the ECP5's DP16KD block RAMs, instantiated
    and read through their own output registers (cycle for cycle what the generic VHDL infers, which
    Yosys maps without that register); for synthesis, where the component is the device's cell
    (:mod:`cepc.synth.vhdl`). With ``models``, the file also holds a behavioural DP16KD, for a
    simulator."""
    top._MustUse__silence = True  # Amaranth never elaborates this Top: the VHDL comes from the plan
    if not is_identifier(name):
        raise ValueError(f"--top must be a VHDL identifier, not {name!r}")
    problem = unsupported(design)
    if problem:
        raise ValueError(problem)
    return environment().get_template("design.vhd.j2").render(context(design, top, name, options, primitives, models))


def emit(design: DesignPlan, top: Top, output: Path, name: str, options: dict, primitives: str | None = None,
         models: bool = False) -> Path:
    """Write the VHDL to ``output`` (``render``) and the sidecar (as for Verilog) beside it; returns the
    sidecar path."""
    output.write_text(render(design, top, name, options, primitives, models))
    side = output.with_suffix(".json")
    side.write_text(json.dumps(sidecar(design, top, options), indent=2) + "\n")
    return side
