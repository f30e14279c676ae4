"""Exploration: the yield points of Nova's path, the tracer that records them, the injection at one."""
