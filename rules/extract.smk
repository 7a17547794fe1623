def extract_targets():
    """Final outputs of the extract stage."""
    return []
