"""kill -9 of a *chained* journal writer at random points: every crash reads as a crash.

The chain's head file is rewritten after every record, so a kill can land between a record and
its head update, inside the head update, or inside a record's write. None of these may look
like tampering: each reopen must succeed (a torn last line repaired, a lagging head brought up
to date), nothing acknowledged may be lost, and the audit ``tunegate replay`` runs must find
no problem. Partial lines are also injected by hand between kills (a power cut mid-line).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tunegate.tuner.journal import Journal, audit_journal, encode_record, read_journal

pytestmark = pytest.mark.integration
KILLS = 40

WRITER = """
import os, random, sys
from tunegate.tuner.journal import Journal
rng = random.Random(os.getpid())
with Journal.open(sys.argv[1], chained=True) as journal:
    i = journal.records[-1].data["i"] + 1 if journal.records else 0
    while True:
        seq = journal.append("measurement", {"i": i, "pad": "x" * rng.randrange(0, 3000)})
        sys.stdout.write(f"{seq} {i}\\n")
        sys.stdout.flush()
        i += 1
"""


def test_kill_9_of_a_chained_writer_is_never_taken_for_tampering(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    rng = random.Random(13)
    acknowledged: dict[int, int] = {}
    torn_seen = injected = 0
    for round_ in range(KILLS):
        if round_ % 5 == 4 and path.exists():  # a power cut mid-line, on top of the kills
            replay = read_journal(path)
            prev = replay.hashes[-1] if replay.hashes else None
            line = encode_record(len(replay.records) + 1, 0, "measurement", {"i": -1},
                                 prev=prev)
            with path.open("ab") as handle:
                handle.write(line[: rng.randrange(1, len(line) - 1)])
            injected += 1
            audit = audit_journal(path)
            assert audit.torn is not None and audit.problems == (), audit.problems
            torn_seen += 1
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        first = writer.stdout.readline()  # at least one append acknowledged
        time.sleep(rng.uniform(0.0, 0.03))
        writer.send_signal(signal.SIGKILL)
        out = first + writer.communicate()[0]
        acknowledged.update((int(s), int(i)) for s, i in (ln.split() for ln in out.splitlines()
                                                        if ln.strip()))
        audit = audit_journal(path)  # what replay sees of a crashed run: no tampering
        assert audit.problems == (), f"round {round_}: {audit.problems}"
        torn_seen += audit.torn is not None
        with Journal.open(path) as journal:  # recovery, as a resumed run does it
            records = journal.records
        assert [r.data["i"] for r in records] == list(range(len(records)))
        by_seq = {r.seq: r.data["i"] for r in records}
        lost = {seq: i for seq, i in acknowledged.items() if by_seq.get(seq) != i}
        assert not lost, f"round {round_}: acknowledged but missing {sorted(lost)[:5]}"
    assert audit_journal(path).problems == () and len(acknowledged) > KILLS
    print(f"{KILLS} kills, {len(records)} records, {len(acknowledged)} acknowledged, 0 lost; "
          f"{injected} partial lines injected; {torn_seen} torn tails seen, none as tampering")
