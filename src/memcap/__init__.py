"""memcap: audit transformer models against attention memorization-capacity theory."""

__version__ = "0.1.0"
