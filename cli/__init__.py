"""relaxc.cli."""
