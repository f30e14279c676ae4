"""Execution: one run, campaign items and verdicts, and the strategies that run them (fork, fresh)."""
