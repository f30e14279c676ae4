"""Oracles: the expected ledger, views of what Nova and the hosts hold, the checks, known findings."""
