def assumptions_targets():
    """Final outputs of the assumptions stage."""
    return []
