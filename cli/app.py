"""The typer application and what every command shares: one-line errors (exit 2), settings, progress bars."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from typer._click.exceptions import UsageError

from agent.settings import ConfigError, Settings, load_settings
from simulator import TraceError

app = typer.Typer(
    name="perdix",
    help="Perdix: a runtime autoscaler for Apache Flink jobs (Daedalus MAPE-K loop).\n\n"
    "Settings come from a YAML file (--config), overridden by PERDIX_* environment variables "
    "(nested keys with __, e.g. PERDIX_PROMETHEUS__URL), overridden by flags.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
EXIT_BAD_INPUT = 2

SettingsT = TypeVar("SettingsT", bound=Settings)

MAX_HOURS = 24.0 * 366
"""Longest ``--hours`` of a replay: a year of simulated seconds (the replay's arrays hold one value a second)."""
MAX_FAILURES_PER_HOUR = 3600.0
"""Most injected failures an hour: one a simulated second."""

ConfigOption = typer.Option(None, "--config", "-c", help="YAML settings file.", dir_okay=False)


class BadInput(Exception):
    """Input a command cannot run on, found by the CLI itself; its message is the one line printed before exit 2."""


BAD_INPUT_ERRORS: tuple[type[Exception], ...] = (BadInput, ConfigError, TraceError)
"""The typed bad-input errors the entry point turns into one line and exit 2 when a command leaves them."""


def one_line(message: str) -> str:
    """``message`` on one line: its line breaks and runs of blanks become single spaces."""
    return " ".join(message.split())


def print_error(message: str) -> None:
    """``perdix: error: message`` as one line on stderr."""
    console.print(f"perdix: error: {one_line(message)}", markup=False, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """Print one line and exit 2 (bad input or bad configuration)."""
    print_error(message)
    raise typer.Exit(EXIT_BAD_INPUT)


def usage_line(exc: UsageError) -> str:
    """Click's usage error as one line, with the value given (when a flag's type refused it) and where to read
    the command's usage."""
    command = exc.ctx.command_path if exc.ctx is not None else "perdix"
    message = exc.format_message()
    if isinstance(exc.__cause__, ValidationError):  # typer checks a flag's type and range with pydantic
        errors = exc.__cause__.errors()
        if errors and "input" in errors[0]:
            message += f" (got {errors[0]['input']!r})"
    return f"{message} (see {command} --help)"


def _writable_dir(directory: Path) -> str | None:
    """Why no file can be made in the existing ``directory``, or None."""
    try:
        if os.statvfs(directory).f_flag & os.ST_RDONLY:
            return "is on a read-only file system"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not os.access(directory, os.W_OK | os.X_OK):
        return "is not writable"
    try:  # the permission bits do not bind root, and some file systems (/proc) take no file whatever they say
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"cannot be written ({exc.strerror or exc})"
    return None


def _creatable(path: Path, flag: str) -> None:
    """Exit 2 unless the directories up to ``path`` exist or can be made: no file on the way, writable."""
    ancestor = path.parent
    while not (ancestor.exists() or ancestor.is_symlink()):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        fail(f"{flag} {path}: {ancestor} is a file, so nothing can be made under it")
    problem = _writable_dir(ancestor)
    if problem is not None:
        fail(f"{flag} {path}: {ancestor} {problem}")


def check_output_dir(out: Path, files: Sequence[str], *, flag: str = "--out") -> None:
    """Before any work, exit 2 unless ``out`` is (or can be made) a writable directory for ``files``.

    An existing directory is reused: one line says which of ``files`` are already there and will be
    replaced; nothing else in it is touched.
    """
    try:
        if out.exists() or out.is_symlink():
            if not out.is_dir():
                fail(f"{flag} {out}: is a file, not a directory")
            problem = _writable_dir(out)
            if problem is not None:
                fail(f"{flag} {out}: {problem}")
            present = [name for name in files if (out / name).exists() or (out / name).is_symlink()]
            for name in present:
                if not (out / name).is_file():
                    fail(f"{flag} {out}: {name} is in the way (not a regular file)")
            if present:
                console.print(
                    f"{flag} {out}: will replace {', '.join(present)}; nothing else in it is touched",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
        else:
            _creatable(out, flag)
    except OSError as exc:
        fail(f"{flag} {out}: {exc.strerror or exc}")


def check_output_file(out: Path, *, flag: str = "--out") -> None:
    """Before any work, exit 2 unless the file ``out`` can be written; say so if it will be replaced."""
    try:
        if out.exists() or out.is_symlink():
            if not out.is_file():
                fail(f"{flag} {out}: not a regular file")
            problem = _writable_dir(out.parent)
            if problem is not None:
                fail(f"{flag} {out}: {out.parent} {problem}")
            console.print(f"{flag} {out}: will replace it", markup=False, highlight=False, soft_wrap=True)
        else:
            _creatable(out, flag)
    except OSError as exc:
        fail(f"{flag} {out}: {exc.strerror or exc}")


def default_of(model: type[BaseModel], key: str) -> str:
    """The default of the setting at the dotted ``key`` of ``model``, as a flag's help shows it (``json``)."""
    node: object = model.model_construct()  # the defaults, without reading any source
    for part in key.split("."):
        node = getattr(node, part)
    return str(node).lower() if isinstance(node, bool) else str(node)


def setting_help(text: str, model: type[BaseModel], key: str) -> str:
    """A flag's help that ends with the setting it overrides and that setting's default."""
    return f"{text.rstrip('.')} (default: the setting {key}, {default_of(model, key)})."


def settings_from(config: Path | None, overrides: dict[str, Any], model: type[SettingsT]) -> SettingsT:
    """Load settings of ``model`` (the agent's tree, or the lab's) or exit 2 with the one-line reason."""
    try:
        return load_settings(config, overrides, model=model)
    except ConfigError as exc:
        fail(str(exc))


def progress_bar(verb: str, *, remaining: bool = False) -> AbstractContextManager[Progress]:
    """A progress bar on stderr whose tasks show ``{task.fields[sim]}`` (e.g. simulated hours done)."""
    columns: list[Any] = [
        TextColumn(f"[bold]{verb}[/] {{task.description}}"),
        BarColumn(),
        TextColumn("{task.fields[sim]}"),
        TimeElapsedColumn(),
    ]
    if remaining:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, transient=False)


def hours_done(done_s: int, total_s: int) -> str:
    """``1.50/6.00 h``: simulated progress for a bar."""
    return f"{done_s / 3600:.2f}/{total_s / 3600:.2f} h"


def _episode_line(episode: dict[str, Any]) -> str:
    """``rescale at 7,320 s: 312 s, 1 stop``: one missed episode of a summary."""
    stops = episode["stops"]
    line = (
        f"{episode['kind']} at {episode['start_s']:,} s: {episode['length_s']:,} s, "
        f"{stops} stop{'s' if stops != 1 else ''}"
    )
    if episode["end_s"] is None:
        line += ", still open at the end"
    return line + (f", {episode['falling_behind_s']} s falling behind" if episode["falling_behind_s"] else "")


def print_summary(summary: dict[str, Any]) -> None:
    """A two-column table of a summary."""
    table = Table(title=f"{summary['trace']} — {summary['policy']}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if isinstance(value, float):
            value = f"{value:,.3f}"
        elif isinstance(value, int) and not isinstance(value, bool):
            value = f"{value:,}"
        elif key == "slo_missed_episodes":
            value = "\n".join(_episode_line(e) for e in value) or "none"
        table.add_row(key, str(value))
    Console().print(table)
