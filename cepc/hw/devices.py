"""FPGA devices cepc sizes designs for: block RAM per device (no Amaranth import: the CLI reads it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    name: str
    family: str
    block: str  # block RAM primitive
    blocks: int
    configs: tuple[tuple[int, int], ...]  # (depth, width) of one block, simple dual-port
    # whether shallow memories (the 16-deep output FIFOs) go to distributed (LUT) RAM; without it
    # (iCE40) each takes block RAMs side by side, one per 16 bits of width, however shallow
    lut_ram: bool = True
    # flip-flops, as nextpnr counts them (TRELLIS_FF; the 12F is placed on the 25F's die): `cepc synth
    # --placer auto` picks nextpnr's placer by the share of them a design takes
    ffs: int = 0

    def blocks_for(self, depth: int, width: int) -> int:
        """Blocks a memory of ``depth`` words of ``width`` bits takes, in the best configuration."""
        return min(-(-width // w) * -(-depth // d) for d, w in self.configs)


_ECP5 = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
_ICE40 = ((2048, 2), (1024, 4), (512, 8), (256, 16))
DEVICES = {
    "ecp5-85f": Device("ecp5-85f", "ECP5 LFE5U-85F", "DP16KD", 208, _ECP5, ffs=83_640),
    "ecp5-45f": Device("ecp5-45f", "ECP5 LFE5U-45F", "DP16KD", 108, _ECP5, ffs=43_848),
    "ecp5-25f": Device("ecp5-25f", "ECP5 LFE5U-25F", "DP16KD", 56, _ECP5, ffs=24_288),
    "ecp5-12f": Device("ecp5-12f", "ECP5 LFE5U-12F", "DP16KD", 32, _ECP5, ffs=24_288),
    "ice40up5k": Device("ice40up5k", "iCE40 UP5K", "SB_RAM40_4K", 30, _ICE40, lut_ram=False, ffs=5_280),
}
DEFAULT_DEVICE = "ecp5-85f"
