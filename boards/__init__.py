"""Boards for ``cepc synth``: amaranth-boards platforms with what cepc needs to know added.

Each board subclasses its amaranth-boards platform and changes only what
differs; for cepc that is the ``cepc_*`` attributes:

* ``cepc_name``: the name on the command line (``cepc synth --board NAME``);
* ``cepc_uart``: the host link, a UART resource (name, number); the board's
  oscillator is the platform's ``default_clk``, and its device and package
  the platform's own;
* ``cepc_freq_mhz``: the default clock the PLL makes from the oscillator (the
  timing target);
* ``cepc_baud``: the default baud rate of the host link (what the board's
  USB-UART allows);
* ``cepc_device``: the device as ``cepc compile --device`` names it; the
  table partitioner is sized for its block RAM (``--partitioner auto``);
* ``cepc_partitions``: the default ``--partitions`` of the pipeline
  partitioner (``--partitioner pipeline``), sized so the examples fit the
  device with room to spare;
* ``cepc_buffer_bytes``, ``cepc_buffer_frames``: the receive buffer of the host link (block RAM)
  and how many frames may wait in it;
* ``cepc_leds``: LEDs for heartbeat, UART activity and error (or None).

``BOARDS`` maps each ``cepc_name`` to its platform class.
"""

from __future__ import annotations

from .colorlight import Colorlight5A75B
from .icebreaker import ICEBreaker
from .ulx3s import ULX3S12F, ULX3S25F, ULX3S45F, ULX3S85F

BOARDS = {b.cepc_name: b for b in (ULX3S85F, ULX3S45F, ULX3S25F, ULX3S12F, ICEBreaker, Colorlight5A75B)}

__all__ = ["BOARDS", "ULX3S85F", "ULX3S45F", "ULX3S25F", "ULX3S12F", "ICEBreaker", "Colorlight5A75B"]
