"""Config files as the broker loads them (``ConfigManager#load`` / ``loadBak``).

The loader has one home, :mod:`mqtool.formats.config.load`; this name is kept for verify's
imports.
"""

from __future__ import annotations

from mqtool.formats.config.load import ConfigLoad, load_config

__all__ = ["ConfigLoad", "load_config"]
