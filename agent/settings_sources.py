"""Where settings come from, and the one line that says what is wrong with them and where.

The settings tree (:mod:`agent.settings`) layers pydantic-settings' sources, highest first: the CLI flags
(init arguments), the ``PERDIX_*`` environment, the YAML file (:class:`SettingsFileSource`), the defaults.
pydantic-settings merges them key by key, so a variable that sets one nested key leaves the file's other
keys of that section in place. This module reads the file (bounded, UTF-8, no key given twice) and turns a
validation error into one line naming the flag, variable or file that set the bad value.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import reprlib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeAlias

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsError, YamlConfigSettingsSource
from pydantic_settings.sources import ConfigFileSourceType

ENV_PREFIX = "PERDIX_"
ENV_NESTED_DELIMITER = "__"
MAX_CONFIG_BYTES = 2**20
"""Largest settings file read: the Helm chart renders it into a ConfigMap, which holds 1 MiB."""
Location: TypeAlias = tuple[int | str, ...]
"""Where in the settings tree a value sits (a validation error's ``loc``): keys, or indices of lists."""


class ConfigError(Exception):
    """Configuration that cannot run; its message is the one line the CLI prints before exit 2."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (plain YAML keeps the last silently)."""


def _mapping_with_unique_keys(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[object, object]:
    first_line: dict[object, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            earlier = first_line.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:  # an unhashable key: construct_mapping says so
            continue
        if earlier != key_node.start_mark.line + 1:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice (first on line {earlier})", key_node.start_mark
            )
    return loader.construct_mapping(node, deep=True)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_unique_keys)


def _read_text(path: Path) -> str:
    """The file's text: at most MAX_CONFIG_BYTES of UTF-8 (ConfigError otherwise)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config file larger than {MAX_CONFIG_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}:{line}: config file is not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


def read_settings_file(path: Path) -> dict[str, object]:
    """The settings file's mapping: at most MAX_CONFIG_BYTES of UTF-8 YAML, no key twice (ConfigError otherwise)."""
    text = _read_text(path)
    try:
        loaded = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506  (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the config file must hold a mapping of settings, not {type(loaded).__name__}")
    for key in loaded:
        if not isinstance(key, str):  # as validation says of a nested one, which it sees
            raise ConfigError(f"{path}: {key}: Keys should be strings (got {key!r})")
    return loaded


_SETTINGS_FILE: ContextVar[Path | None] = ContextVar("perdix_settings_file", default=None)
"""The YAML file the settings being built read (None: none); set by :func:`reading`."""


@contextmanager
def reading(path: Path | None) -> Iterator[None]:
    """Within the block, settings trees built read ``path`` as their YAML file."""
    token = _SETTINGS_FILE.set(path)
    try:
        yield
    finally:
        _SETTINGS_FILE.reset(token)


class SettingsFileSource(YamlConfigSettingsSource):
    """pydantic-settings' YAML source over the file :func:`reading` names, read by :func:`read_settings_file`.

    Unlike the stock source, a file that is missing or is not a regular file is an error, not an empty file.
    """

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        self._model = settings_cls  # before the base class reads the file (in its __init__)
        super().__init__(settings_cls, yaml_file=_SETTINGS_FILE.get())

    def _read_files(self, files: ConfigFileSourceType | None, deep_merge: bool = False) -> dict[str, Any]:
        # The signature is the base class's (PydanticBaseSettingsSource), Any included.
        if files is None:
            return {}
        path = Path(str(files))
        tree = read_settings_file(path)
        flag = boolean_for_a_number(tree, self._model)
        if flag is not None:
            raise ConfigError(f"{path}: {flag}")
        return tree


def boolean_for_a_number(tree: Mapping[str, object], model: type[BaseModel], at: str = "") -> str | None:
    """Where the YAML file gives ``true`` or ``false`` for a number, named with the fix, or None. pydantic reads a
    boolean as 1 or 0 wherever a number goes (``max_parallelism: true`` ran the job at one worker), and YAML
    writes one for ``yes``, ``on`` and ``true`` alike."""
    for key, value in tree.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue  # an unknown key: the model's own validation names it
        kinds = _leaf_types(field.annotation)
        where = f"{at}{key}"
        if isinstance(value, bool) and bool not in kinds and kinds & {int, float}:
            return f"{where}: Input should be a number, not {str(value).lower()}"
        if isinstance(value, Mapping):
            for kind in kinds:
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    found = boolean_for_a_number(value, kind, f"{where}.")
                    if found is not None:
                        return found
    return None


def _leaf_types(annotation: object) -> set[object]:
    """The types an annotation admits, through Optional, unions and Annotated."""
    arguments = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _leaf_types(arguments[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_leaf_types(argument) for argument in arguments))
    return {annotation}


def format_validation_error(
    exc: ValidationError, source: str | None = None, source_of: Callable[[Location], str | None] | None = None
) -> str:
    """One line per problem: where it was set, the dotted key, the problem and, where it helps, the bad value.

    ``source_of`` names where the value at an error's location came from (a flag, an environment
    variable); ``source`` (the config file) otherwise.
    """
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "settings"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] not in ("value_error", "assertion_error") and "input" in error:
            value = error["input"]
            if not isinstance(value, dict):
                message = f"{message} (got {_shown(value)})"
        origin = (source_of(tuple(error["loc"])) if source_of is not None and error["loc"] else None) or source
        where = f"{origin}: " if origin else ""
        lines.append(f"{where}{key}: {message}" if key != "settings" else f"{where}{message}")
    if len(lines) > MAX_PROBLEMS_SHOWN:
        lines = [*lines[:MAX_PROBLEMS_SHOWN], f"and {len(lines) - MAX_PROBLEMS_SHOWN} more"]
    return "; ".join(lines)


MAX_PROBLEMS_SHOWN = 5
"""The problems one error line names; the rest are counted."""


def _short_repr() -> reprlib.Repr:
    shown = reprlib.Repr()
    shown.maxlevel, shown.maxlist, shown.maxtuple, shown.maxdict, shown.maxset = 2, 4, 4, 4, 4
    shown.maxstring, shown.maxother, shown.maxlong = 80, 80, 40
    return shown


_SHOWN = _short_repr()
"""A bad value as an error line shows it: a few elements, a couple of levels deep. A YAML file of a few hundred
bytes whose aliases nest ten deep is a value of a billion elements; its full repr took gigabytes."""


def _shown(value: object) -> str:
    """``value``'s repr, cut short (:data:`_SHOWN`)."""
    return _SHOWN.repr(value)


NOT_SETTINGS = frozenset(
    {
        "SIMULATOR",
        "CACHE_DIR",
        "IMAGE",
        "BASE_IMAGE",
        "BUILDER",
        "SOURCE",
        "DEBIAN_MIRROR",
        "VERSION",
        "REVISION",
        "FLINK_VERSIONS",
    }
)
"""PERDIX_* variables that are not the agent's settings: the lab's simulator section (``perdix simulate`` and
``perdix evaluate`` read it), where built Flink jobs are cached (``lab.flink.trace_job``), the image build's
(``scripts/build-image.sh``, the Dockerfile's arguments) and the tests' (``tests/flink/conftest.py``). A test
fails when one of those is used and not listed here."""


SERVICE_LINK = re.compile(
    r".+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)"
)
"""The variables Kubernetes gives every pod for each Service of its namespace (``PERDIX_METRICS_SERVICE_HOST``,
``PERDIX_METRICS_PORT_9100_TCP_ADDR`` for a Service ``perdix-metrics``): a release named ``perdix`` makes them
PERDIX_*; they are no setting and no misspelling of one."""


def unknown_environment_variable(fields: Iterable[str]) -> str | None:
    """The one line naming the first PERDIX_* variable that sets none of ``fields`` (the settings' top-level keys)
    and is none of :data:`NOT_SETTINGS`, with the setting it may have meant; None when every one is known. A
    misspelled variable is no setting at all: ``PERDIX_DRYRUN=true`` would leave a run live that was meant to be
    dry."""
    known = {field.upper() for field in fields}
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX):
            continue
        head = upper[len(ENV_PREFIX) :].split(ENV_NESTED_DELIMITER, 1)[0]
        if head in known or head in NOT_SETTINGS or SERVICE_LINK.fullmatch(upper):
            continue
        close = difflib.get_close_matches(head, sorted(known), n=1)
        hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
        return f"environment variable {name}: not a setting{hint}"
    return None


def environment_variable(loc: Location) -> str | None:
    """The PERDIX_* variable that set the value at ``loc`` (the leaf's, or a section's JSON), if one did."""
    names = {name.upper(): name for name in os.environ}
    for end in range(len(loc), 0, -1):
        candidate = ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(part) for part in loc[:end]).upper()
        if candidate in names:
            return names[candidate]
    # A section's own check (a model validator) reports the section: name the variables set inside it.
    inside = ENV_PREFIX + ENV_NESTED_DELIMITER.join(str(part) for part in loc).upper() + ENV_NESTED_DELIMITER
    within = sorted(names[name] for name in names if name.startswith(inside))
    return ", ".join(within) or None


def env_settings_error(exc: SettingsError, model: type[BaseModel]) -> str:
    """pydantic-settings' SettingsError (a variable whose value must be JSON and is not) as the variable's own
    line: a list or mapping setting's (``PERDIX_SAFEGUARDS__BLOCKED_PERIODS__PERIODS``) says it takes JSON, a
    section's says to set one key of it."""
    field = re.search(r'field "([^"]+)"', str(exc))
    name = environment_variable((field.group(1),)) if field else None
    if field is None or name is None:
        return f"{ENV_PREFIX}* environment: {exc}"
    for variable in name.split(", "):
        shape = _json_shape(model, variable)
        if shape is not None and not _is_json(os.environ.get(variable, "")):
            example = '["..."]' if shape == "list" else '{"KEY": ...}'
            return f"environment variable {variable}: not a JSON {shape} (e.g. {variable}='{example}')"
    section = field.group(1) if ", " in name else ".".join(_path(name)).lower()
    return (
        f"environment variable {name}: not a JSON object of the {section!r} section "
        f"(or set one key: {name}{ENV_NESTED_DELIMITER}KEY)"
    )


def _path(variable: str) -> list[str]:
    """The keys a PERDIX_* variable names, upper case (``PERDIX_SAFEGUARDS__QUOTA``: SAFEGUARDS, QUOTA)."""
    return variable.upper().removeprefix(ENV_PREFIX).split(ENV_NESTED_DELIMITER)


def _json_shape(model: type[BaseModel], variable: str) -> str | None:
    """``list`` or ``object`` where ``variable`` names a setting that holds a list or a mapping (which the
    environment gives as JSON), else None (a section, a scalar, or no setting)."""
    kinds: set[object] = {model}
    for part in _path(variable):
        sections = [kind for kind in kinds if isinstance(kind, type) and issubclass(kind, BaseModel)]
        field = next(
            (f for section in sections for key, f in section.model_fields.items() if key.upper() == part), None
        )
        if field is None:
            return None
        kinds = _leaf_types(field.annotation)
    origins = {typing.get_origin(kind) or kind for kind in kinds}
    if origins & {list, tuple, set, frozenset}:
        return "list"
    if origins & {dict, Mapping}:
        return "object"
    return None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def flag_tree(overrides: Mapping[str, object] | None) -> dict[str, Any]:
    """The flags' dotted keys (``{"scale_target.kind": "deployment"}``) as nested mappings; None: not given."""
    # Any: the tree is unpacked into the settings' constructor, whose keyword arguments pydantic validates.
    tree: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise TypeError(f"flag {key!r}: {part!r} is given a value of its own")
            node = child
        node[leaf] = value
    return tree


def _given(data: Mapping[str, object], loc: Location) -> bool:
    node: object = data
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def origin_naming(flags: Mapping[str, object]) -> Callable[[Location], str | None]:
    """Where the value at a location came from: the command line, an environment variable, or None (the file)."""

    def origin(loc: Location) -> str | None:
        if _given(flags, loc):
            return "command line"
        variable = environment_variable(loc)
        return f"environment variable {variable}" if variable else None

    return origin
