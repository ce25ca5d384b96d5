"""The rate limits' windows in a file (RateWindows): ratelimit.json in the state directory, under a
file lock, shared by every llmc process of this user on this machine."""

from __future__ import annotations

import json
import time

from llmc_cli.config import files, paths


class FileRateWindows:
    def acquire(self, limits: list[tuple[str, int]], window: float) -> tuple[str, int, float] | None:
        """The state directory is resolved here, when a limit applies: most calls have none and
        touch no file."""

        path = paths.state_dir() / "ratelimit.json"
        with files.locked(path):
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                state = {}  # missing or torn by an older llmc: start counting afresh
            if not isinstance(state, dict):
                state = {}
            now = time.time()
            for key, limit in limits:
                recent = [t for t in state.get(key) or [] if isinstance(t, (int, float)) and now - t < window]
                state[key] = recent
                if len(recent) >= limit:
                    return key, limit, now - min(recent)
            for key, _ in limits:
                state[key].append(now)
            # Counted before the call runs: if the count cannot be stored (ConfigError, exit 3),
            # the call does not run either, or a full disk would lift every limit.
            files.write_atomic(path, json.dumps(state))
        return None
