"""The audit trail: a hash chain of records, one per policy decision and per outcome.

trail.py: what both stores of the chain share (sealing, writing as an AuditSink, verify); log.py:
the JSON Lines file (appends, anchor, rotation); postgres.py: the same chain in PostgreSQL; group.py: one process's concurrent appends
written as one (group commit); deferred.py: a batch's and the gateway's outcome records held back
and written in groups; records.py: what goes into a
record (time, identity, masking, hash). Which of the two a command writes is chosen with its
state (services.audit_log). The names below are the package's interface.
"""

from typing import TYPE_CHECKING

from llmc_cli import lazy_names

# Which module holds each name of the interface.
_WHERE = {
    name: module
    for module, names in {
        "llmc_cli.audit.deferred": "Deferred",
        "llmc_cli.audit.log": "DEFAULT_MAX_BYTES AuditLog default_path",
        "llmc_cli.audit.postgres": "PostgresAuditLog",
        "llmc_cli.audit.trail": "ChainedLog",
        "llmc_cli.audit.records": "MASK AuditError identity mask_secrets now_iso record_hash secret_values",
        "llmc_cli.store.chain": "GENESIS",
    }.items()
    for name in names.split()
}

if TYPE_CHECKING:  # what mypy reads; at run time each name loads with its module, on first use
    from llmc_cli.audit.deferred import Deferred
    from llmc_cli.audit.log import DEFAULT_MAX_BYTES, AuditLog, default_path
    from llmc_cli.audit.postgres import PostgresAuditLog
    from llmc_cli.audit.records import MASK, AuditError, identity, mask_secrets, now_iso, record_hash, secret_values
    from llmc_cli.audit.trail import ChainedLog
    from llmc_cli.store.chain import GENESIS
else:
    __getattr__ = lazy_names(__name__, globals(), _WHERE)


__all__ = [
    "ChainedLog",
    "Deferred",
    "DEFAULT_MAX_BYTES",
    "AuditLog",
    "default_path",
    "PostgresAuditLog",
    "MASK",
    "AuditError",
    "identity",
    "mask_secrets",
    "now_iso",
    "record_hash",
    "secret_values",
    "GENESIS",
]
