"""NFA → DFA by the powerset construction, for ``cepc compile --automaton dfa`` (Woods et al. §4.1–4.2).

A DFA state is a set of wiring-NFA states: exactly the state vector the NFA
core would hold, so the DFA reports at the same tuples as the NFA
(:meth:`cepc.plan.NfaPlan.step`). The alphabet is the predicate vector; from
a set S only the predicates of the NFA states S can reach (its successors and
the start states) matter, so each DFA state's transitions enumerate just those
(``2 ** k`` for k distinct predicates) — overlapping predicates are handled
because every combination is a symbol of its own.

This is the construction of :mod:`cepc.nfa.dfa` (the golden model's lock-step
engine), on the hardware plan's NFA and over the full alphabet instead of the
vectors seen in the data, since hardware must handle any tuple. The result is
minimised (Moore's partition refinement over the query's whole predicate
vector, when it has at most :data:`MAX_INPUTS` predicates), so the state count
is the pattern's, not an artefact of the NFA: ``(0|1)* 1 (0|1){i}`` needs
``2 ** (i + 1)`` states. The construction stops at :data:`MAX_STATES`.
"""

from __future__ import annotations

from dataclasses import replace

from ..plan import DesignPlan, DfaPlan, NfaPlan, QueryPlan

MAX_STATES = 1 << 13  # DFA states; past this, `--automaton dfa` is refused
MAX_INPUTS = 12  # distinct predicates one DFA state may read (2 ** MAX_INPUTS transitions)
ENCODINGS = ("onehot", "binary")


class DfaTooLarge(ValueError):
    """The powerset construction would exceed :data:`MAX_STATES` or :data:`MAX_INPUTS`."""


def determinize(nfa: NfaPlan, skip: bool, encoding: str = "onehot", max_states: int = MAX_STATES) -> DfaPlan:
    """The DFA of ``nfa``; ``skip``: AFTER MATCH SKIP PAST LAST ROW (a match empties the state)."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown DFA encoding {encoding!r}; use onehot or binary")
    n = nfa.n_states
    succ = [0] * n
    for s, preds in enumerate(nfa.predecessors):
        for p in preds:
            succ[p] |= 1 << s
    start = sum(1 << s for s in range(n) if nfa.start[s])
    accept = sum(1 << s for s in range(n) if nfa.accept[s])
    ids = {0: 0}
    sets, inputs, table, reports = [0], [], [], []
    todo = 0
    while todo < len(sets):
        active = sets[todo]
        reach = start
        for s in range(n):
            if active >> s & 1:
                reach |= succ[s]
        candidates = [s for s in range(n) if reach >> s & 1]
        ins = sorted({nfa.pred[s] for s in candidates if nfa.pred[s] is not None})
        if len(ins) > MAX_INPUTS:
            raise DfaTooLarge(f"a DFA state reads {len(ins)} predicates, more than {MAX_INPUTS}")
        where = {p: j for j, p in enumerate(ins)}
        row, rep = [], []
        for combo in range(1 << len(ins)):
            nxt = 0
            for s in candidates:
                p = nfa.pred[s]
                if p is None or combo >> where[p] & 1:
                    nxt |= 1 << s
            matched = bool(nxt & accept)
            if matched and skip:
                nxt = 0
            d = ids.get(nxt)
            if d is None:
                if len(sets) >= max_states:
                    raise DfaTooLarge(f"more than {max_states} DFA states")
                d = ids[nxt] = len(sets)
                sets.append(nxt)
            row.append(d)
            rep.append(matched)
        inputs.append(tuple(ins))
        table.append(tuple(row))
        reports.append(tuple(rep))
        todo += 1
    dfa = DfaPlan(tuple(sets), tuple(inputs), tuple(table), tuple(reports), encoding)
    return minimize(dfa)


def minimize(dfa: DfaPlan) -> DfaPlan:
    """Merge equivalent states (same reports and equivalent targets on every predicate vector).

    The block of the empty set stays state 0 (all zeros: a fresh partition); each block keeps its
    lowest-numbered member's set, inputs and transitions, renumbered.
    """
    preds = sorted({i for ins in dfa.inputs for i in ins})
    if len(preds) > MAX_INPUTS:
        return dfa
    n = dfa.n_states
    vectors = [sum(1 << p for j, p in enumerate(preds) if v >> j & 1) for v in range(1 << len(preds))]
    full = [[dfa.step(d, v) for v in vectors] for d in range(n)]
    block = [0] * n
    while True:
        signatures: dict[tuple, int] = {}
        new = [signatures.setdefault((block[d], tuple((block[t], r) for t, r in full[d])), len(signatures))
               for d in range(n)]
        if len(signatures) == len(set(block)):
            break
        block = new
    # renumber blocks in order of their lowest member, so the empty set's block is 0
    first: dict[int, int] = {}
    for d in range(n):
        first.setdefault(block[d], d)
    order = sorted(first, key=first.get)
    number = {b: i for i, b in enumerate(order)}
    reps = [first[b] for b in order]
    return DfaPlan(
        tuple(dfa.sets[d] for d in reps), tuple(dfa.inputs[d] for d in reps),
        tuple(tuple(number[block[t]] for t in dfa.table[d]) for d in reps),
        tuple(dfa.reports[d] for d in reps), dfa.encoding)


def query_dfa(q: QueryPlan, encoding: str = "onehot", max_states: int = MAX_STATES) -> QueryPlan:
    """``q`` with its DFA; a ValueError naming the query if the DFA cannot serve it."""
    if q.tracks_matches:
        raise ValueError(f"--automaton dfa does not support aggregates, MEASURES or WITHIN (query {q.name}): "
                         "their partial matches live in the NFA's states; use --automaton nfa")
    try:
        dfa = determinize(q.nfa, q.skip, encoding, max_states)
    except DfaTooLarge as e:
        raise DfaTooLarge(f"the DFA of query {q.name} is too large for hardware ({e}; state explosion, "
                          "Woods et al. §4.2); use --automaton nfa") from None
    return replace(q, dfa=dfa)


def design_dfa(design: DesignPlan, encoding: str = "onehot", max_states: int = MAX_STATES) -> DesignPlan:
    """Every query of ``design`` as a DFA (see :func:`query_dfa`)."""
    return replace(design, queries=tuple(query_dfa(q, encoding, max_states) for q in design.queries))
