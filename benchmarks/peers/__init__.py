"""Adapters that run peer benchmark tools (AIPerf) for comparison with tunegate."""
