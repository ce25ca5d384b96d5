#!/usr/bin/env python3
"""A headless "browser" for BROWSER=...: it opens the authorization URL and follows the redirects,
as a person's browser would after they approve, so the redirect reaches llmc's loopback listener.
Standard library only; exits non-zero if the redirect cannot be followed."""

import sys
import urllib.request

try:
    with urllib.request.urlopen(sys.argv[1], timeout=20) as response:
        response.read()
except Exception as exc:  # noqa: BLE001 (report anything, then fail)
    print(f"browser.py: {exc}", file=sys.stderr)
    sys.exit(1)
