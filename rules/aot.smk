def aot_targets():
    """Final outputs of the aot stage."""
    return []
