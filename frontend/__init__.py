"""relaxc.frontend."""
