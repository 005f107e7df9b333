"""The test harness itself: a test stuck where pytest-timeout's signal cannot reach it ends its
worker with every thread's stack, and the run goes on (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def test_a_hung_test_ends_its_worker_with_its_stacks_and_the_run_goes_on(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_stuck.py").write_text(
        "import time\n\n"
        "def test_stuck():\n    time.sleep(60)\n\n"
        "def test_other():\n    assert True\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CEPC_TEST_HANG", "PYTEST_"))}
    env["CEPC_TEST_HANG_SECONDS"] = "3"
    run = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "-q",
                          "--rootdir", str(tmp_path), str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "crashed while running 'test_stuck.py::test_stuck': no progress in 3 s" in out
    assert "in test_stuck" in out  # the stuck test's own frame
