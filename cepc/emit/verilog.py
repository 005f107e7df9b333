"""Verilog and RTLIL through Amaranth's Yosys back end, with a header and a JSON sidecar."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil
from amaranth.hdl import _nir

from ..hw.top import Top
from ..plan import DesignPlan
from .sidecar import header_lines, sidecar


def header(design: DesignPlan, top: Top, options: str, comment: str = "//") -> str:
    return "\n".join(f"{comment} {line}".rstrip() for line in header_lines(design, top, options)) + "\n"


# Lint waivers written into every Verilog file, each for an idiom of Yosys' Verilog writer
# that is correct by the language standard (`verilator --lint-only -Wall` is otherwise clean).
LINT_WAIVERS = {
    "PROCASSINIT": "registers carry their power-up value as a declaration initialiser (the FPGA "
                   "configuration value, equal to the reset value)",
    "UNUSEDSIGNAL": "the carry-out bit of a widening add (Amaranth's x + 1 is one bit wider than x) "
                    "is kept as a named wire and dropped on purpose",
    "WIDTHEXPAND": "constants are written at their minimal width and widened by Verilog's "
                   "context-determined sizing, which is exact",
    "WIDTHTRUNC": "'!x' on a vector is written for 'x == 0'",
    "DECLFILENAME": "the file is named by the user's -o, the module by --top",
}


def _emit_memory(self, cell_idx, cell):
    """Amaranth's ``ModuleEmitter.emit_memory`` (0.5), the initial contents written as one constant.

    Amaranth builds that constant a net at a time, a Python object per bit: for a partition table
    (finance2's 1,024 partitions are 1.9 M bits of zeros) it was a quarter of the design's
    emission. The text is the same, bit for bit (tests/test_emit_verilog.py compares them)."""
    if cell.width * cell.depth == 0:
        return _AMARANTH_EMIT_MEMORY(self, cell_idx, cell)
    memory_info = self.memories[cell_idx]
    mask = (1 << cell.width) - 1
    data = "".join(format(row & mask, f"0{cell.width}b") for row in reversed(cell.init))
    self.builder.cell("$meminit_v2", ports={
        "ADDR": self.sigspec(),
        "DATA": f"{cell.width * cell.depth}'{data}",
        "EN": self.sigspec(_nir.Value.ones(cell.width)),
    }, parameters={
        "MEMID": memory_info.memid,
        "ABITS": 0,
        "WIDTH": cell.width,
        "WORDS": cell.depth,
        "PRIORITY": 0,
    }, src_loc=cell.src_loc)


_AMARANTH_EMIT_MEMORY = rtlil.ModuleEmitter.emit_memory


@contextlib.contextmanager
def fast_memory_init():
    """Within it, Amaranth's RTLIL back end writes memories' initial contents with :func:`_emit_memory`."""
    rtlil.ModuleEmitter.emit_memory = _emit_memory
    try:
        yield
    finally:
        rtlil.ModuleEmitter.emit_memory = _AMARANTH_EMIT_MEMORY


def rtlil_text(top, name: str) -> str:
    """``top`` as RTLIL, as Amaranth's ``rtlil.convert`` writes it, without source locations."""
    with fast_memory_init():
        return rtlil.convert(top, name=name, emit_src=False)


def _flat_verilog(top: Top, name: str) -> str:
    """One flat module: Amaranth → RTLIL → Yosys (flatten, purge unused nets) → Verilog."""
    il = rtlil_text(top, name)
    yosys = find_yosys(lambda ver: ver >= (0, 40))
    script = [
        f"read_rtlil <<rtlil\n{il}\nrtlil",
        f"hierarchy -top {name}",
        "proc -nomux -norom",
        "flatten",
        "memory_collect",
        "opt_clean -purge",
        "attrmap -remove generator -remove top -remove src -remove amaranth.hierarchy "
        "-remove amaranth.decoding -remove hdlname",
        "write_verilog -norename -noattr",
    ]
    return yosys.run(["-q", "-"], "\n".join(script), ignore_warnings=True)


def emit(design: DesignPlan, top: Top, output: Path, hdl: str, name: str, options: dict) -> Path:
    """Write the HDL to ``output`` and the sidecar to ``output`` with suffix ``.json``; returns the sidecar path."""
    text_options = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())
    if hdl == "verilog":
        waivers = "".join(f"// {rule}: {why}\n/* verilator lint_off {rule} */\n" for rule, why in LINT_WAIVERS.items())
        text = header(design, top, text_options, "//") + "//\n// Lint waivers:\n" + waivers + _flat_verilog(top, name)
    elif hdl == "rtlil":
        text = header(design, top, text_options, "#") + rtlil_text(top, name)
    else:
        raise ValueError(f"unknown HDL {hdl!r}")
    output.write_text(text)
    side = output.with_suffix(".json")
    side.write_text(json.dumps(sidecar(design, top, options), indent=2) + "\n")
    return side
