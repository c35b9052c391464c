"""``perdix run``: the production daemon, with the agent's settings tree (no simulator, production policies only)."""

from __future__ import annotations

from pathlib import Path

import typer

from agent.logging import configure_logging
from agent.settings import ConfigError, Settings
from cli.app import app, fail, setting_help, settings_from


@app.command("run")
def run(
    config: Path = typer.Option(
        None, "--config", "-c", help="YAML settings file (the Helm chart renders it).", dir_okay=False
    ),
    dry_run: bool = typer.Option(
        None,
        "--dry-run/--no-dry-run",
        help=setting_help("Plan, log and leave Events without rescaling", Settings, "dry_run"),
    ),
    log_format: str = typer.Option(
        None, "--log-format", help=setting_help("json or console", Settings, "telemetry.log_format")
    ),
    log_level: str = typer.Option(
        None, "--log-level", help=setting_help("debug, info, warning or error", Settings, "telemetry.log_level")
    ),
) -> None:
    """Run the production daemon: Prometheus monitor, Kubernetes executor, /metrics /healthz /readyz.

    Stops on SIGTERM.
    """
    from agent.daemon import Daemon, StartupError

    settings = settings_from(
        config, {"dry_run": dry_run, "telemetry.log_format": log_format, "telemetry.log_level": log_level}, Settings
    )
    configure_logging(settings.telemetry.log_format, settings.telemetry.log_level)
    try:
        daemon = Daemon(settings)
        daemon.run_until_signal()
    except (StartupError, ConfigError) as exc:
        fail(str(exc))
