"""The ``perdix`` command line: the composition root over the daemon (agent), the lab and the batch side (spark).

Each module registers its commands on one typer application; bad input exits 2 with one line saying
what and where.
"""

from __future__ import annotations

import sys

import typer
from typer._click import exceptions as click_errors  # typer vendors click and re-exports few of its errors

from cli import batch, daemon, lab  # noqa: F401  (each registers its commands)
from cli.build_info import build_info
from cli.app import BAD_INPUT_ERRORS, EXIT_BAD_INPUT, app, print_error, usage_line


@app.command("version")
def version_command() -> None:
    """Print the Perdix version and the git revision it was built from."""
    print(build_info().line())


def main(args: list[str] | None = None) -> None:
    """Console-script entry point: every bad input, whoever finds it, ends here as one line and exit 2.

    Click's own usage errors (an unknown option, a flag out of its range, a missing file) are printed as one
    line too, instead of its usage box; the typed bad-input errors of the readers (:data:`BAD_INPUT_ERRORS`)
    that a command does not catch itself are turned into that line here.
    """
    try:
        code = app(args=args, prog_name="perdix", standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        code = EXIT_BAD_INPUT
    except click_errors.UsageError as exc:
        print_error(usage_line(exc))
        code = EXIT_BAD_INPUT
    except click_errors.ClickException as exc:
        print_error(exc.format_message())
        code = exc.exit_code
    except BAD_INPUT_ERRORS as exc:
        print_error(str(exc))
        code = EXIT_BAD_INPUT
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
