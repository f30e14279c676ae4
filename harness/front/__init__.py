"""Front ends: the nova-chaos CLI, the pytest plugin, reports."""
