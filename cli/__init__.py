"""The ``perdix`` command line: the composition root over the daemon (agent), the lab and the batch side (spark).

Each module registers its commands on one typer application; bad input exits 2 with one line saying
what and where.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version

from cli import batch, daemon, lab  # noqa: F401  (each registers its commands)
from cli.app import app


@app.command("version")
def version_command() -> None:
    """Print the Perdix version."""
    try:
        print(version("perdix"))
    except PackageNotFoundError:
        print("unknown (not installed)")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
