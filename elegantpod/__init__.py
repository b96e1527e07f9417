"""elegantpod."""
