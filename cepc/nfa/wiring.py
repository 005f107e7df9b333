"""AST → NFA by the wiring algorithm of Woods, Teubner and Alonso (VLDB 2010, §4.5–4.6).

Every predicate occurrence of the pattern becomes one state (in hardware: one
flip-flop). One traversal of the pattern passes a set of *activation signals*
down the tree; a leaf takes the set it receives as its inputs and hands its own
output back up. The signal ``START`` is the default activation (Woods' '1'):
a state wired to it may begin a match at any tuple. The result has no ε-edges.

Rules (Woods Fig. 5), with ``act`` the incoming activation set:

* leaf ``A``:    wire ``act`` → A; return {A}
* ``r1 r2``:     return wire(r2, wire(r1, act))
* ``r1 | r2``:   return wire(r1, act) ∪ wire(r2, act)
* ``r*``:        loop = outputs of r; wire(r, act ∪ loop); return act ∪ loop
* ``r+``:        as ``r*`` but return only what r returns
* ``r?``:        return act ∪ wire(r, act)

"Outputs of r" is what r returns for an empty activation set (Woods' step 5);
it is computed by :func:`_outputs`, memoised, so the traversal stays linear.
Counted repetition ``r{n,m}`` expands first into copies with states of their own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import networkx as nx

from ..lang import ast

START = "START"


# --- expanded pattern: counted repetition unrolled, one Leaf per future state ---------


@dataclass(eq=False)
class _Leaf:
    state: int
    pred: str | None  # DEFINE name; None for '.'
    label: str


@dataclass(eq=False)
class _Node:
    kind: str  # seq alt star plus opt
    items: list


def _expand(p: ast.Pattern, counter, occurrences: dict[str, int]):
    if isinstance(p, (ast.Var, ast.AnyTuple)):
        pred = p.name if isinstance(p, ast.Var) else None
        key = pred if pred is not None else "."
        occurrences[key] = occurrences.get(key, 0) + 1
        label = key if occurrences[key] == 1 else f"{key}.{occurrences[key]}"
        return _Leaf(next(counter), pred, label)
    if isinstance(p, ast.Empty):
        return _Node("seq", [])
    if isinstance(p, ast.Seq):
        return _Node("seq", [_expand(i, counter, occurrences) for i in p.items])
    if isinstance(p, ast.Alt):
        return _Node("alt", [_expand(i, counter, occurrences) for i in p.items])
    assert isinstance(p, ast.Repeat)
    if p.max is None:
        mandatory = [_expand(p.child, counter, occurrences) for _ in range(max(p.min - 1, 0))]
        loop = _Node("plus" if p.min >= 1 else "star", [_expand(p.child, counter, occurrences)])
        return _Node("seq", mandatory + [loop])
    items = [_expand(p.child, counter, occurrences) for _ in range(p.min)]
    # r{n,m}: n copies, then (m-n) nested optionals r (r (r)?)? ? so each copy is one state set
    copies = [_expand(p.child, counter, occurrences) for _ in range(p.max - p.min)]
    optional = None
    for copy in reversed(copies):
        optional = _Node("opt", [copy if optional is None else _Node("seq", [copy, optional])])
    if optional is not None:
        items.append(optional)
    return _Node("seq", items)


# --- the wiring traversal ---------------------------------------------------------------


class _Wiring:
    def __init__(self, graph: nx.DiGraph):
        self.graph = graph
        self._outputs: dict[int, frozenset] = {}

    def outputs(self, node) -> frozenset:
        """What ``node`` returns for an empty activation set: the states that can end it."""
        key = id(node)
        if key not in self._outputs:
            self._outputs[key] = self._compute_outputs(node)
        return self._outputs[key]

    def _compute_outputs(self, node) -> frozenset:
        if isinstance(node, _Leaf):
            return frozenset({node.state})
        if node.kind == "alt":
            return frozenset().union(*(self.outputs(i) for i in node.items))
        if node.kind == "seq":
            out: frozenset = frozenset()
            for item in reversed(node.items):
                out |= self.outputs(item)
                if not _nullable(item):
                    break
            return out
        return self.outputs(node.items[0])

    def wire(self, node, act: frozenset) -> frozenset:
        if isinstance(node, _Leaf):
            for signal in act:
                if signal == START:
                    self.graph.nodes[node.state]["start"] = True
                else:
                    self.graph.add_edge(signal, node.state)
            return frozenset({node.state})
        if node.kind == "seq":
            for item in node.items:
                act = self.wire(item, act)
            return act
        if node.kind == "alt":
            return frozenset().union(*(self.wire(i, act) for i in node.items))
        child = node.items[0]
        if node.kind == "opt":
            return act | self.wire(child, act)
        loop = self.outputs(child)
        out = self.wire(child, act | loop)
        return act | out if node.kind == "star" else out


def _nullable(node) -> bool:
    if isinstance(node, _Leaf):
        return False
    if node.kind == "seq":
        return all(_nullable(i) for i in node.items)
    if node.kind == "alt":
        return any(_nullable(i) for i in node.items)
    if node.kind == "plus":
        return _nullable(node.items[0])
    return True


def _leaves(node):
    if isinstance(node, _Leaf):
        yield node
    else:
        for item in node.items:
            yield from _leaves(item)


# --- the result ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Nfa:
    """The wiring NFA of one query: a ``networkx.DiGraph`` plus what hardware needs to read it.

    Nodes are states ``0 … n-1`` with attributes ``pred`` (DEFINE name, None for '.'),
    ``label``, ``start`` (wired to the default activation) and ``accept``. An edge
    ``p → q`` means state p's output is an activation input of q.
    """

    query: str
    graph: nx.DiGraph
    preds: tuple[str, ...]  # DEFINE names the pattern uses, in DEFINE order: the predicate vector
    nullable: bool  # the pattern matches the empty sequence (never reported)

    @property
    def n_states(self) -> int:
        return self.graph.number_of_nodes()

    @property
    def n_edges(self) -> int:
        return self.graph.number_of_edges()

    @property
    def n_preds(self) -> int:
        return len(self.preds)

    @property
    def states(self) -> list[int]:
        return list(range(self.n_states))

    @property
    def start(self) -> frozenset[int]:
        return frozenset(s for s, d in self.graph.nodes(data=True) if d["start"])

    @property
    def accept(self) -> frozenset[int]:
        return frozenset(s for s, d in self.graph.nodes(data=True) if d["accept"])

    def pred(self, state: int) -> str | None:
        return self.graph.nodes[state]["pred"]

    def label(self, state: int) -> str:
        return self.graph.nodes[state]["label"]

    def pred_index(self, state: int) -> int | None:
        """Bit of the predicate vector that gates ``state``; None for '.'."""
        p = self.pred(state)
        return None if p is None else self.preds.index(p)

    def predecessors(self, state: int) -> list[int]:
        return sorted(self.graph.predecessors(state))


def build(query: ast.Query) -> Nfa:
    """The wiring NFA of a checked query."""
    counter = itertools.count()
    tree = _expand(query.pattern, counter, {})
    graph = nx.DiGraph(query=query.name)
    for leaf in _leaves(tree):
        graph.add_node(leaf.state, pred=leaf.pred, label=leaf.label, start=False, accept=False)
    out = _Wiring(graph).wire(tree, frozenset({START}))
    for s in out - {START}:
        graph.nodes[s]["accept"] = True
    used = {d["pred"] for _, d in graph.nodes(data=True) if d["pred"] is not None}
    preds = tuple(d.name for d in query.defines if d.name in used)
    return Nfa(query.name, graph, preds, START in out)


def to_dot(nfas: list[Nfa]) -> str:
    """Graphviz source drawing each query's NFA in a cluster of its own."""
    lines = ["digraph cepc {", "  rankdir=LR;", '  node [shape=circle, fontname="Helvetica"];',
             '  edge [fontname="Helvetica"];']
    for qi, nfa in enumerate(nfas):
        lines.append(f"  subgraph cluster_{qi} {{")
        lines.append(f'    label="{nfa.query}"; style=rounded;')
        lines.append(f'    start_{qi} [shape=point, label="", width=0.15];')
        for s in nfa.states:
            shape = "doublecircle" if s in nfa.accept else "circle"
            lines.append(f'    q{qi}_{s} [label="{nfa.label(s)}", shape={shape}];')
        for s in sorted(nfa.start):
            lines.append(f"    start_{qi} -> q{qi}_{s};")
        for p, q in sorted(nfa.graph.edges):
            lines.append(f"    q{qi}_{p} -> q{qi}_{q};")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
