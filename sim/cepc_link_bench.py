"""cocotb bench: a cepc host link (``cepc.hw.hostlink.HostLink``) behind a pseudo-terminal.

The bench plays the board's USB-UART: it opens a pty pair, writes the slave's
path to ``pty_file``, and bridges the master side to the design's ``rx`` and
``tx`` pins, bit by bit at ``divisor`` link clock cycles per bit (8N1). The design's
clock (``clk``, ``clock_ns``) and the link's (``link_clk``, ``link_ns``) run apart, as on a board. The real
host tool (``cepc run --port /dev/pts/N``) opens the slave as a serial port.
It stops when ``stop_file`` appears (or after ``max_seconds`` of wall time).

Optional line noise: ``corrupt_in_every`` flips a bit in every Nth byte the
host sends, ``corrupt_out_every`` in every Nth byte the board sends.

Configuration comes from the JSON file named by ``CEPC_LINK_CONFIG``.
"""

from __future__ import annotations

import json
import os
import time
import tty
from collections import deque
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge


@cocotb.test()
async def uart_bridge(dut):
    config = json.loads(Path(os.environ["CEPC_LINK_CONFIG"]).read_text())
    div = config["divisor"]
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    # written whole, then renamed: the host polls for the file and reads it as soon as it exists
    pty_file = Path(config["pty_file"])
    pty_file.with_suffix(".part").write_text(os.ttyname(slave))
    pty_file.with_suffix(".part").replace(pty_file)
    stop_file = Path(config["stop_file"])
    deadline = time.monotonic() + config.get("max_seconds", 600)
    corrupt_in = config.get("corrupt_in_every", 0)
    corrupt_out = config.get("corrupt_out_every", 0)
    counts = {"in": 0, "out": 0}

    cocotb.start_soon(Clock(dut.clk, config.get("clock_ns", 10), unit="ns").start())
    cocotb.start_soon(Clock(dut.link_clk, config.get("link_ns", 10), unit="ns").start())
    dut.rx.value = 1
    dut.rst.value = 1
    dut.link_rst.value = 1
    await ClockCycles(dut.link_clk, 4)
    dut.rst.value = 0
    dut.link_rst.value = 0

    async def board_to_host():
        while True:
            await FallingEdge(dut.tx)
            await ClockCycles(dut.link_clk, div // 2)  # the middle of the start bit
            if int(dut.tx.value):
                continue  # a glitch
            byte = 0
            for i in range(8):
                await ClockCycles(dut.link_clk, div)
                byte |= int(dut.tx.value) << i
            await ClockCycles(dut.link_clk, div)  # the stop bit
            counts["out"] += 1
            if corrupt_out and counts["out"] % corrupt_out == 0:
                byte ^= 0x10
            os.write(master, bytes([byte]))

    cocotb.start_soon(board_to_host())

    pending: deque[int] = deque()
    while True:
        try:
            pending.extend(os.read(master, 4096))
        except (BlockingIOError, OSError):
            pass
        if not pending:
            if stop_file.exists() or time.monotonic() > deadline:
                break
            await ClockCycles(dut.link_clk, div * 10)
            continue
        byte = pending.popleft()
        counts["in"] += 1
        if corrupt_in and counts["in"] % corrupt_in == 0:
            byte ^= 0x08
        for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
            dut.rx.value = bit
            await ClockCycles(dut.link_clk, div)
    os.close(master)
    os.close(slave)
    done_file = Path(config["done_file"])
    done_file.with_suffix(".part").write_text(json.dumps(counts))
    done_file.with_suffix(".part").replace(done_file)
