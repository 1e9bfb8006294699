"""tests/judge reuse the seeded damage of tests/integrity (integrity_damage.py, one home)."""

from __future__ import annotations

import sys
from pathlib import Path

_INTEGRITY = str(Path(__file__).resolve().parents[1] / "integrity")
if _INTEGRITY not in sys.path:
    sys.path.insert(0, _INTEGRITY)
