"""Pre-approved exact calls kept in the profile itself (Approvals): its [policy] `approved` list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llmc_cli.errors import UsageError

if TYPE_CHECKING:
    from llmc_cli.config.profiles import LoadedProfile


class FileApprovals:
    def __init__(self, profile: LoadedProfile) -> None:
        self.profile = profile

    def is_approved(self, digest: str) -> bool:
        return digest in self.profile.profile.policy.approved

    def approve(self, digest: str, tool: str) -> str:
        """Added to the profile file's list (a UsageError for the built-in default profile, which has no file)."""
        from llmc_cli.config.profile_writer import update_profile

        path = self.profile.path
        if path is None:
            raise UsageError("the built-in default profile cannot be written: run `llmc profiles init` first")

        def add(data: dict[str, Any]) -> None:
            approved = data.setdefault("policy", {}).setdefault("approved", [])
            if digest not in approved:
                approved.append(digest)

        update_profile(path, add)
        return f"in {path}"
