"""knowledge package."""
