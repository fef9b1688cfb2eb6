"""detection package."""
