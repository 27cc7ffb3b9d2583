"""Plain data shared by every layer: no I/O, no frameworks."""
