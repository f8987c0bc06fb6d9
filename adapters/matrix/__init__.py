"""The Matrix adapter: cards answered with one reply, reactions and polls, on matrix-nio (E2EE with vodozemac)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.matrix.adapter import MatrixAdapter
from adapters.matrix.settings import MatrixSettings
from bridge.config.file import Config
from bridge.door.ports import Inbound


def create(host: Inbound, settings: Mapping[str, Any], config: Config) -> MatrixAdapter:
    """The adapter for the `chat.matrix` block of the config (attach it to the host, then run `serve()`)."""
    return MatrixAdapter(host, MatrixSettings.from_mapping(settings), config)


__all__ = ["MatrixAdapter", "MatrixSettings", "create"]
