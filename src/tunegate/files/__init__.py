"""Files that survive a crash: atomic, durable replacement (used by the soak and the tuner)."""
