"""Count the bad-input table's outcomes (tests/test_bad_input.py): one-line errors and
documented acceptances (what the table wants), and tracebacks, crashes, hangs, silent
acceptances, unclear errors, refusals of good input and harm (what it does not).

    python tests/bad_input_counts.py            # this tree
    PYTHONPATH=OLD python OLD/tests/bad_input_counts.py   # a copy of the table in an older tree

Each failing case is listed with its outcome; the counts close the output."""

import os
import sys
from pathlib import Path

import pytest

if __name__ == "__main__":
    os.environ["SCHEDLAB_BAD_INPUT_LIST"] = "1"
    here = Path(__file__).resolve().parent
    code = pytest.main([str(here / "test_bad_input.py"), "-q", "--no-header", "-p", "no:cacheprovider", "--tb=no"])
    sys.exit(0 if code in (0, 1) else code)
