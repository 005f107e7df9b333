"""The test harness itself (tests/conftest.py): a test stuck where pytest-timeout's signal cannot
reach it ends its worker with every thread's stack, and the run goes on; a failing property test
shrinks untraced."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def run_pytest(tmp_path: Path, name: str, source: str, *args: str, timeout: float,
               **env: str) -> subprocess.CompletedProcess:
    """pytest, in a process of its own, on test file ``name`` (``source``) beside a copy of
    tests/conftest.py in ``tmp_path``; ``env`` on top of this process's, less the harness' own."""
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / name).write_text(source)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("CEPC_TEST_HANG", "PYTEST_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args,
                           "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env={**environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def test_a_hung_test_ends_its_worker_with_its_stacks_and_the_run_goes_on(tmp_path):
    run = run_pytest(tmp_path, "test_stuck.py",
                     "import time\n\n"
                     "def test_stuck():\n    time.sleep(60)\n\n"
                     "def test_other():\n    assert True\n",
                     "-n", "2", timeout=120, CEPC_TEST_HANG_SECONDS="3")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "crashed while running 'test_stuck.py::test_stuck': no progress in 3 s" in out
    assert "in test_stuck" in out  # the stuck test's own frame


def test_a_failing_property_test_shrinks_without_a_line_tracer(tmp_path):
    # Hypothesis' explain phase re-runs a failure under sys.settrace (sys.monitoring from 3.12):
    # amaranth.sim under it ran on past every timeout in CI. The profile leaves it out; this fails if it is back
    run = run_pytest(tmp_path, "test_prop.py",
        "import sys\n"
        "from hypothesis import given, settings, strategies as st\n"
        "from hypothesis.internal.scrutineer import MONITORING_TOOL_ID\n\n"
        "runs = []\n\n"
        "def traced():\n"
        "    if hasattr(sys, 'monitoring'):\n"
        "        return sys.monitoring.get_tool(MONITORING_TOOL_ID) is not None\n"
        "    return sys.gettrace() is not None\n\n"
        "@settings(max_examples=200, database=None, deadline=None)\n"
        "@given(st.lists(st.integers(0, 1000)))\n"
        "def test_fails(xs):\n"
        "    runs.append(traced())\n"
        "    assert sum(xs) < 1500\n\n"
        "def test_after():\n"
        "    assert len(runs) > 10 and not any(runs), runs.count(True)\n",
        "-p", "no:xdist", timeout=300)
    out = run.stdout + run.stderr
    assert "1 failed, 1 passed" in out, out
    assert re.search(r"(Falsifying example|Failing test case): test_fails\(", out), out  # it is reported
