"""Shared test set-up: helper modules get pytest's assertion messages too."""

import faulthandler
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import Phase, settings

pytest.register_assert_rewrite("hwsim", "patterns", "oracle", "synthtools")

# Hypothesis explains a failure by re-running the failing examples under a line tracer (sys.settrace
# before Python 3.12), which slows amaranth.sim's Python a hundredfold: a property test over hardware
# that failed in CI then shrank for hours, past every timeout, and never reported its example. Without
# the explain phase a failure shrinks (at most Hypothesis' five minutes) and prints its example and seed.
settings.register_profile("cepc", phases=[p for p in Phase if p is not Phase.explain])
settings.load_profile("cepc")

# amaranth.sim compiles each wide expression (a table partitioner's bucket of registers is
# thousands of bits) into one nested Python expression, deeper than CPython's default limit
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))

# the suite builds dozens of small Verilator designs and runs each on a short stream: an
# unoptimised C++ build is quicker overall (cepc.simulate reads this)
os.environ.setdefault("CEPC_VERILATOR_OPT_FAST", "-O0")

# A backstop behind pytest-timeout (pyproject.toml: 600 s, by a signal the test sees): a test whose
# process is stuck where no signal handler runs would hold its xdist worker, and every test queued
# behind it, until CI's own limit. faulthandler's watchdog thread needs no Python: it writes every
# thread's stack to the worker's hang file and ends the worker, which xdist reports as crashed
# (with that file: pytest_handlecrashitem) and replaces.
HANG_SECONDS = float(os.environ.get("CEPC_TEST_HANG_SECONDS", 900))
_OWN_HANG_DIR = "CEPC_TEST_HANG_DIR" not in os.environ  # the controller's (xdist's workers inherit it)
if _OWN_HANG_DIR:
    os.environ["CEPC_TEST_HANG_DIR"] = tempfile.mkdtemp(prefix="cepc-test-hang-")
HANG_DIR = Path(os.environ["CEPC_TEST_HANG_DIR"])
_hang_file = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _hang_file
    if _hang_file is None:
        _hang_file = open(HANG_DIR / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.txt", "w")
    _hang_file.seek(0)
    _hang_file.truncate()
    _hang_file.write(item.nodeid + "\n")
    _hang_file.flush()
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=_hang_file)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    for f in HANG_DIR.glob("*.txt"):
        head, _, stacks = f.read_text(errors="replace").partition("\n")
        if head == crashitem and stacks.strip():
            report.longrepr = (f"{report.longrepr}: no progress in {HANG_SECONDS:.0f} s; "
                               f"its threads' stacks then:\n{stacks}")


LONGEST = ("tests/test_synth_flow.py", "tests/test_sizing.py")  # the syntheses: one to three minutes each


def pytest_collection_modifyitems(config, items):
    """The syntheses first, then the other slow tests, each in its place among them (a stable sort).
    `--dist worksteal` (the Makefile's) queues the first half of this order on one worker, which runs it
    in order, and an idle worker takes tests from the end of the other's queue. With the slow tests
    first but the syntheses, collected late, last among them, a fresh-clone run ended on one worker
    alone on syntheses while the other had nothing left."""
    def rank(item):
        slow = item.get_closest_marker("slow") is not None
        return (not slow, not (slow and item.nodeid.startswith(LONGEST)))

    items.sort(key=rank)


def pytest_unconfigure(config):
    if _OWN_HANG_DIR:
        shutil.rmtree(HANG_DIR, ignore_errors=True)
