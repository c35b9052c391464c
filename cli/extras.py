"""The optional extras: which commands need which, checked before a command starts.

``pip install perdix`` installs what ``perdix run`` needs; the lab (``simulate``, ``evaluate``,
``capacity-plan``) and the batch side (``export-history``, ``retrain``) need the ``lab`` and ``batch``
extras of pyproject.toml. A command whose extra is missing exits 2 with one line naming the extra,
before it reads a file or starts anything, instead of a traceback half-way through.
"""

from __future__ import annotations

import importlib.util

from cli.app import fail

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "lab": ("numba", "matplotlib", "pulp"),
    "batch": ("pyspark", "pyarrow"),
}
"""The top-level modules each extra brings that the base install lacks (the extras of pyproject.toml)."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found on the path; nothing is imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported."""
    return [module for module in EXTRA_MODULES[extra] if not installed(module)]


def require_extra(command: str, *extras: str) -> None:
    """Exit 2 with one line naming the first of ``extras`` whose modules are not all installed."""
    for extra in extras:
        missing = missing_modules(extra)
        if missing:
            fail(
                f"{command} needs the '{extra}' extra ({', '.join(missing)} not installed): "
                f"pip install 'perdix[{extra}]'"
            )
