"""Verilog and RTLIL through Amaranth's Yosys back end, with a header and a JSON sidecar."""

from __future__ import annotations

import json
from pathlib import Path

from amaranth._toolchain.yosys import find_yosys
from amaranth.back import rtlil

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


def _flat_verilog(top: Top, name: str) -> str:
    """One flat module: Amaranth → RTLIL → Yosys (flatten, purge unused nets) → Verilog."""
    il = rtlil.convert(top, name=name, emit_src=False)
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
        text = header(design, top, text_options, "#") + rtlil.convert(top, name=name, emit_src=False)
    else:
        raise ValueError(f"unknown HDL {hdl!r}")
    output.write_text(text)
    side = output.with_suffix(".json")
    side.write_text(json.dumps(sidecar(design, top, options), indent=2) + "\n")
    return side
