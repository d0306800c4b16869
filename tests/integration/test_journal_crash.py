"""kill -9 of a journal writer at random points, re-opened after each: nothing acknowledged is
lost, nothing is written twice, seqs stay contiguous.

The writer (:data:`WRITER`) resumes its count from the journal and appends records forever,
printing ``seq i`` after each ``append`` has returned: the acknowledgement the parent counts on.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunegate.tuner.journal import Journal, encode_record, read_journal

pytestmark = pytest.mark.integration
KILLS = 50


WRITER = """
import os, random, sys
from tunegate.tuner.journal import Journal
rng = random.Random(os.getpid())
with Journal.open(sys.argv[1]) as journal:
    i = journal.records[-1].data["i"] + 1 if journal.records else 0
    while True:
        seq = journal.append("measurement", {"i": i, "pad": "x" * rng.randrange(0, 3000)})
        sys.stdout.write(f"{seq} {i}\\n")
        sys.stdout.flush()
        i += 1
"""


def test_kill_9_at_random_points_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    rng = random.Random(6)
    acknowledged: dict[int, int] = {}
    injected = torn_seen = killed_after_ack = 0
    for round_ in range(KILLS):
        if round_ % 6 == 5:  # a power cut mid-line, on top of the kills: a partial record
            replay = read_journal(path)
            line = encode_record(len(replay.records) + 1, 0, "measurement", {"i": -1})
            with path.open("ab") as handle:
                handle.write(line[: rng.randrange(1, len(line) - 1)])
            injected += 1
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        if round_ % 5 == 4:  # anywhere in start-up, recovery and the first appends
            time.sleep(rng.uniform(0.0, 0.15))
            first = ""
        else:  # in the stream of appends
            first = writer.stdout.readline()
            time.sleep(rng.uniform(0.0, 0.03))
        writer.send_signal(signal.SIGKILL)
        out = first + writer.communicate()[0]
        pairs = [line.split() for line in out.splitlines() if line.strip()]
        acks = [(int(seq), int(i)) for seq, i in pairs]
        killed_after_ack += bool(acks)
        acknowledged.update(acks)
        with Journal.open(path) as journal:  # recovery, as a resumed run does it (drops i=-1)
            torn_seen += journal.torn is not None
            records = journal.records
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        values = [r.data["i"] for r in records]
        assert values == list(range(len(values))), "a record lost or written twice"
        by_seq = {r.seq: r.data["i"] for r in records}
        lost = {seq: i for seq, i in acknowledged.items() if by_seq.get(seq) != i}
        assert not lost, f"round {round_}: acknowledged but missing {sorted(lost)[:5]}"
    assert len(acknowledged) > KILLS and killed_after_ack >= KILLS // 2
    print(f"{KILLS} kills ({killed_after_ack} after at least one ack), {len(records)} records, "
          f"{len(acknowledged)} acknowledged, 0 lost, 0 duplicated; {injected} partial lines "
          f"injected, {torn_seen} torn tails left for the parent's recovery")

