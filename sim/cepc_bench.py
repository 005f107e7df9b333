"""cocotb bench for a cepc-generated top (SPEC §4), driven by ``cepc sim``.

It streams the packed tuples of ``input.bin`` into ``s_t*`` through
cocotbext-axi's ``AxiStreamSource`` (packets of ``packet_tuples`` tuples,
optional random ``tvalid`` gaps), takes match records from ``m_t*`` and
spilled tuples from ``spill_t*`` with ``AxiStreamSink``s (optional random
``tready`` backpressure), and writes what it saw to ``result.json``. Decoding
and comparing is the host's job (``cepc.simulate``), through the JSON sidecar.

Configuration comes from the JSON file named by ``CEPC_SIM_CONFIG``.
"""

from __future__ import annotations

import json
import logging
import os
import random
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

PERIOD_NS = 10


def _pauses(rng: random.Random, probability: float):
    while True:
        yield rng.random() < probability


@cocotb.test()
async def stream_events(dut):
    config = json.loads(Path(os.environ["CEPC_SIM_CONFIG"]).read_text())
    data = Path(config["input"]).read_bytes()
    tuple_bytes = config["tuple_bytes"]
    packet = config["packet_tuples"] * tuple_bytes
    rng = random.Random(config["seed"])

    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns").start())
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s"), dut.clk, dut.rst)
    matches = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m"), dut.clk, dut.rst)
    spill = AxiStreamSink(AxiStreamBus.from_prefix(dut, "spill"), dut.clk, dut.rst)
    for endpoint in (source, matches, spill):  # a log line per frame costs more than the frame
        endpoint.log.setLevel(logging.WARNING)
    if config["stall"] > 0:
        source.set_pause_generator(_pauses(rng, config["stall"]))
    if config["backpressure"] > 0:
        matches.set_pause_generator(_pauses(rng, config["backpressure"]))
        spill.set_pause_generator(_pauses(rng, config["backpressure"]))

    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    started = get_sim_time("ns")
    for start in range(0, len(data), packet):
        await source.send(AxiStreamFrame(data[start:start + packet]))
    await source.wait()
    input_cycles = round((get_sim_time("ns") - started) / PERIOD_NS)

    # drain: wait until nothing has come out for a pipeline's worth of cycles
    records, spilled = [], []
    quiet, cycles = 0, 0
    while quiet < config["drain_cycles"]:
        await RisingEdge(dut.clk)
        cycles += 1
        quiet += 1
        while not matches.empty():
            records.append(int.from_bytes(matches.recv_nowait().tdata, "little"))
            quiet = 0
        while not spill.empty():
            spilled.append(int.from_bytes(spill.recv_nowait().tdata, "little"))
            quiet = 0
    counters = {name: int(getattr(dut, name).value) for name in
                ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow")}
    Path(config["output"]).write_text(json.dumps({"records": records, "spilled": spilled, "counters": counters,
                                                  "input_cycles": input_cycles}))
