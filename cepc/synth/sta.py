"""Every endpoint that misses the clock, from nextpnr's SDF: where a design's time goes, not one path.

nextpnr's report gives one critical path per clock: the worst, which moves from one part of a design
to another with the placement. What to fix is better told by all the flip-flops whose inputs arrive
late. nextpnr writes the delays it timed to an SDF file (``--sdf``): each cell's delays from its
inputs to its outputs (``IOPATH``), each routed connection's (``INTERCONNECT``), each flip-flop's and
block's setup time (``SETUPHOLD``). :func:`endpoints` reads them back into a graph and takes, from
every register clocked by the design's clock, the latest arrival at every input with a setup time
clocked by it: a static timing analysis of the routed design, as nextpnr's own (its worst endpoint
is nextpnr's critical path, to the picosecond on the designs here). The endpoints are grouped by
the register they belong to (``finance0_partitioner.state5``: its bits), named as in the design.

The design's clock is the one that clocks most cells: the host link's own clock drives a few
hundred flip-flops, and paths between the two clocks (through synchronisers) are not timed here.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass

# clock pins, where the SDF gives no setup check naming them (a block's, for instance)
CLOCK_PINS = {"CLK", "CLKA", "CLKB", "RCLK", "WCLK", "CLK0"}
GROUPS = 12  # the report's groups: the worst this many registers

_IOPATH = re.compile(r"\(IOPATH (\S+) (\S+) \((\d+):(\d+):(\d+)\)")
_INTERCONNECT = re.compile(r"\(INTERCONNECT (\S+) (\S+) \((\d+):(\d+):(\d+)\)")
_SETUP = re.compile(r"\((?:SETUPHOLD|SETUP) \((?:posedge|negedge) (\S+)\) \(posedge (\S+)\) \((\d+):(\d+):(\d+)\)")


@dataclass(frozen=True)
class EndpointGroup:
    """A register's inputs that arrive late: its worst arrival (setup included) and how many miss, and
    the path into its worst input: the register it starts from (``source``), the cells it crosses
    (``levels``: a carry chain's cells each) and its time in them (with the clock to output and the
    setup: ``logic_ns``) and in routes (``routing_ns``)."""

    register: str
    worst_ns: float
    failing: int
    source: str = ""
    levels: int = 0
    logic_ns: float = 0.0
    routing_ns: float = 0.0

    def path_text(self) -> str:
        """``a.b ← a.c: 8.03 ns, 5 logic levels (1.70 ns logic, 6.33 ns routing)``"""
        return (f"{self.register} ← {self.source}: {self.worst_ns:.2f} ns, {self.levels} logic "
                f"{'level' if self.levels == 1 else 'levels'} ({self.logic_ns:.2f} ns logic, "
                f"{self.routing_ns:.2f} ns routing)")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Endpoints:
    """The design clock's endpoints against ``period_ns``: how many in all, how many miss, the worst
    arrival and the registers that miss it, worst first (at most :data:`GROUPS`)."""

    period_ns: float
    total: int
    failing: int
    worst_ns: float
    registers: int  # registers with a late input
    groups: tuple[EndpointGroup, ...]

    def to_json(self) -> dict:
        return {"period_ns": self.period_ns, "total": self.total, "failing": self.failing,
                "worst_ns": self.worst_ns, "registers": self.registers, "groups": [g.to_json() for g in self.groups]}

    def paths(self, n: int = 4) -> list[str]:
        """The worst path into each of the ``n`` worst registers, one line each (:meth:`EndpointGroup.path_text`)."""
        return [g.path_text() for g in self.groups[:n]]

    def summary(self, n: int = 4) -> str:
        """``33 of 36,529 endpoints miss it, in 8 registers: a (4 inputs, 8.03 ns), b (1 input, 7.79 ns), …``,
        or, where nextpnr's rounding missed a clock every endpoint meets, ``none of 36,529 endpoints misses it``"""
        if not self.failing:
            return f"none of {self.total:,} endpoints misses it (the worst arrives at {self.worst_ns:.2f} ns)"
        shown = ", ".join(f"{g.register} ({g.failing} {'input' if g.failing == 1 else 'inputs'}, {g.worst_ns:.2f} ns)"
                          for g in self.groups[:n])
        return (f"{self.failing:,} of {self.total:,} endpoints miss it, in {self.registers:,} "
                f"{'register' if self.registers == 1 else 'registers'}: {shown}{', …' if self.registers > n else ''}")


def _pin(token: str) -> tuple[str, str]:
    cut = token.rfind("/")
    return token[:cut], token[cut + 1:]


# (an iCE40 logic cell is named after its LUT where one feeds its flip-flop: ``d_SB_LUT4_I3_LC``)
_CELL = re.compile(r"(_TRELLIS_FF|_SB_DFF|_SB_LUT4|_DFFLC|\$DPRAM|\$CCU2|_LUT4_|_LC$).*$")


def _register(instance: str) -> str:
    """The register an endpoint's cell belongs to, as the design names it: the cell names' suffixes
    cut (``d$309_TRELLIS_FF_Q_565`` → ``d$309``), and a copy's or a block's module (``.q``, ``.block3``)."""
    name = _CELL.sub("", instance.replace("\\", ""))
    name = re.sub(r"\.(block|q)\d*$", "", name)
    return name.removeprefix("link.design.") or instance


def endpoints(sdf: str, period_ns: float) -> Endpoints:
    """The design clock's endpoints in ``sdf`` (nextpnr's, in ps) against a clock of ``period_ns``."""
    instance = None
    arcs = defaultdict(list)  # (instance, pin) -> [((instance, pin), delay, whether a route)]
    setup: dict[tuple[str, str], int] = {}
    clock_pins: dict[str, set] = defaultdict(set)
    for line in sdf.splitlines():
        s = line.strip()
        if s.startswith("(INSTANCE"):
            instance = s[len("(INSTANCE"):].rstrip(")").strip()
        elif s.startswith("(IOPATH"):
            a, b, d = _IOPATH.match(s).group(1, 2, 5)
            arcs[(instance, a)].append(((instance, b), int(d), False))
        elif s.startswith("(INTERCONNECT"):
            a, b, d = _INTERCONNECT.match(s).group(1, 2, 5)
            arcs[_pin(a)].append((_pin(b), int(d), True))
        elif s.startswith("(SETUP"):
            m = _SETUP.match(s)
            if m:
                pin, clock, d = m.group(1, 2, 5)
                setup[(instance, pin)] = max(setup.get((instance, pin), 0), int(d))
                clock_pins[instance].add(clock)

    def is_clock(inst: str, pin: str) -> bool:
        return pin in clock_pins[inst] or pin in CLOCK_PINS

    # each instance's clock: what drives its clock pin; the design's, the one that clocks the most
    clock_of = {b[0]: a[0] for a, loads in arcs.items() for b, _, _ in loads if is_clock(*b)}
    design_clock = Counter(clock_of.values()).most_common(1)[0][0] if clock_of else None
    # a clock pin's arcs within its cell launch (clock to output); every other arc is a delay. Each
    # pin's latest arrival remembers the arc it came by (`came`: None where a register launched it)
    graph: dict[tuple[str, str], list] = defaultdict(list)
    arrival: dict[tuple[str, str], int] = {}
    came: dict[tuple[str, str], tuple | None] = {}
    for (inst, a), loads in arcs.items():
        if not is_clock(inst, a) or not any(b[0] == inst for b, _, _ in loads):
            graph[(inst, a)].extend(loads)
            continue
        if clock_of.get(inst) == design_clock:
            for b, d, _ in loads:
                if d > arrival.get(b, -1):
                    arrival[b], came[b] = d, None
    indegree: Counter = Counter(b for loads in graph.values() for b, _, _ in loads)
    ready = deque(n for n in set(graph) | set(arrival) if indegree[n] == 0)
    while ready:
        n = ready.popleft()
        for b, d, route in graph.get(n, ()):
            if n in arrival and arrival[n] + d > arrival.get(b, -1):
                arrival[b], came[b] = arrival[n] + d, (n, d, route)
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)

    def path_into(pin: tuple[str, str], total: int) -> dict:
        """The latest path into ``pin``, back to the register that launched it: that register, the
        cells crossed, the time in routes, the rest (clock to output, cells, setup) in logic."""
        routing, levels = 0, 0
        while came.get(pin) is not None:
            pin, d, route = came[pin]
            if route:
                routing += d
            else:  # (an arc through a cell: a carry chain's cell each time the carry crosses it)
                levels += 1
        return {"source": _register(pin[0]), "levels": levels, "logic_ns": round((total - routing) / 1000, 2),
                "routing_ns": round(routing / 1000, 2)}

    ends = [(arrival[p] + s, p) for p, s in setup.items() if p in arrival and clock_of.get(p[0]) == design_clock]
    late: Counter = Counter()  # per register, its inputs that miss the clock
    worst: dict[str, tuple[int, tuple[str, str]]] = {}  # and the latest of them
    period = period_ns * 1000
    for t, pin in ends:
        if t > period:
            reg = _register(pin[0])
            late[reg] += 1
            worst[reg] = max(worst.get(reg, (t, pin)), (t, pin))
    groups = sorted((EndpointGroup(reg, round(t / 1000, 2), late[reg], **path_into(pin, t)) for reg, (t, pin) in worst.items()),
                    key=lambda g: (-g.worst_ns, -g.failing, g.register))
    return Endpoints(period_ns=round(period_ns, 3), total=len(ends), failing=sum(g.failing for g in groups),
                     worst_ns=round(max((t for t, _ in ends), default=0) / 1000, 2), registers=len(groups),
                     groups=tuple(groups[:GROUPS]))
