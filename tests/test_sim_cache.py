"""The simulation build cache keeps the newest builds, never one in use, and nothing but its own."""

from __future__ import annotations

import fcntl
import os

from cepc.simulate import prune_builds


def test_prune_keeps_the_newest_builds_and_any_in_use(tmp_path):
    builds = []
    for i in range(6):
        d = tmp_path / f"build{i}"
        d.mkdir()
        (d / ".lock").write_text("")
        (d / "obj").write_text("x")
        os.utime(d, (1000 + i, 1000 + i))  # build5 the newest
        builds.append(d)
    mine = tmp_path / "notes"  # not a build: no lock file
    mine.mkdir()
    os.utime(mine, (1, 1))
    with open(builds[0] / ".lock") as held:  # the oldest, but a simulation holds it
        fcntl.flock(held, fcntl.LOCK_EX)
        deleted = prune_builds(tmp_path, keep=2)
    assert sorted(d.name for d in deleted) == ["build1", "build2", "build3"]
    assert sorted(d.name for d in tmp_path.iterdir()) == ["build0", "build4", "build5", "notes"]


def test_a_build_is_locked_marked_newest_and_made_again_if_pruned(tmp_path):
    from cepc.simulate import lock_build

    work = tmp_path / "abc"
    with lock_build(work) as lock:
        assert (work / ".lock").is_file()
        try:  # held: another process (or prune) cannot take it
            with open(work / ".lock") as other:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            raise AssertionError("the build was not locked")
        except BlockingIOError:
            pass
        assert not lock.closed
    import shutil
    shutil.rmtree(work)  # pruned: the next use creates it again
    with lock_build(work):
        assert (work / ".lock").is_file()
