"""``python -m mqtool``."""

from mqtool.cli import main

main()
