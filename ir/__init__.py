"""relaxc.ir."""
