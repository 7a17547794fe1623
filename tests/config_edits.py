"""Helper of the config tests: change one key of a parsed config in place."""


def set_key(config: dict, path: list, value) -> dict:
    """Set ``config[path[0]][path[1]]...`` to ``value``; return the config."""
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return config
