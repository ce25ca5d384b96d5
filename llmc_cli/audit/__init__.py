"""The audit trail: a hash chain of records, one per policy decision and per outcome.

trail.py: what both stores of the chain share (sealing, writing as an AuditSink, verify); log.py:
the JSON Lines file (appends, anchor, rotation); postgres.py: the same chain in PostgreSQL; deferred.py: a batch's records written in groups; records.py: what goes into a
record (time, identity, masking, hash). The names below are the package's interface.
"""

from llmc_cli.audit.deferred import Deferred
from llmc_cli.audit.log import DEFAULT_MAX_BYTES, AuditLog, default_path, open_log
from llmc_cli.audit.postgres import PostgresAuditLog
from llmc_cli.audit.trail import ChainedLog
from llmc_cli.audit.records import MASK, AuditError, identity, mask_secrets, now_iso, record_hash, secret_values
from llmc_cli.store.chain import GENESIS

__all__ = ["ChainedLog", "Deferred", "DEFAULT_MAX_BYTES", "AuditLog", "default_path", "open_log", "PostgresAuditLog", "MASK",
           "AuditError", "identity", "mask_secrets", "now_iso", "record_hash", "secret_values", "GENESIS"]
