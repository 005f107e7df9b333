"""Radiona ULX3S: an ECP5 (LFE5U-12F … 85F, CABGA381) with a 25 MHz oscillator and an FTDI FT231X.

Host link: the FT231X's UART (FPGA pins M1 = rx, L4 = tx), up to 3 Mbaud.
"""

from __future__ import annotations

from amaranth_boards.ulx3s import ULX3S_12F_Platform, ULX3S_25F_Platform, ULX3S_45F_Platform, ULX3S_85F_Platform


class _ULX3S:
    cepc_uart = ("uart", 0)
    cepc_freq_mhz = 150.0
    cepc_baud = 3_000_000  # the FT231X's maximum
    cepc_buffer_bytes = 2048  # one DP16KD, read through its output register
    cepc_buffer_frames = 8
    cepc_leds = (("led", 0), ("led", 1), ("led", 7))


class ULX3S85F(_ULX3S, ULX3S_85F_Platform):
    cepc_name = "ulx3s-85f"
    cepc_device = "ecp5-85f"
    cepc_partitions = 256


class ULX3S45F(_ULX3S, ULX3S_45F_Platform):
    cepc_name = "ulx3s-45f"
    cepc_device = "ecp5-45f"
    cepc_partitions = 128


class ULX3S25F(_ULX3S, ULX3S_25F_Platform):
    cepc_name = "ulx3s-25f"
    cepc_device = "ecp5-25f"
    cepc_partitions = 64


class ULX3S12F(_ULX3S, ULX3S_12F_Platform):
    cepc_name = "ulx3s-12f"
    cepc_device = "ecp5-12f"
    cepc_partitions = 32
