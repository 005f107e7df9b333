"""The VHDL back end as a netlist: ``cepc synth --hdl vhdl`` and the host link's simulation of it.

Yosys reads no VHDL of its own (YoWASP's build has no GHDL plugin), so GHDL
synthesises the VHDL that ``cepc compile --hdl vhdl`` writes (``ghdl --synth
--out=verilog``: its netlist, with the RAMs it finds as memories) into Verilog,
which Yosys then maps for the device like the Amaranth design's RTLIL; the board
top instantiates it (:class:`cepc.hw.netlist.NetlistTop`).

On an ECP5 board the VHDL instantiates the device's block RAM (a table's banks as
DP16KDs read through their output registers, which Yosys' inference leaves
unused): GHDL keeps each instance of a component without an entity as a cell,
and :func:`as_cells` makes its netlist say so in the terms Yosys and nextpnr read.
"""

from __future__ import annotations

import collections
import re
import subprocess
from pathlib import Path

from .. import tools
from ..errors import ToolError, UsageError

# the netlist's top module (its entities are this name plus a part: cepc_vhdl_framer, ...), apart
# from every name Amaranth gives the board top's modules
MODULE = "cepc_vhdl"


def netlist(design, top, out: Path, options: dict, module: str = MODULE, primitives: str | None = None) -> Path:
    """Write ``top``'s VHDL to ``out``/``module``.vhd and GHDL's Verilog netlist of it to ``module``.v
    (GHDL's messages in ``module``.ghdl.log); returns the netlist's path. ``primitives``: the device
    family whose primitives the VHDL instantiates (:func:`cepc.emit.vhdl.render`), kept as cells.
    UsageError for a design the VHDL back end does not build, ToolError if GHDL fails."""
    from ..emit import vhdl

    try:
        text = vhdl.render(design, top, module, options, primitives)
    except ValueError as e:
        raise UsageError(str(e)) from None
    out.mkdir(parents=True, exist_ok=True)
    source, target, log = out / f"{module}.vhd", out / f"{module}.v", out / f"{module}.ghdl.log"
    source.write_text(text)
    cmd = [tools.ghdl(), "--synth", *tools.GHDL_STD, "--out=verilog", source.name, "-e", module]
    with open(target, "w") as fh, open(log, "w") as err:
        done = subprocess.run(cmd, cwd=out, stdout=fh, stderr=err)
    if done.returncode != 0:
        raise ToolError(f"GHDL could not synthesise the VHDL (exit status {done.returncode}); its log is {log}",
                        cmd, "\n".join(log.read_text(errors="replace").splitlines()[-25:]))
    verilog = as_cells(target.read_text())
    target.write_text(verilog)
    clashes = declared_twice(verilog)
    if clashes:
        # GHDL 2.0 names a flattened instance's port net <label>_<port>, even where the VHDL declares
        # a signal of that name (the templates avoid it: test_emit_vhdl); Verilator refuses such a
        # netlist and Yosys would merge the two nets
        where = "; ".join(f"{', '.join(names)} in module {mod}" for mod, names in clashes.items())
        raise ToolError(f"GHDL's netlist of the VHDL declares a name twice ({where}): a clash of names in the "
                        f"VHDL that cepc wrote; use --hdl verilog", cmd)
    return target


# the device primitives the VHDL instantiates (cepc.emit.vhdl.PRIMITIVES), with their string generics
STRING_PARAMETERS = {
    "DP16KD": ("REGMODE_A", "REGMODE_B", "RESETMODE", "ASYNC_RESET_RELEASE", "CSDECODE_A", "CSDECODE_B",
               "WRITEMODE_A", "WRITEMODE_B", "GSR"),
}
_STUB = re.compile(r"^module (\w+)\s*#\(.*?^endmodule\n*", re.M | re.S)
_INSTANCE = re.compile(r"^\s*(\w+) #\((.*?)\)\s*\n\s*\w+ \(", re.M | re.S)  # a cell's type and parameters
_BITS = re.compile(r"\.(\w+)\((\d+)'b([01]+)\)")


def as_cells(verilog: str) -> str:
    """GHDL's netlist with the device primitives of :data:`STRING_PARAMETERS` as the device's cells.
    GHDL writes an empty module for each component without an entity, which Yosys would take for a
    module of the design (its cells then empty; the device's library has the cell), and a string
    generic as a vector of its characters' bits, which nextpnr would not read as the string: the
    empty modules go, and those generics are written as strings."""
    verilog = _STUB.sub(lambda m: "" if m.group(1) in STRING_PARAMETERS else m.group(0), verilog)

    def instance(m: re.Match) -> str:
        names = STRING_PARAMETERS.get(m.group(1))
        if names is None:
            return m.group(0)

        def string(p: re.Match) -> str:
            if p.group(1) not in names or int(p.group(2)) % 8:
                return p.group(0)
            text = int(p.group(3), 2).to_bytes(int(p.group(2)) // 8, "big").decode("ascii")
            return f'.{p.group(1)}("{text}")'

        return m.group(0).replace(m.group(2), _BITS.sub(string, m.group(2)), 1)

    return _INSTANCE.sub(instance, verilog)


_MODULE = re.compile(r"^module (\w+)", re.M)
_DECLARATION = re.compile(r"^\s*(?:reg|wire)\s*(?:\[[^\]]*\])?\s*(\w+)", re.M)


def declared_twice(verilog: str) -> dict[str, list[str]]:
    """The nets (``reg``/``wire``) declared more than once in a module of GHDL's Verilog, by module."""
    found = {}
    starts = [(m.start(), m.group(1)) for m in _MODULE.finditer(verilog)] + [(len(verilog), "")]
    for (start, module), (end, _) in zip(starts, starts[1:]):
        counts = collections.Counter(_DECLARATION.findall(verilog, start, end))
        twice = sorted(name for name, n in counts.items() if n > 1)
        if twice:
            found[module] = twice
    return found
