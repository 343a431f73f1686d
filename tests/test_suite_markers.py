"""The suite's own split: a pure test (no ``ray``, no ``process`` marker) cannot start Python."""

import subprocess
import sys

import pytest


def test_a_pure_test_that_starts_python_is_told_to_mark_it():
    with pytest.raises(AssertionError, match=r"starts a Python process .* mark it @pytest.mark.process"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.process
def test_a_process_test_may_start_python():
    out = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "42"
