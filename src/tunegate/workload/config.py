"""``WorkloadConfig``: the validated description of a workload, and readable pydantic errors.

Length distributions are written in the CLI syntax of :mod:`tunegate.workload.lengths`
(``"lognormal:63,0.4,min=15,max=200"``) in config files and serialise back to it, so
``WorkloadConfig.model_validate(config.model_dump(mode="json"))`` rebuilds the same config.

Arrival rules: ``concurrency`` alone is a closed loop; ``request_rate`` alone is open loop;
both together are open loop at ``request_rate`` capped at ``concurrency`` requests in flight.
A preset (``dataset="seed"``) fills ``num_requests`` and, when neither is given,
``concurrency`` from its defaults; other datasets need one of the two.

Absurd sizes are refused with the limit and its reason, before anything is built or sent
(``num_requests 999999999999`` once tried to allocate 7 TiB):

* ``num_requests`` and ``num_warmup``, together at most :data:`MAX_REQUESTS` (1,000,000): a
  bench holds a 131-byte row per request on disk and reads it back a column at a time, but
  ``bench --report`` and the tuner's measurements keep every request's record in memory, about
  7 KB at 128 output tokens (measured), so 7 GB at the limit;
* ``concurrency`` at most :data:`MAX_CONCURRENCY` (65,536): each request in flight holds its
  own TCP connection, and a client has at most 65,535 ports to one server;
* a finite ``request_rate`` within [:data:`MIN_REQUEST_RATE`, :data:`MAX_REQUEST_RATE`]
  (0.001 to 1,000,000 per second): slower, the run mostly waits (the first request alone
  about 1000 s); faster, the gaps are shorter than sending one request takes, so ``inf``
  says what is meant;
* prompt and output lengths, and ``shared_prefix_tokens``, at most ``lengths.MAX_LENGTH``
  (1,048,576 tokens, see there): synthetic prompts are built on demand, a block at a time, so
  this bounds what one of them holds; the shared prefixes, kept for the whole run, total at
  most ``builder.MAX_PROMPT_TOKENS`` (checked when the workload is built).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_serializer,
    field_validator,
    model_validator,
)

from tunegate.errors import ConfigError
from tunegate.workload.lengths import MAX_LENGTH, LengthDistribution, parse_length_distribution
from tunegate.workload.presets import PRESETS

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_REQUESTS",
    "MAX_REQUEST_RATE",
    "MIN_REQUEST_RATE",
    "LengthField",
    "WorkloadConfig",
    "format_validation_error",
]

MAX_REQUESTS = 1_000_000
"""Most requests (measured and warm-up together) in one workload."""
MAX_CONCURRENCY = 65_536
"""Most requests in flight at once."""
MIN_REQUEST_RATE = 0.001
"""Slowest finite open-loop rate, requests per second."""
MAX_REQUEST_RATE = 1_000_000.0
"""Fastest finite open-loop rate, requests per second (``inf`` is allowed and means at once)."""


def _to_distribution(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        try:
            return parse_length_distribution(value, option="length distribution")
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("length distribution: ")) from None
    return value


LengthField = Annotated[
    LengthDistribution,
    BeforeValidator(_to_distribution),
    PlainSerializer(lambda d: d.spec, return_type=str),
]
"""A length distribution given as CLI text (or an int, or an instance); dumps as its spec."""


class WorkloadConfig(BaseModel):
    """Everything that determines a workload; with the same values the workload is identical.

    Attributes:
        dataset: ``synthetic`` (drawn lengths), ``seed`` (the article's preset), ``jsonl`` or
            ``sharegpt`` (prompts from ``dataset_path``).
        dataset_path: The prompt file; required for ``jsonl``/``sharegpt`` only.
        num_requests: Measured requests (a preset supplies its own default).
        num_warmup: Extra requests sent first, flagged ``warmup=True``, excluded from stats.
        input_tokens: Prompt length distribution; ``synthetic`` only (required there).
        output_tokens: ``max_tokens`` distribution; required for ``synthetic``; for ``jsonl`` it
            fills lines without ``max_tokens``; for ``sharegpt`` it overrides the reply length.
        seed: Seed of every random choice (``>= 0``).
        concurrency: Closed-loop concurrency, or the in-flight cap of an open-loop schedule.
        request_rate: Open-loop requests per second (``inf`` = all at once).
        burstiness: Gamma shape for ``arrival="gamma"``.
        arrival: Inter-arrival distribution for open loop.
        tokenizer: ``tokenizer.json`` path or ``tiktoken:ENCODING`` for exact token counts.
        shared_prefix_tokens: Length of a fixed, seeded prefix prepended to every prompt
            (``synthetic`` only; 0 = none), so prefix caching has something to reuse. Tokens with
            a tokenizer, words without. It comes on top of ``input_tokens``, which stays the
            length of each prompt's unique part (prompts stay unique), as in vLLM's
            ``--random-prefix-len``.
        num_prefixes: Distinct shared prefixes; each request draws one (seeded, uniform).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    dataset: Literal["synthetic", "seed", "jsonl", "sharegpt"] = "synthetic"
    dataset_path: Path | None = None
    num_requests: int = Field(ge=1)
    num_warmup: int = Field(default=0, ge=0)
    input_tokens: LengthField | None = None
    output_tokens: LengthField | None = None
    seed: int = Field(default=0, ge=0)
    concurrency: int | None = Field(default=None, ge=1)
    request_rate: float | None = Field(default=None, gt=0)
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    tokenizer: str | None = None
    shared_prefix_tokens: int = Field(default=0, ge=0)
    num_prefixes: int = Field(default=1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("dataset") in PRESETS:
            preset = PRESETS[data["dataset"]]
            data = dict(data)
            if data.get("num_requests") is None:
                data["num_requests"] = preset.num_requests
            if data.get("concurrency") is None and data.get("request_rate") is None:
                data["concurrency"] = preset.concurrency
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> WorkloadConfig:
        file_based = self.dataset in ("jsonl", "sharegpt")
        if file_based and self.dataset_path is None:
            raise ValueError(f"dataset_path is required with dataset={self.dataset!r}")
        if not file_based and self.dataset_path is not None:
            raise ValueError(
                f"dataset_path is only used with dataset='jsonl' or 'sharegpt', "
                f"not {self.dataset!r}; remove it or change dataset"
            )
        if self.dataset == "synthetic":
            for name in ("input_tokens", "output_tokens"):
                if getattr(self, name) is None:
                    raise ValueError(
                        f"{name} is required with dataset='synthetic' "
                        "(e.g. 'fixed:512' or 'lognormal:512,0.5')"
                    )
        elif self.input_tokens is not None:
            raise ValueError(
                f"input_tokens is only used with dataset='synthetic'; dataset={self.dataset!r} "
                "sets the prompts itself"
            )
        if self.dataset in PRESETS and self.output_tokens is not None:
            raise ValueError(
                f"output_tokens cannot change preset {self.dataset!r}; use dataset='synthetic' "
                "to choose lengths"
            )
        if self.shared_prefix_tokens and self.dataset != "synthetic":
            raise ValueError(
                f"shared_prefix_tokens only applies to dataset='synthetic', not "
                f"{self.dataset!r}; remove it or change dataset"
            )
        if self.num_prefixes > 1 and not self.shared_prefix_tokens:
            raise ValueError(
                f"num_prefixes={self.num_prefixes} needs shared_prefix_tokens > 0 (the length of "
                "each shared prefix)"
            )
        if self.concurrency is None and self.request_rate is None:
            raise ValueError("set concurrency (closed loop) or request_rate (open loop)")
        if self.num_requests + self.num_warmup > MAX_REQUESTS:
            raise ValueError(
                f"num_requests + num_warmup = {self.num_requests + self.num_warmup:,} exceeds "
                f"{MAX_REQUESTS:,}: with --report or in a tuning run every request's record "
                "is kept in memory; split the run")
        if self.request_rate is None:
            if self.arrival != "poisson" or self.burstiness != 1.0:
                raise ValueError(
                    f"arrival={self.arrival!r} and burstiness={self.burstiness} apply only to "
                    "open loop; set request_rate too"
                )
        elif self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(
                f"burstiness={self.burstiness} needs arrival='gamma' (arrival={self.arrival!r})"
            )
        return self

    @field_validator("num_requests", "num_warmup", "num_prefixes")
    @classmethod
    def _at_most_max_requests(cls, value: int) -> int:
        if value > MAX_REQUESTS:
            raise ValueError(
                f"at most {MAX_REQUESTS:,}: with --report or in a tuning run every request's "
                "record is kept in memory (about 7 KB each at 128 output tokens, 7 GB at the "
                "limit); split a longer run")
        return value

    @field_validator("concurrency")
    @classmethod
    def _at_most_max_concurrency(cls, value: int | None) -> int | None:
        if value is not None and value > MAX_CONCURRENCY:
            raise ValueError(
                f"at most {MAX_CONCURRENCY:,} requests in flight: each holds its own TCP "
                "connection, and a client has at most 65,535 ports to one server")
        return value

    @field_validator("request_rate")
    @classmethod
    def _sane_rate(cls, value: float | None) -> float | None:
        if value is None or math.isinf(value):
            return value
        if value < MIN_REQUEST_RATE:
            raise ValueError(
                f"at least {MIN_REQUEST_RATE:g} requests/s: slower, the run mostly waits (one "
                f"request every {1 / value:.3g} s on average)")
        if value > MAX_REQUEST_RATE:
            raise ValueError(
                f"at most {MAX_REQUEST_RATE:,.0f} requests/s: the gaps would be shorter than "
                "sending one request takes; use inf to send every request at once")
        return value

    @field_validator("shared_prefix_tokens")
    @classmethod
    def _prefix_at_most_max_length(cls, value: int) -> int:
        if value > MAX_LENGTH:
            raise ValueError(
                f"at most {MAX_LENGTH:,} tokens per request: no served model reads more in "
                "one request")
        return value

    @field_serializer("request_rate")
    def _rate_as_text_when_infinite(self, rate: float | None) -> float | str | None:
        return "inf" if rate is not None and math.isinf(rate) else rate

    @field_serializer("dataset_path")
    def _path_as_text(self, path: Path | None) -> str | None:
        return None if path is None else str(path)


_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^:/@\s]*:)[^\s/]*(?=@)")
"""``scheme://user:`` then the password, up to the *last* ``@`` before the path (a password
may hold ``@``)."""
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|passwd|pwd)=)[^&\s'\"]*", re.I)


def _shown(value: Any, limit: int = 80) -> str:
    """The offending value as an error message quotes it: shortened, and a password in a
    URL (``scheme://user:secret@host``) masked, since error lines end up in logs.

    Example:
        >>> _shown("postgresql://tuner:s3cret@db/tunegate")
        "'postgresql://tuner:***@db/tunegate'"
        >>> _shown("postgresql://tuner:p@ss@db/tunegate?password=s3cret")
        "'postgresql://tuner:***@db/tunegate?password=***'"
    """
    text = _URL_PASSWORD.sub(r"\g<head>***", repr(value))
    text = _QUERY_PASSWORD.sub(r"\g<head>***", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_validation_error(exc: pydantic.ValidationError, *, source: str) -> str:
    """Turn a pydantic error into one line per problem, naming the field and the value.

    Args:
        exc: The error from validating a :class:`WorkloadConfig` (or any model).
        source: Where the values came from (``"workload.toml"``, ``"command line"``).

    Returns:
        Lines like ``"workload.toml: seed: Input should be greater than or equal to 0
        (got -1)"``; problems spanning several fields start with ``"workload.toml: "``.

    Example:
        >>> try:
        ...     WorkloadConfig(num_requests=0, input_tokens=8, output_tokens=8, concurrency=1)
        ... except pydantic.ValidationError as e:
        ...     print(format_validation_error(e, source="cli"))
        cli: num_requests: Input should be greater than or equal to 1 (got 0)
    """
    lines = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        where = f"{source}: {field}: " if field else f"{source}: "
        secret = "env" in error["loc"]  # environment values carry tokens: never echoed
        shown = (
            "" if not field or error["type"] == "missing" or secret
            else f" (got {_shown(error['input'])})"
        )
        lines.append(f"{where}{message}{shown}")
    return "\n".join(lines)
