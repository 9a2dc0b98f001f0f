"""relaxc.passes."""
