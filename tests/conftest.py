"""Shared test set-up: helper modules get pytest's assertion messages too."""

import os
import sys

import pytest

pytest.register_assert_rewrite("hwsim", "patterns", "oracle", "synthtools")

# amaranth.sim compiles each wide expression (a table partitioner's bucket of registers is
# thousands of bits) into one nested Python expression, deeper than CPython's default limit
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

# the suite builds dozens of small Verilator designs and runs each on a short stream: an
# unoptimised C++ build is quicker overall (cepc.simulate reads this)
os.environ.setdefault("CEPC_VERILATOR_OPT_FAST", "-O0")
