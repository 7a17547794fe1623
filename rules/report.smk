def report_targets():
    """Final outputs of the report stage."""
    return []
