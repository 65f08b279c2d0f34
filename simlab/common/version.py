"""simlab's version, the one place it is written (pyproject.toml repeats it for the installer)."""

__version__ = "0.1.0"
