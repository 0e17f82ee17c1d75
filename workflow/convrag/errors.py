"""Project exceptions: every user-facing error names the file, record or config key."""


class ConvragError(Exception):
    """Base class; the CLI prints these without a traceback."""


class ConfigError(ConvragError):
    """A bad config value; the message names the key path (e.g. ``grid.models[1]``)."""


class DataError(ConvragError):
    """Malformed input data; the message names the file and line or record."""


class ModelError(ConvragError):
    """A model backend failed after its retries."""


class ReplayMissError(ModelError):
    """A request missed the LLM cache under strict replay (``llm_cache.replay: strict``): the run
    was meant to use recorded answers only, so the message names the request, model, role and job."""
