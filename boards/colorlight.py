"""Colorlight 5A-75B (v7.0): an LFE5U-25F (CABGA256) LED-panel receiver card with a 25 MHz
oscillator and two gigabit Ethernet PHYs (RGMII, resources ``eth_rgmii`` 0 and 1).

Host link: a UART on connector J19 (pin M13 = rx, the button input; pin P11 =
tx, the LED driver), through any 3.3 V USB-UART adapter; the board has no
USB of its own. 1 Mbaud by default, which common adapters (FT232R, CP2102N,
CH340) reach. The Ethernet PHYs are not used by cepc yet (no MAC).
"""

from __future__ import annotations

from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform


class Colorlight5A75B(Colorlight_5A75B_R70Platform):
    cepc_name = "colorlight-5a-75b"
    cepc_device = "ecp5-25f"
    cepc_uart = ("uart", 0)
    cepc_freq_mhz = 150.0
    cepc_baud = 1_000_000
    cepc_partitions = 64
    cepc_buffer_bytes = 2048  # one DP16KD, read through its output register
    cepc_buffer_frames = 8
    cepc_leds = ()  # the only LED is the UART's tx pin
