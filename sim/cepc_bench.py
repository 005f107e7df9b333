"""cocotb bench for a cepc-generated top (SPEC §4), driven by ``cepc sim``.

It streams the packed tuples of ``input.bin`` into ``s_t*`` through
cocotbext-axi's ``AxiStreamSource`` (packets of ``packet_tuples`` tuples, or
of the byte counts in ``packet_bytes``; optional random ``tvalid`` gaps), takes
match records from ``m_t*`` and spilled tuples from ``spill_t*`` with
``AxiStreamSink``s (optional random ``tready`` backpressure), and writes what it
saw to ``result.json``. Decoding and comparing is the host's job
(``cepc.simulate``), through the JSON sidecar. The same bench runs the Verilog
on Verilator and the VHDL on GHDL.

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
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

PERIOD_NS = 10


def _pauses(rng: random.Random, probability: float):
    while True:
        yield rng.random() < probability


def _packets(data: bytes, config: dict):
    sizes = config.get("packet_bytes")
    if sizes is None:
        step = config["packet_tuples"] * config["tuple_bytes"]
        sizes = [min(step, len(data) - start) for start in range(0, len(data), step)]
    start = 0
    for size in sizes:
        yield data[start:start + size]
        start += size


async def _timing(dut, seen: dict):
    """Cycles at which a packet's last beat and each record are taken (numbered by rising edge).

    Sampled at the falling edges, where every signal is settled to what the next rising edge
    takes: no race with the writes the source and sinks make at the rising edge.
    """
    cycle = 0
    while True:
        await FallingEdge(dut.clk)
        cycle += 1
        if dut.s_tvalid.value == 1 and dut.s_tready.value == 1 and dut.s_tlast.value == 1:
            seen["last_beats"].append(cycle)
        if dut.m_tvalid.value == 1 and dut.m_tready.value == 1:
            seen["records"].append(cycle)


@cocotb.test()
async def stream_events(dut):
    config = json.loads(Path(os.environ["CEPC_SIM_CONFIG"]).read_text())
    data = Path(config["input"]).read_bytes()
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
    timing = {"last_beats": [], "records": []}
    if config.get("timing"):
        cocotb.start_soon(_timing(dut, timing))

    for packet in _packets(data, config):
        await source.send(AxiStreamFrame(packet))
    await source.wait()
    input_cycles = round((get_sim_time("ns") - started) / PERIOD_NS)

    # drain: wait until nothing has come out for a pipeline's worth of cycles
    records, spilled = [], []
    quiet = 0
    while quiet < config["drain_cycles"]:
        await RisingEdge(dut.clk)
        quiet += 1
        while not matches.empty():
            records.append(int.from_bytes(matches.recv_nowait().tdata, "little"))
            quiet = 0
        while not spill.empty():
            spilled.append(int.from_bytes(spill.recv_nowait().tdata, "little"))
            quiet = 0
    counters = {name: int(getattr(dut, name).value) for name in
                ("tuples_in", "matches_out", "dropped", "malformed", "evicted", "overflow")}
    cycles = round((get_sim_time("ns") - started) / PERIOD_NS)
    Path(config["output"]).write_text(json.dumps({"records": records, "spilled": spilled, "counters": counters,
                                                  "input_cycles": input_cycles, "cycles": cycles,
                                                  "timing": timing}))
