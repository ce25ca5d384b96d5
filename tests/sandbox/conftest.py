"""Where bubblewrap is (scripts/test.sh installs it; CI runs these tests as root, for real)."""

from __future__ import annotations

import shutil

BWRAP = shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
