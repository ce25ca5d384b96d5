"""Where llmc keeps its files, and the TOML profiles that describe servers, policy and LLM.

The names below are the package's interface: config/profiles.py's, loaded (with the profile
schema under it) when first used, and profile_cache.py's parse_profile (with validation.py), which
only a profile's file needs. The modules a server-facing command loads before
its servers start (cli/starting.py, cli/context.py, cli/output.py, cli/targets.py,
services/sandbox.py) name them as `config.load_profile`: an ad-hoc server (--stdio) starts before
the profile machinery loads, which its command loads after the spawn (cli/common.py)."""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

__getattr__ = lazy_names(
    __name__,
    globals(),
    {
        **dict.fromkeys(("expand", "load_profile", "lock_path", "usable_specs"), "llmc_cli.config.profiles"),
        # a profile file's text to a Profile (the cache, else validation): not for the built-in profile
        "parse_profile": "llmc_cli.config.profile_cache",
    },
)

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.config.profile_cache import parse_profile
    from llmc_cli.config.profiles import expand, load_profile, lock_path, usable_specs

__all__ = ["expand", "load_profile", "lock_path", "parse_profile", "usable_specs"]
