"""The in-process cloud: real Nova services on fake hosts, and what is done to Nova (backend, mutations, one-thread execution)."""
