"""HDL back ends: Verilog and RTLIL through Amaranth and Yosys, VHDL from cepc's own templates."""

from __future__ import annotations

from pathlib import Path

HDLS = ("verilog", "vhdl", "rtlil")


def emit(design, top, output: Path, hdl: str, name: str, options: dict, primitives: str | None = None,
         models: bool = False) -> Path:
    """Write ``design`` as ``hdl`` to ``output`` and the JSON sidecar beside it; returns the sidecar path.
    ``primitives`` and ``models``: the VHDL's (:func:`cepc.emit.vhdl.render`)."""
    if hdl == "vhdl":
        from . import vhdl

        return vhdl.emit(design, top, output, name, options, primitives, models)
    if primitives:
        top._MustUse__silence = True  # (never elaborated: no Verilog is made)
        raise ValueError("device primitives are the VHDL's")
    from . import verilog

    return verilog.emit(design, top, output, hdl, name, options)
