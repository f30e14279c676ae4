"""Declarative scenarios, one TOML file each; loaded by :mod:`harness.scenario`."""
