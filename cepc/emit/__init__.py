"""HDL back ends: Verilog and RTLIL through Amaranth and Yosys, VHDL from cepc's own templates."""

from __future__ import annotations

from pathlib import Path

HDLS = ("verilog", "vhdl", "rtlil")


def emit(design, top, output: Path, hdl: str, name: str, options: dict) -> Path:
    """Write ``design`` as ``hdl`` to ``output`` and the JSON sidecar beside it; returns the sidecar path."""
    if hdl == "vhdl":
        from . import vhdl

        return vhdl.emit(design, top, output, name, options)
    from . import verilog

    return verilog.emit(design, top, output, hdl, name, options)
