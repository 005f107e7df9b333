"""Shared test set-up: helper modules get pytest's assertion messages too."""

import pytest

pytest.register_assert_rewrite("hwsim", "patterns")
