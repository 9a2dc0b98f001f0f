"""relaxc.backend."""
