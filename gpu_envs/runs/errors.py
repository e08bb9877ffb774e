"""The error of a run's records: a run config value or key that is invalid."""


class ConfigError(ValueError):
    """A run config value or key is invalid; the message names the field."""
