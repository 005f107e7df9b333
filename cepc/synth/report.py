"""Reading what Yosys and nextpnr report: resource use, Fmax per clock, critical paths.

Inputs are the files the tools write: Yosys' ``stat -json`` (cell counts after
technology mapping) and nextpnr's ``--report`` JSON (``utilization``: used and
available per BEL type; ``fmax``: achieved and constraint per clock, in MHz;
``critical_paths``: one per clock pair, a list of clock-to-q, logic, routing
and setup segments with delays in ns). When nextpnr stops before writing its
report (a design that does not fit), :func:`placement_failure` reads its log.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# What each report column means, per family: nextpnr BEL type (used/available), else a Yosys cell count.
FAMILY_RESOURCES = {
    "ecp5": {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "bram": "DP16KD", "lutram": "TRELLIS_RAMW",
             "dsp": "MULT18X18D", "io": "TRELLIS_IO", "pll": "EHXPLLL"},
    "ice40": {"lut": "ICESTORM_LC", "bram": "ICESTORM_RAM", "spram": "ICESTORM_SPRAM", "dsp": "ICESTORM_DSP",
              "io": "SB_IO", "pll": "ICESTORM_PLL"},
}
CARRY_CELLS = {"ecp5": ("CCU2C",), "ice40": ("SB_CARRY",)}
FF_CELL_PREFIX = {"ecp5": ("TRELLIS_FF",), "ice40": ("SB_DFF",)}
LUT_CELLS = {"ecp5": ("LUT4",), "ice40": ("SB_LUT4",)}


@dataclass(frozen=True)
class Resource:
    used: int
    available: int | None = None

    @property
    def percent(self) -> float | None:
        return 100.0 * self.used / self.available if self.available else None


@dataclass(frozen=True)
class ClockTiming:
    name: str
    achieved_mhz: float
    target_mhz: float

    @property
    def met(self) -> bool:
        return self.achieved_mhz >= self.target_mhz


@dataclass(frozen=True)
class CriticalPath:
    clock: str
    delay_ns: float
    logic_levels: int
    logic_ns: float
    routing_ns: float
    start: str
    end: str
    through: tuple[str, ...]  # named signals along the path, in order

    def summary(self) -> str:
        via = " → ".join(self.through) if self.through else f"{self.start} → {self.end}"
        return (f"{self.delay_ns:.2f} ns, {self.logic_levels} logic levels ({self.logic_ns:.2f} ns logic, "
                f"{self.routing_ns:.2f} ns routing): {via}")


@dataclass
class SynthReport:
    board: str
    family: str
    device: str
    package: str
    resources: dict[str, Resource] = field(default_factory=dict)
    clocks: list[ClockTiming] = field(default_factory=list)
    critical_paths: list[CriticalPath] = field(default_factory=list)
    yosys_cells: dict[str, int] = field(default_factory=dict)

    @property
    def timing_met(self) -> bool:
        return all(c.met for c in self.clocks)

    def to_json(self) -> dict:
        return {
            "board": self.board, "family": self.family, "device": self.device, "package": self.package,
            "resources": {k: {"used": r.used, "available": r.available,
                              "percent": round(r.percent, 2) if r.percent is not None else None}
                          for k, r in self.resources.items()},
            "clocks": [{"name": c.name, "achieved_mhz": round(c.achieved_mhz, 2), "target_mhz": c.target_mhz,
                        "met": c.met} for c in self.clocks],
            "critical_paths": [{**asdict(p), "through": list(p.through), "summary": p.summary()}
                               for p in self.critical_paths],
            "yosys_cells": self.yosys_cells,
        }


# --- Yosys ----------------------------------------------------------------------------------------


def yosys_cells(stat: dict, top: str | None = None) -> dict[str, int]:
    """Cell counts of the top module from Yosys' ``stat -json`` output."""
    modules = stat.get("modules", {})
    design = stat.get("design")
    if top is not None and f"\\{top}" in modules:
        mod = modules[f"\\{top}"]
    elif design:
        mod = design
    elif len(modules) == 1:
        mod = next(iter(modules.values()))
    else:
        raise ValueError("the Yosys statistics name no top module")
    cells = mod.get("num_cells_by_type", {})
    return {str(k).lstrip("$"): int(v) for k, v in cells.items()}


def _count(cells: dict[str, int], names: tuple[str, ...], prefix: bool = False) -> int:
    if prefix:
        return sum(n for cell, n in cells.items() if cell.startswith(names))
    return sum(cells.get(name, 0) for name in names)


# --- nextpnr ----------------------------------------------------------------------------------------

_CELL_SUFFIX = re.compile(r"(_(TRELLIS|LUT4|LUT|PFUMX|L6MUX|CCU2C|DP16KD|SB|ICESTORM|DFF|DPR16X4|MULT18)\b.*"
                          r"|_(TRELLIS|LUT4|PFUMX|L6MUX|CCU2C|DP16KD|SB_|ICESTORM|DPR16X4)[A-Z0-9_].*|\$.*)$")


def clean_name(name: str) -> str:
    """A netlist name without the suffixes Yosys and nextpnr add (``e3_key_TRELLIS_FF_Q_2`` → ``e3_key``)."""
    return _CELL_SUFFIX.sub("", name) or name


def _readable(net: str) -> str | None:
    base = clean_name(net)
    if not base or base.startswith(("$", "\\$")) or "$abc$" in net or base.lower() in ("clk", "rst"):
        return None
    return re.sub(r"\[\d+\]$", "", base)


def critical_paths(report: dict) -> list[CriticalPath]:
    out = []
    for cp in report.get("critical_paths", []):
        path = cp.get("path", [])
        if not path:
            continue
        clock = cp.get("to", "").split(" ")[-1]
        logic = [p for p in path if p["type"] in ("logic", "clk-to-q", "setup")]
        routing = [p for p in path if p["type"] == "routing"]
        through: list[str] = []
        for seg in path:
            name = _readable(seg.get("net") or "") if seg["type"] == "routing" else None
            if name and (not through or through[-1] != name):
                through.append(name)
        out.append(CriticalPath(
            clock=clock,
            delay_ns=sum(p["delay"] for p in path),
            logic_levels=sum(1 for p in path if p["type"] == "logic"),
            logic_ns=sum(p["delay"] for p in logic),
            routing_ns=sum(p["delay"] for p in routing),
            start=clean_name(path[0]["from"]["cell"]),
            end=clean_name(path[-1]["to"]["cell"]),
            through=tuple(through),
        ))
    return out


def parse(report: dict, stat: dict | None, *, board: str, family: str, device: str, package: str,
          targets_mhz: dict[str, float] | None = None) -> SynthReport:
    """A :class:`SynthReport` from nextpnr's report (and Yosys' statistics, for carry and FF counts).

    ``targets_mhz`` overrides the constraint nextpnr states per clock (by name)."""
    if family not in FAMILY_RESOURCES:
        raise ValueError(f"unknown FPGA family {family!r}")
    util = report.get("utilization", {})
    cells = yosys_cells(stat) if stat else {}
    res: dict[str, Resource] = {}
    for key, bel in FAMILY_RESOURCES[family].items():
        if bel in util:
            res[key] = Resource(int(util[bel]["used"]), int(util[bel]["available"]))
    if "ff" not in res and cells:
        # iCE40: flip-flops live in logic cells; count them from the mapped netlist
        lc = res.get("lut")
        res["ff"] = Resource(_count(cells, FF_CELL_PREFIX[family], prefix=True), lc.available if lc else None)
    if cells:
        res["carry"] = Resource(_count(cells, CARRY_CELLS[family]))
        res["lut4"] = Resource(_count(cells, LUT_CELLS[family]))
    clocks = []
    for name, f in report.get("fmax", {}).items():
        target = (targets_mhz or {}).get(name, f.get("constraint"))
        clocks.append(ClockTiming(name, float(f["achieved"]), float(target)))
    return SynthReport(board=board, family=family, device=device, package=package, resources=res, clocks=clocks,
                       critical_paths=critical_paths(report), yosys_cells=cells)


# --- failures from the log ----------------------------------------------------------------------------

_NO_BELS = re.compile(r"ERROR: (?:Unable to place cell '[^']*', )?no BELs remaining to implement cell type '(\w+)'")
_TOO_MANY = re.compile(r"ERROR: Design uses more (\w+) \((\d+)\) than available \((\d+)\)")
# the analytic placer (HeAP) gives up when a cell type is over 100 %
_EXPAND = re.compile(r"ERROR: Failed to expand region .* of \d+ (\w+?)s?\s*$", re.M)
_UTIL = re.compile(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%")
# ... and may give up below 100 %, where legalising a dense placement fails (another seed may not)
_NO_LEGAL = re.compile(r"ERROR: Unable to find legal placement for all cells")
# HeAP's last "overlap: COMB=18.3%, RAM=0.0%, …": the share of each group's cells still overlapping
_OVERLAP = re.compile(r"^Info: overlap: (.*)$", re.M)
_OVERLAP_KIND = {"COMB": "lut", "RAM": "bram", "DSP": "dsp"}


def log_utilisation(log: str) -> dict[str, Resource]:
    """The 'Device utilisation' table of a nextpnr log (the last one printed)."""
    res: dict[str, Resource] = {}
    for bel, used, avail, _ in _UTIL.findall(log):
        res[bel] = Resource(int(used), int(avail))
    return res


def placement_failure(log: str) -> tuple[str, Resource | None] | None:
    """(BEL type, its use) if nextpnr stopped because the design does not fit the device."""
    m = _TOO_MANY.search(log)
    if m:
        return m.group(1), Resource(int(m.group(2)), int(m.group(3)))
    m = _NO_BELS.search(log) or _EXPAND.search(log)
    if m:
        bel = m.group(1)
        return bel, log_utilisation(log).get(bel)
    return None


def placement_at_limit(log: str) -> tuple[str, Resource] | None:
    """(the BEL type it could not legalise, its use) if nextpnr's placer could not legalise a design that
    fits on paper ("Unable to find legal placement for all cells, design is probably at utilisation limit"):
    the group HeAP's last iteration left overlapping most (``overlap: COMB=18.3%, RAM=0.0%``: finance5 on
    the UP5K, its logic cells at 90 % and its block RAM at 97 %), else the fullest of the fabric's. Fabric:
    logic, flip-flops, block and LUT RAM (not the clock buffers or the PLL, full by design)."""
    if not _NO_LEGAL.search(log):
        return None
    util = log_utilisation(log)
    kind_of = {bel: kind for kinds in FAMILY_RESOURCES.values() for kind, bel in kinds.items() if bel in util}
    used = {bel: r for bel, r in util.items() if kind_of.get(bel) in ("lut", "ff", "bram", "lutram") and r.available}
    overlaps = _OVERLAP.findall(log)
    if overlaps:
        share = {group: float(v) for group, v in re.findall(r"(\w+)=([\d.]+)%", overlaps[-1])}
        group = max(share, key=share.get, default=None)
        bels = [bel for bel, kind in kind_of.items() if kind == _OVERLAP_KIND.get(group)]
        if share.get(group, 0) > 0 and bels:
            return bels[0], util[bels[0]]
    if not used:
        return None
    bel = max(used, key=lambda b: used[b].used / used[b].available)
    return bel, used[bel]
