"""``model.digest``: what identifies a model's content without reading its weights.

* A GGUF file: its header and metadata (:mod:`.gguf`).
* A model directory in the Hugging Face layout: sha256 over ``config.json``,
  ``generation_config.json`` when present, and the weight index (``*.safetensors.index.json``
  and ``*.bin.index.json``); without an index, over the names and sizes of the weight files
  (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``). Each part is hashed with its name and
  length, so moving bytes between parts changes the digest.
* A simulated model: sha256 over its profile (parameters, layers, widths: what the simulator
  computes with).

Anything else (a hub id with no local copy, a path on another machine) is unknown, with why.
Only regular files are opened (never a FIFO or a device a server's answer might name), each
index or config file at most :data:`MAX_CONFIG_BYTES`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from tunegate.fingerprint.fields import Field, configured, measured, unknown
from tunegate.fingerprint.gguf import GGUFError, gguf_digest
from tunegate.servers.simulator.models import get_model

__all__ = ["MAX_CONFIG_BYTES", "ModelDirError", "directory_digest", "model_digest",
           "simulated_model_digest"]

MAX_CONFIG_BYTES = 64 << 20
"""Largest config or index file hashed (a weight index is tens of kilobytes)."""

_INDEX_PATTERNS = ("*.safetensors.index.json", "*.bin.index.json")
_WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


class ModelDirError(ValueError):
    """The directory is not a model directory tunegate can digest: says why."""


def _part(hasher: hashlib._Hash, name: str, data: bytes) -> None:
    hasher.update(f"{name}\0{len(data)}\0".encode())
    hasher.update(data)


def _read_small(path: Path) -> bytes:
    if not path.is_file():
        raise ModelDirError(f"{path} is not a regular file")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ModelDirError(f"{path} is {size >> 20} MiB, more than a config or index file")
    return path.read_bytes()


def directory_digest(directory: Path | str) -> tuple[str, list[str]]:
    """``(sha256:<hex>, the files it covers)`` for a Hugging Face model directory.

    Raises:
        ModelDirError: No ``config.json``, or no weight index and no weight files.
        OSError: A file cannot be read.
    """
    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise ModelDirError(f"{directory} has no config.json (not a Hugging Face model "
                            "directory)")
    hasher = hashlib.sha256()
    covered = []
    for name in ("config.json", "generation_config.json"):
        if (directory / name).is_file():
            _part(hasher, name, _read_small(directory / name))
            covered.append(name)
    indexes = sorted({p.name for pattern in _INDEX_PATTERNS for p in directory.glob(pattern)})
    for name in indexes:
        _part(hasher, name, _read_small(directory / name))
        covered.append(name)
    if not indexes:
        weights = sorted({p.name for pattern in _WEIGHT_PATTERNS for p in directory.glob(pattern)
                          if p.is_file()})
        if not weights:
            raise ModelDirError(f"{directory} has no weight index and no weight files")
        listing = [[name, (directory / name).stat().st_size] for name in weights]
        _part(hasher, "weight files", json.dumps(listing, separators=(",", ":")).encode())
        covered.append(f"names and sizes of {len(weights)} weight file(s)")
    return f"sha256:{hasher.hexdigest()}", covered


def model_digest(path: Path | str, *, whose: str = "") -> Field:
    """``model.digest`` of a local GGUF file or model directory; never raises.

    Args:
        path: The file or directory.
        whose: Where the path came from, for ``how`` (``"[server] model"``, ``"GET /props"``).
    """
    origin = f" ({whose})" if whose else ""
    try:
        path = Path(path).expanduser()
        if path.is_dir():
            digest, covered = directory_digest(path)
            return measured(digest, f"sha256 of {', '.join(covered)} in {path}{origin}")
        if path.is_file():
            found = gguf_digest(path)
            return measured(found.digest, f"sha256 of the GGUF header and {found.kv_count} "
                            f"metadata key-values of {path}{origin}")
        exists = path.exists()
    except (GGUFError, ModelDirError) as exc:
        return unknown(f"{exc}{origin}")
    except OSError as exc:
        return unknown(f"{path} cannot be read: {exc.strerror or exc}{origin}")
    except (ValueError, RuntimeError) as exc:  # a NUL byte in a path a server named, no $HOME
        return unknown(f"{str(path)!r} is not a usable path ({exc}){origin}")
    if exists:
        return unknown(f"{path} is neither a regular file nor a directory{origin}")
    return unknown(f"{path} is not a file or directory on this machine{origin}")


def simulated_model_digest(model: str) -> Field:
    """``model.digest`` of a simulated model: sha256 of its profile (configured)."""
    try:
        profile = get_model(model)
    except KeyError as exc:
        return unknown(f"the simulator has no model {model!r}: {exc}")
    text = json.dumps(dataclasses.asdict(profile), sort_keys=True, separators=(",", ":"))
    return configured(f"sha256:{hashlib.sha256(text.encode()).hexdigest()}",
                      f"sha256 of the simulated model's parameters ({model})")
