"""``mqtool serve``: name server + broker over a reference store (see :mod:`.service`)."""
