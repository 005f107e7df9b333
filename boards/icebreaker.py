"""1BitSquared iCEBreaker: an iCE40UP5K (SG48) with a 12 MHz oscillator and an FTDI FT2232H.

Host link: the FT2232H's second channel as a UART (FPGA pins 6 = rx, 9 = tx),
3 Mbaud (the FT2232H makes 3 Mbaud exactly). The PLL sits on the
oscillator's pad (pin 35, a global buffer input).
"""

from __future__ import annotations

from amaranth_boards.icebreaker import ICEBreakerPlatform


class ICEBreaker(ICEBreakerPlatform):
    cepc_name = "icebreaker"
    cepc_device = "ice40up5k"
    cepc_uart = ("uart", 0)
    # 12 MHz · 68 / 16: a PLL output that 3 Mbaud divides exactly (17 cycles per bit)
    cepc_freq_mhz = 51.0
    cepc_baud = 3_000_000
    cepc_partitions = 16  # 5,280 logic cells
    cepc_buffer_bytes = 2048  # four of the thirty 4-kbit block RAMs
    cepc_buffer_frames = 8
    cepc_leds = (("led", 1), None, ("led", 0))  # green: heartbeat, red: error
