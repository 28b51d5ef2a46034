"""The package logger. Library code logs and warns; only the CLI prints."""

import logging

logger = logging.getLogger("fwd9m")
logger.addHandler(logging.NullHandler())
