"""Shared pytest fixtures: where the built addnorm executable and the test tools are.

CTest sets ADDNORM_BIN and ADDNORM_TOOLS_DIR; run by hand, the tests look in <repo>/build.
"""
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def addnorm_bin() -> Path:
    """Path of the addnorm command-line executable."""
    return Path(os.environ.get("ADDNORM_BIN", REPO_ROOT / "build" / "addnorm"))


@pytest.fixture(scope="session")
def tools_dir() -> Path:
    """Directory holding the tests/tools executables (numpy_random_dump, ...)."""
    return Path(os.environ.get("ADDNORM_TOOLS_DIR", REPO_ROOT / "build" / "tests"))
