"""notebook package."""
