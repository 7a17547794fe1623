"""Schema validation of the config, with one short message per mistake.

:func:`validate_schema` checks the config against ``workflow/schemas/config.schema.yaml``
and fills in every default the way ``snakemake.utils.validate`` does (the rest of the
workflow reads defaulted keys), but a mistake becomes a one-line :class:`ConfigError`: the
key path, what was found, what is allowed and the fix, instead of a dump of the schema.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match

from memcap.errors import ConfigError

_TYPE_WORDS = {
    "object": "a mapping of keys",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_FOUND_LIMIT = 60  # characters of a found value shown in a message
_KEYS_LISTED = 6  # a mapping of at most this many keys is described by its keys
# Literal words of a pattern's alternatives, e.g. "all" and "random_attention" in
# "^(all|random_attention|[0-9]+)$": candidates for a "did you mean".
_PATTERN_WORD = re.compile(r"(?<=[(|^])([A-Za-z_][A-Za-z0-9_]*)(?=[|()$])")


def _with_defaults(validator_class: Any) -> Any:
    """The validator class that fills a missing key with its schema default before checking
    an object (snakemake.utils.validate's extension). Defaults are copied, so no two places
    of the config share one object, and only mappings are filled (a null section is an
    error, not a crash)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema and name not in instance:
                    instance[name] = copy.deepcopy(subschema["default"])
        yield from check_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": fill_then_check})


_DefaultFilling = _with_defaults(Draft202012Validator)


def validate_schema(config: dict[str, Any], schema_path: str | Path) -> None:
    """Check ``config`` against the schema and fill in its defaults, in place.

    Raises:
        ConfigError: the most relevant mistake (jsonschema's best match), in one line.
    """
    schema = yaml.safe_load(Path(schema_path).read_text())
    errors = list(_DefaultFilling(schema).iter_errors(config))
    if errors:
        raise schema_error(best_match(errors), schema)


def schema_error(error: ValidationError, root: Mapping[str, Any]) -> ConfigError:
    """One :class:`ConfigError` for a jsonschema error; ``root`` resolves ``$ref``.

    ``error`` is the most specific failure (e.g. a pattern inside a ``oneOf``); what is
    allowed is told from the widest alternative at the same key.
    """
    key = key_path(error.absolute_path)
    if "propertyNames" in error.absolute_schema_path:
        return ConfigError(
            _join(key, str(error.instance)),
            f"the name {error.instance!r} is not allowed here; allowed: names matching "
            f"{error.validator_value}",
            "rename it (letters, digits and underscores, starting with a letter)",
        )
    if error.validator in ("additionalProperties", "unevaluatedProperties"):
        allowed = list(_properties(error.schema, root))
        unknown = [str(name) for name in error.instance if name not in allowed]
        close = difflib.get_close_matches(unknown[0], allowed, n=1)
        return ConfigError(
            _join(key, unknown[0]),
            f"unknown key; allowed keys here: {', '.join(allowed)}",
            f"did you mean '{close[0]}'?" if close else "remove it or use an allowed key",
        )
    if error.validator == "required":
        missing = next(name for name in error.validator_value if name not in error.instance)
        subschema = error.schema.get("properties", {}).get(missing, {})
        return ConfigError(
            _join(key, missing),
            f"this required key is missing; allowed: {describe(subschema, root)}",
            f"add {missing}: <value> to {key or 'the config'}",
        )
    widest = _widest(error)
    name = key.rpartition(".")[2] or "the key"
    found = f"found {_show(error.instance)}"
    if error.validator not in ("type", "oneOf", "anyOf", "enum", "const", "pattern"):
        found += f" ({error.message})"
    return ConfigError(
        key, f"{found}; allowed: {describe(widest.schema, root)}", _fix(error, widest, name, root)
    )


def _widest(error: ValidationError) -> ValidationError:
    """The outermost ``oneOf`` / ``anyOf`` failure at the same key that ``error`` is part of."""
    while (
        error.parent is not None
        and error.parent.validator in ("oneOf", "anyOf")
        and error.parent.absolute_path == error.absolute_path
    ):
        error = error.parent
    return error


def _fix(error: ValidationError, widest: ValidationError, name: str, root: Any) -> str:
    """The fix for a value that is not allowed: the usual mistakes first."""
    allowed = describe(widest.schema, root)
    value = error.instance
    if value is None and "a mapping" in allowed:
        return (
            f"give {name} its keys, or delete the line '{name}:' so that it takes its defaults "
            "(an empty section is null in YAML)"
        )
    items = re.split(r"[,\s]+", value.strip("[] ")) if isinstance(value, str) else []
    if "a list" in allowed and (len(items) > 1 or str(value).startswith("[")):
        return f"write a YAML list, e.g. {name}: [{', '.join(items)}]"
    if isinstance(value, Mapping) and "a list of mappings" in allowed:
        first = next(iter(value), "name")
        return f"make it a list item: put '- ' before its first key ('- {first}: ...')"
    close = difflib.get_close_matches(str(value), _literals(widest.schema, root), n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    default = _resolve(widest.schema, root).get("default")
    if default in (None, [], {}):
        return f"give {name} an allowed value"
    example = yaml.safe_dump(default, default_flow_style=True).removesuffix("\n...\n").strip()
    return f"give {name} an allowed value, e.g. {name}: {example}"


def _literals(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[str]:
    """The literal words a schema allows (enum and const values, words of patterns)."""
    schema = _resolve(schema, root)
    words = [str(v) for v in schema.get("enum", []) if v is not None]
    words += [str(schema["const"])] if "const" in schema else []
    words += _PATTERN_WORD.findall(schema.get("pattern", ""))
    for keyword in ("oneOf", "anyOf"):
        for branch in schema.get(keyword, []):
            words += _literals(branch, root)
    if isinstance(schema.get("items"), Mapping):
        words += _literals(schema["items"], root)
    return words


def key_path(parts: Iterable[str | int]) -> str:
    """``extract.models[0].family`` from the path ``("extract", "models", 0, "family")``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def describe(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    """What a (sub)schema allows, in a few words: "an integer >= 1 or a list of ..."."""
    schema = _resolve(schema, root)
    for keyword in ("oneOf", "anyOf"):
        if keyword in schema:
            return " or ".join(describe(branch, root) for branch in schema[keyword])
    if "enum" in schema:
        return "one of " + ", ".join(_show(value) for value in schema["enum"])
    if "const" in schema:
        return _show(schema["const"])
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    words = " or ".join(_type_phrase(kind, schema, root) for kind in types)
    return words or "see the key's description in workflow/schemas/config.schema.yaml"


def _type_phrase(kind: str, schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    words = _TYPE_WORDS.get(kind, kind)
    if kind in ("integer", "number"):
        bounds = [
            f"{sign} {schema[name]}"
            for name, sign in (("minimum", ">="), ("maximum", "<="))
            if name in schema
        ]
        words += (" " + " and ".join(bounds)) if bounds else ""
    elif kind == "string" and "pattern" in schema:
        words += f" matching {schema['pattern']}"
    elif kind == "array" and "items" in schema:
        items = describe(schema["items"], root)
        words += " of " + re.sub(r"\b(an?) (\w+)", lambda m: m[2] + "s", items)
        if schema.get("minItems"):
            words = f"{words} (at least {schema['minItems']})"
    elif kind == "object" and 0 < len(_properties(schema, root)) <= _KEYS_LISTED:
        words += " (" + ", ".join(_properties(schema, root)) + ")"
    return words


def _properties(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """The keys an object schema defines: those of the schema it refers to, then its own."""
    own = dict(schema.get("properties", {}))
    if "$ref" not in schema:
        return own
    target: Any = root
    for part in schema["$ref"].removeprefix("#/").split("/"):
        target = target[part]
    return {**_properties(target, root), **own}


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema a local ``$ref`` ("#/$defs/...") points to, merged with its siblings."""
    while "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _show(value: Any) -> str:
    """A found value as YAML writes it, cut short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        text = repr(value)
    elif isinstance(value, Mapping):
        text = "a mapping {" + ", ".join(_first(value)) + "}"
    else:
        text = repr(value)
    return text if len(text) <= _FOUND_LIMIT else text[: _FOUND_LIMIT - 3] + "..."


def _first(mapping: Mapping[str, Any]) -> Iterator[str]:
    for name, value in mapping.items():
        yield f"{name}: {_show(value)}"


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name
