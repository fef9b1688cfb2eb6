"""detectors package."""
