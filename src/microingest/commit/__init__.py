"""Commit: staging, the one transaction that lands a batch, its ledger and history; the skip."""
