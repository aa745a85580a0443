"""A warning before the server purges the binlog file the checkpoint needs.

A purged checkpoint file is found at start (``source.reader``), when the changes after it are
already lost to replication. This guard warns while there is still time: the reporter's poll of
SHOW BINARY LOGS (its own connection, never the hot loop) gives the files the server still has,
and the server's expiry setting says how long it keeps a closed file.

The file the checkpoint needs (its own, or an older one with the rows of an XA transaction
prepared before it and not yet committed: ``ops.metrics.needed_file``) is at risk when it is not the active file (the active one is never purged)
and either:

- fewer than ``retention.warn_files`` files are older than it: a purge by hand (PURGE BINARY
  LOGS), or the next expiry, takes the oldest files first; or
- its expiry is within ``retention.warn_margin_s``. The file was closed no earlier than the last
  change the streamer read, so ``expiry - (now - that change's time)`` is a lower bound of the
  time left: the warning comes early, never late.

The way out is in the warning: let the stream catch up (it is behind), raise the retention, or,
once the file is gone, take a snapshot of the tables and restart from a new position.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional


def expiry_seconds(variables: Dict[str, Any]) -> float:
    """The server's binlog expiry in seconds (0: never), from ``binlog_expire_logs_seconds``
    (MySQL 8, MariaDB 10.6+) or else ``expire_logs_days``."""
    seconds = float(variables.get("binlog_expire_logs_seconds") or 0)
    if seconds:
        return seconds
    return float(variables.get("expire_logs_days") or 0) * 86400


XA_FILE = "the binlog file holding the rows of an XA transaction prepared before the checkpoint,"


def judge(files: List[str], checkpoint_file: Optional[str], expiry_s: float,
          since_last_change_s: Optional[float], warn_files: int, warn_margin_s: float,
          what: str = "the checkpoint's binlog file") -> Dict[str, Any]:
    """The guard's state: ``status`` ok or warning, and its numbers and reason. ``what`` names
    the file in the reason (``XA_FILE`` when it holds a prepared XA transaction's rows)."""
    out: Dict[str, Any] = {"status": "ok", "reason": "", "files_before": None,
                           "expires_in_s": None, "expiry_s": expiry_s}
    if not checkpoint_file or checkpoint_file not in files:
        return out  # not known yet, or already gone (the reader reports that)
    index = files.index(checkpoint_file)
    out["files_before"] = index
    if index == len(files) - 1:
        return out  # the active file: never purged
    if expiry_s and since_last_change_s is not None:
        out["expires_in_s"] = round(expiry_s - since_last_change_s, 1)
    reasons: List[str] = []
    if index < warn_files:
        reasons.append(f"only {index} binlog file{'s' if index != 1 else ''} older than it "
                       f"remain{'s' if index == 1 else ''} (retention.warn_files is {warn_files}): "
                       f"the next purge may take it")
    if out["expires_in_s"] is not None and out["expires_in_s"] <= warn_margin_s:
        reasons.append(f"the server's binlog expiry ({expiry_s:g} s) removes it in "
                       f"{max(0.0, out['expires_in_s']):.0f} s or less (retention.warn_margin_s "
                       f"is {warn_margin_s:g})")
    if reasons:
        out["status"] = "warning"
        out["reason"] = (f"{what} {checkpoint_file} is at risk of being "
                         f"purged: {'; '.join(reasons)}. Once it is gone, the changes after the "
                         f"checkpoint are lost to replication. Let the stream catch up, or raise "
                         f"the retention (binlog_expire_logs_seconds / expire_logs_days); if it "
                         f"is purged, take a snapshot of the tables and restart from a new "
                         f"position")
    return out

