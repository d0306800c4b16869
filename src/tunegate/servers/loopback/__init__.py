"""A programmable OpenAI-compatible loopback server: the gauge's reference and the demo target."""

from __future__ import annotations

from tunegate.servers.loopback.behaviour import Behaviour
from tunegate.servers.loopback.server import LoopbackServer, build_app

__all__ = ["Behaviour", "LoopbackServer", "build_app"]
