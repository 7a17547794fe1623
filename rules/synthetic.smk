def synthetic_targets():
    """Final outputs of the synthetic stage."""
    return []
