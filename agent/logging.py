"""structlog, configured once: JSON lines in production, a readable console in the demo."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog
from structlog.typing import FilteringBoundLogger, Processor

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at write time (test runners and daemons swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """Set up structlog for the whole process (call once, at the CLI entry)."""
    renderer: Processor
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=stream is None and sys.stderr.isatty())
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        # _CurrentStderr has the write/flush that PrintLogger uses, not the whole TextIO surface.
        logger_factory=structlog.PrintLoggerFactory(file=stream or cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str | None = None, **bound: object) -> FilteringBoundLogger:
    """A structlog logger, optionally bound to key/values."""
    logger: FilteringBoundLogger = structlog.get_logger(name)
    return logger.bind(**bound) if bound else logger
