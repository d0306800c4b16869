"""Server-side code: the loopback reference server, the simulator, engine adapters."""
