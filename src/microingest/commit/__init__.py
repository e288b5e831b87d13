"""Commit: the read's proof, the one transaction that lands a batch (each record COPYed once), its ledger and
history."""
