"""Prompt files: JSONL and ShareGPT parsing, errors that point at file:line, sampling."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tunegate.errors import InputFileError
from tunegate.workload.datasets import load_jsonl, load_sharegpt, sample_entries


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_reads_prompts_and_optional_output_lengths(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.jsonl",
        '{"prompt": "a", "max_tokens": 5}\n'
        "\n"
        '   \n{"prompt": "b", "output_tokens": 7, "extra": true}\n'
        '{"prompt": "c"}\n',
    )
    dataset = load_jsonl(path)
    assert [(e.prompt, e.output_tokens) for e in dataset.entries] == [
        ("a", 5),
        ("b", 7),
        ("c", None),
    ]
    assert [e.origin for e in dataset.entries] == [f"{path}:1", f"{path}:4", f"{path}:5"]
    assert len(dataset.sha256) == 64


@pytest.mark.parametrize(
    ("lines", "bad_line", "expected"),
    [
        (['{"prompt": "ok"}', '{"prompt": "x",}'], 2, "invalid JSON"),
        (['{"prompt": "ok"}', "", '["a list"]'], 3, "expected a JSON object"),
        (['{"max_tokens": 3}'], 1, "field 'prompt' must be a non-empty string, got missing"),
        (['{"prompt": "  "}'], 1, "field 'prompt' must be a non-empty string, got '  '"),
        (['{"prompt": 12}'], 1, "field 'prompt' must be a non-empty string, got 12"),
        (['{"prompt": "a", "max_tokens": 0}'], 1, "field 'max_tokens' must be an integer >= 1"),
        (['{"prompt": "a", "max_tokens": "9"}'], 1, "field 'max_tokens' must be an integer"),
        (['{"prompt": "a", "output_tokens": true}'], 1, "field 'output_tokens' must be"),
        (['{"prompt": "a", "max_tokens": 3, "output_tokens": 4}'], 1, "disagree"),
    ],
)
def test_jsonl_errors_name_file_line_and_field(
    tmp_path: Path, lines: list[str], bad_line: int, expected: str
) -> None:
    path = write(tmp_path / "p.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(InputFileError) as info:
        load_jsonl(path)
    assert str(info.value).startswith(f"{path}:{bad_line}: ")
    assert expected in str(info.value)


def test_jsonl_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such JSONL prompt file"):
        load_jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(InputFileError, match="no prompts"):
        load_jsonl(write(tmp_path / "blank.jsonl", "\n \n"))
    (tmp_path / "latin1.jsonl").write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(InputFileError, match="not UTF-8"):
        load_jsonl(tmp_path / "latin1.jsonl")


def sharegpt_item(*turns: tuple[str, str]) -> dict[str, object]:
    return {"id": "x", "conversations": [{"from": r, "value": v} for r, v in turns]}


def test_sharegpt_takes_first_human_turn_and_the_reply_after_it(tmp_path: Path) -> None:
    items = [
        sharegpt_item(("human", "q1"), ("gpt", "a1"), ("human", "q1b"), ("gpt", "a1b")),
        sharegpt_item(("system", "be nice"), ("user", "q2"), ("assistant", "a2")),
        sharegpt_item(("gpt", "hello"), ("human", "q3"), ("gpt", "a3")),
        {
            "conversations": [
                {"role": "user", "content": "q4"},
                {"role": "assistant", "content": "a4"},
            ]
        },
    ]
    dataset = load_sharegpt(write(tmp_path / "s.json", json.dumps(items)))
    assert [(e.prompt, e.reply) for e in dataset.entries] == [
        ("q1", "a1"),
        ("q2", "a2"),
        ("q3", "a3"),
        ("q4", "a4"),
    ]
    assert dataset.skipped == {}


def test_sharegpt_skips_malformed_entries_and_counts_them(tmp_path: Path) -> None:
    items = [
        sharegpt_item(("human", "ok"), ("gpt", "fine")),
        "not an object",
        {"conversation": []},
        sharegpt_item(("gpt", "only a reply")),
        sharegpt_item(("human", "   "), ("gpt", "reply to nothing")),
        sharegpt_item(("human", "unanswered")),
    ]
    dataset = load_sharegpt(write(tmp_path / "s.json", json.dumps(items)))
    assert [e.prompt for e in dataset.entries] == ["ok"]
    assert dataset.entries[0].origin == f"{tmp_path / 's.json'}#0"
    assert dataset.skipped == {
        "not an object": 1,
        "no 'conversations' list": 1,
        "no human turn with text": 2,
        "no reply after the human turn": 1,
    }


def test_sharegpt_without_usable_entries_explains_the_format(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", json.dumps([{"conversations": []}, 3]))
    with pytest.raises(InputFileError) as info:
        load_sharegpt(path)
    message = str(info.value)
    assert str(path) in message and "no usable ShareGPT entries among 2" in message
    assert "1 no human turn with text" in message and "1 not an object" in message
    assert '"from": "human"' in message


def test_sharegpt_file_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "s.json", '[\n  {"conversations": []},\n  oops\n]')
    with pytest.raises(InputFileError, match="^" + re.escape(f"{path}:3: invalid JSON")):
        load_sharegpt(path)
    with pytest.raises(InputFileError, match="expected a JSON list"):
        load_sharegpt(write(tmp_path / "obj.json", "{}"))


def test_sampling_is_seeded_distinct_and_prefix_stable(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", "".join(f'{{"prompt": "p{i}"}}\n' for i in range(50)))
    dataset = load_jsonl(path)
    first = sample_entries(dataset, 20, np.random.default_rng(3))
    again = sample_entries(dataset, 20, np.random.default_rng(3))
    other = sample_entries(dataset, 20, np.random.default_rng(4))
    more = sample_entries(dataset, 30, np.random.default_rng(3))
    assert first == again != other
    assert len({e.prompt for e in first}) == 20  # without replacement
    assert more[:20] == first  # asking for more only appends


def test_sampling_more_than_the_file_holds_is_an_error(tmp_path: Path) -> None:
    dataset = load_jsonl(write(tmp_path / "p.jsonl", '{"prompt": "a"}\n{"prompt": "b"}\n'))
    with pytest.raises(InputFileError, match="2 usable prompts, but 3 requests"):
        sample_entries(dataset, 3, np.random.default_rng(0))
