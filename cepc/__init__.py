"""cepc: compile complex-event-processing pattern queries into FPGA hardware."""

__version__ = "0.1.0"
