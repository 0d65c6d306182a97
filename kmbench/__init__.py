"""kmbench: benchmark k-means implementations fairly, and validate every result."""

__version__ = "0.1.0"
