"""Where the native programs are: native/build in a checkout, or MOSBENCH_NATIVE."""

from __future__ import annotations

import os
from pathlib import Path

from mosbench.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    return Path(os.environ.get("MOSBENCH_NATIVE", ROOT / "native" / "build"))


def binary(name: str) -> Path:
    path = build_dir() / name
    if not os.access(path, os.X_OK):
        raise UserError(f"{path} is missing: build the native programs with `make -C native`")
    return path
