"""Shared test set-up: helper modules get pytest's assertion messages too."""

import sys

import pytest

pytest.register_assert_rewrite("hwsim", "patterns", "oracle", "synthtools")

# amaranth.sim compiles each wide expression (a table partitioner's bucket of registers is
# thousands of bits) into one nested Python expression, deeper than CPython's default limit
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
