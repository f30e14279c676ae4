"""The chaos engine: cloud, scenarios, ledger, checks, yield points, injection, reporting.

Importing this package does not import Nova; :mod:`harness.cloud.nova_support`
does that on purpose, after the concurrency backend is chosen.
"""
