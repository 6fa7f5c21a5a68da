"""Generate the estimator calibration corpus under fixtures/corpus/ (`python -m tests.corpus`).

The corpus is what the dependency-free token estimator is calibrated and tested on:
English prose, source code, JSON, shell output, logs with hashes, CJK and mixed
Markdown — the kinds of text an agent's prompt is made of. Every text is written here
or generated from these seeds with a fixed-seed PRNG, so the files are reproducible and
free of third-party content. Regenerate with one command and review the diff.
"""

# ruff: noqa: E501, RUF001  (verbatim shell output and CJK punctuation are the point)
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"

PROSE = [
    "The ledger is the only source of truth. Everything the model sees is derived from it, "
    "and anything left out of the prompt leaves a reference behind so that the original bytes "
    "can be restored later. This sounds like bookkeeping, and it is: long-lived agents fail "
    "not because they cannot reason but because they forget what they already decided.",
    "When the operator asked for a migration plan, the agent wrote five steps, ran the first "
    "two, and then waited for approval. Two days later the approval arrived. Without a durable "
    "plan, the agent would have re-read the whole repository; with one, it resumed at step three "
    "and finished before lunch.",
    "Caching changes the economics of long prompts. A prefix that stays byte-identical between "
    "calls costs a fraction of the normal input price, so the order in which sections appear is "
    "not cosmetic: stable material first, volatile material last, and nothing in between that "
    "changes on every turn.",
    "Our hiking group met at the trailhead just after dawn. The forecast promised clear skies, "
    "but the fog sat heavy in the valley until nine. We climbed through birch and then pine, "
    "stopping at the ridge to eat apples and argue about which peak was which.",
    "Bread needs time more than it needs skill. Mix flour, water, salt and a little yeast; "
    "leave it overnight in a cool kitchen; fold it twice in the morning; bake it hot in a "
    "covered pot. The crust crackles as it cools, which is the only applause a baker gets.",
    "Please review the attached proposal by Thursday. I have highlighted the sections on "
    "budget allocation and staffing, which are the two places where I expect disagreement. "
    "If you need more context, the meeting notes from last week are in the shared folder.",
    "Reliability engineering is mostly about making failure boring. A crash should leave the "
    "system in a state that the next start-up recognises and repairs without a human, and the "
    "log should say exactly what happened, where, and what to do next.",
    "The library closes at eight on weekdays and at five on Saturdays. Members may borrow up "
    "to twelve items at a time; overdue items accrue a small fine, which is waived for "
    "children's books. Renewals can be made online or at the front desk.",
]

CODE = [
    '''def fold(state: RuntimeState, record: Record) -> RuntimeState:
    """Apply one record to the runtime state and return the new state."""
    body = record.body
    if isinstance(body, WorkItem):
        items = dict(state.work_items)
        items[body.id] = body
        return msgspec.structs.replace(state, work_items=items, last_seq=record.seq)
    if isinstance(body, ToolResult):
        pending = {k: v for k, v in state.pending_calls.items() if k != body.call_id}
        return msgspec.structs.replace(state, pending_calls=pending, last_seq=record.seq)
    return msgspec.structs.replace(state, last_seq=record.seq)
''',
    """use std::collections::HashMap;

pub struct Index {
    postings: HashMap<String, Vec<(u32, u32)>>,
    lengths: Vec<u32>,
}

impl Index {
    pub fn add(&mut self, doc: u32, text: &str) {
        let mut len = 0;
        for term in text.split_whitespace() {
            let entry = self.postings.entry(term.to_lowercase()).or_default();
            match entry.last_mut() {
                Some((d, tf)) if *d == doc => *tf += 1,
                _ => entry.push((doc, 1)),
            }
            len += 1;
        }
        self.lengths.push(len);
    }
}
""",
    """export async function fetchWithRetry(url, { retries = 3, backoffMs = 250 } = {}) {
  let lastError;
  for (let attempt = 0; attempt <= retries; attempt++) {
    try {
      const response = await fetch(url);
      if (!response.ok) throw new Error(`HTTP ${response.status} for ${url}`);
      return await response.json();
    } catch (err) {
      lastError = err;
      await new Promise((resolve) => setTimeout(resolve, backoffMs * 2 ** attempt));
    }
  }
  throw lastError;
}
""",
    """package ledger

import (
\t"encoding/binary"
\t"errors"
\t"io"
)

var ErrTorn = errors.New("torn frame at end of segment")

func ReadFrame(r io.Reader) ([]byte, error) {
\tvar header [8]byte
\tif _, err := io.ReadFull(r, header[:]); err != nil {
\t\treturn nil, ErrTorn
\t}
\tsize := binary.LittleEndian.Uint32(header[:4])
\tpayload := make([]byte, size)
\tif _, err := io.ReadFull(r, payload); err != nil {
\t\treturn nil, ErrTorn
\t}
\treturn payload, nil
}
""",
    """SELECT w.id, w.objective, COUNT(t.call_id) AS tool_calls,
       SUM(CASE WHEN t.status = 'error' THEN 1 ELSE 0 END) AS failures
FROM work_items AS w
LEFT JOIN tool_results AS t ON t.work_item_id = w.id
WHERE w.state IN ('active', 'waiting')
GROUP BY w.id, w.objective
HAVING COUNT(t.call_id) > 10
ORDER BY failures DESC, w.id;
""",
    """#!/usr/bin/env bash
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for f in "$ROOT"/fixtures/ledgers/*.jsonl; do
  name="$(basename "$f" .jsonl)"
  echo "==> $name"
  holon import "$f" --into "/tmp/holon-$name" --force
  holon verify "/tmp/holon-$name" || { echo "verify failed: $name" >&2; exit 1; }
done
""",
    """class LRUCache<K, V> {
  private map = new Map<K, V>();
  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) {
      this.map.delete(this.map.keys().next().value as K);
    }
  }
}
""",
]

SHELL = [
    """$ git log --oneline -8
a41c9e2 Cut torn tails on open instead of refusing the segment
7d03b11 Blob store: verify blake3 on read
c2f8e90 Checkpoint format v2 with zstd frames
19ab442 Projections: fold waiting intents into working memory
f0e7d35 Render pending delta until confirmed
8b6a2c1 Add hypothesis strategies for agent runs
3e5d9f0 CLI: holon get restores by ref
0c1a7b4 Initial commit
""",
    """$ pytest -q tests/test_ledger_recovery.py
....F...                                                                 [100%]
=================================== FAILURES ===================================
_____________________________ test_torn_tail_is_cut _____________________________

    def test_torn_tail_is_cut(tmp_path):
        ledger = make_ledger(tmp_path, records=40)
        truncate_last_frame(ledger, by=3)
>       assert open_ledger(tmp_path).head_seq == 38
E       AssertionError: assert 39 == 38
E        +  where 39 = <Ledger /tmp/pytest-of-dev/pytest-7/test_torn0>.head_seq

tests/test_ledger_recovery.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_ledger_recovery.py::test_torn_tail_is_cut - AssertionError: assert 39 == 38
1 failed, 7 passed in 0.84s
""",
    """$ ls -la src/
total 96
drwxr-xr-x  6 dev dev  4096 Mar  3 09:12 .
drwxr-xr-x 14 dev dev  4096 Mar  3 09:10 ..
-rw-r--r--  1 dev dev  2301 Mar  3 09:12 __init__.py
-rw-r--r--  1 dev dev 18244 Mar  2 17:40 agent.py
drwxr-xr-x  2 dev dev  4096 Mar  1 11:05 audit
-rw-r--r--  1 dev dev  9102 Mar  2 16:58 cli.py
drwxr-xr-x  3 dev dev  4096 Mar  2 18:20 context
drwxr-xr-x  2 dev dev  4096 Feb 28 14:33 ledger
-rw-r--r--  1 dev dev 21877 Mar  3 08:47 records.py
""",
    """$ cargo build --release
   Compiling holon-index v0.3.1 (/home/dev/holon-index)
error[E0502]: cannot borrow `self.postings` as mutable because it is also borrowed as immutable
  --> src/index.rs:42:17
   |
40 |         let existing = self.postings.get(&term);
   |                        ------------- immutable borrow occurs here
41 |         if existing.is_none() {
42 |             self.postings.insert(term.clone(), Vec::new());
   |             ^^^^^^^^^^^^^ mutable borrow occurs here
43 |         }
44 |         let list = existing.unwrap();
   |                    -------- immutable borrow later used here

error: could not compile `holon-index` (lib) due to 1 previous error
""",
    """$ docker ps
CONTAINER ID   IMAGE                 COMMAND                  CREATED        STATUS        PORTS                    NAMES
3f2a9c1d7e4b   postgres:16-alpine    "docker-entrypoint.s…"   2 hours ago    Up 2 hours    0.0.0.0:5432->5432/tcp   db
9b8e7d6c5a4f   redis:7               "docker-entrypoint.s…"   2 hours ago    Up 2 hours    6379/tcp                 cache
1a2b3c4d5e6f   holon/agent:0.1.0     "holon serve --ledge…"   5 minutes ago  Up 5 minutes                            agent
""",
]

CJK = [
    "长期运行的智能体最常见的问题不是推理能力不足，而是忘记了已经做出的决定。"
    "账本是唯一的事实来源，提示中的所有内容都从账本推导而来。被省略的内容会留下引用，"
    "以便之后逐字节地恢复原文。",
    "今日は朝から雨が降っていましたが、午後には晴れてきました。駅前の本屋で新しい料理の本を買い、"
    "帰りに八百屋で季節の野菜を選びました。夕食はかぼちゃの煮物と味噌汁にするつもりです。",
    "작업 계획은 잘림에서 살아남아야 합니다. 에이전트가 승인을 기다리는 동안에도 계획과 제약 조건은 "
    "매번 프롬프트에 나타나야 하며, 오래된 도구 결과는 참조만 남기고 지워집니다.",
    "缓存前缀必须在两次调用之间保持逐字节一致，否则提供方会重新写入缓存。因此，稳定的系统提示和工具定义放在最前面，"
    "工作记忆和相关片段紧随其后，每轮变化的内容放在最后。",
    "エージェントは計画の第三段階から再開し、昼食前に作業を終えました。承認を待っている間も、"
    "制約条件と作業計画は毎回のプロンプトに表示されていました。",
]

WORDS = [
    *("ledger", "record", "prompt", "budget", "section", "episode", "memory", "working", "delta"),
    *("revision", "epoch", "cache", "token", "estimator", "render", "plan", "step", "tool", "result"),
    *("blob", "restore", "omit", "compact", "truncate", "agent", "operator", "wait", "approval"),
    *("deploy", "branch", "migration", "schema", "index", "query"),
]


def _json_texts(rng: random.Random) -> list[str]:
    out = []
    for n in range(6):
        payload = {
            "id": f"req_{rng.randrange(16**12):012x}",
            "object": "tool_call",
            "created": 1_700_000_000 + rng.randrange(10**6),
            "arguments": {
                "command": " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9))),
                "timeout_ms": rng.randrange(1000, 120_000),
                "paths": [
                    f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.py" for _ in range(rng.randrange(1, 5))
                ],
                "flags": {w: rng.random() < 0.5 for w in rng.sample(WORDS, 4)},
            },
            "usage": {"input_tokens": rng.randrange(10**5), "output_tokens": rng.randrange(10**4)},
            "scores": [round(rng.random(), 4) for _ in range(rng.randrange(2, 8))],
        }
        out.append(json.dumps(payload, indent=2 if n % 2 == 0 else None, ensure_ascii=False) + "\n")
    return out


def _log_texts(rng: random.Random) -> list[str]:
    out = []
    for _ in range(4):
        lines = []
        ts = 1_700_000_000_000 + rng.randrange(10**9)
        for _ in range(rng.randrange(12, 30)):
            ts += rng.randrange(1, 5000)
            level = rng.choice(["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"])
            digest = "".join(rng.choice("0123456789abcdef") for _ in range(rng.choice([12, 40, 64])))
            msg = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 10)))
            lines.append(
                f"{ts} {level:<5} holon.{rng.choice(WORDS)} seq={rng.randrange(10**5)} {msg} h={digest}"
            )
        out.append("\n".join(lines) + "\n")
    return out


def _markdown_texts(rng: random.Random) -> list[str]:
    out = []
    for i in range(3):
        rows = "\n".join(
            f"| {rng.choice(WORDS)} | {rng.randrange(10**4)} | {rng.choice(['ok', 'error', 'n/a'])} |"
            for _ in range(rng.randrange(4, 9))
        )
        out.append(
            f"## Status report {i + 1}\n\n{PROSE[i * 2]}\n\n| item | count | status |\n| --- | --- | --- |\n"
            f"{rows}\n\n- next: `{rng.choice(WORDS)}_{rng.choice(WORDS)}()` in `src/{rng.choice(WORDS)}.py`\n"
            f"- blocked on: {rng.choice(CJK)[:30]}\n"
        )
    return out


def _base64ish(rng: random.Random) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "\n".join("".join(rng.choice(alphabet) for _ in range(76)) for _ in range(8)) + "\n"


def _table_texts(rng: random.Random) -> list[str]:
    """Columns of numbers as tools print them: a process list, a float matrix, a hexdump, disk usage."""
    ps = "USER       PID %CPU %MEM    VSZ   RSS TTY STAT START   TIME COMMAND\n" + "".join(
        f"{rng.choice(['root', 'agent', 'www'])!s:<8} {rng.randrange(1, 40000):>5} {rng.random() * 9:4.1f} "
        f"{rng.random() * 9:4.1f} {rng.randrange(10**3, 10**6):>6} {rng.randrange(100, 90000):>5} ?   "
        f"Ss   {rng.randrange(10, 24)}:{rng.randrange(60):02d}   0:{rng.randrange(60):02d} "
        f"/usr/bin/{rng.choice(WORDS)}\n"
        for _ in range(24)
    )
    matrix = "".join(" ".join(f"{rng.random() * 100:.4f}" for _ in range(8)) + "\n" for _ in range(20))
    hexdump = "".join(
        f"{i * 16:08x}  " + " ".join(f"{rng.randrange(256):02x}" for _ in range(16)) + "\n" for i in range(16)
    )
    du = "".join(
        f"{rng.randrange(1, 10**6)}\t{rng.randrange(1, 10**4)} {rng.randrange(100)} ./{rng.choice(WORDS)}\n"
        for _ in range(30)
    )
    return [ps, matrix, hexdump, du]


def corpus() -> dict[str, str]:
    """Every calibration text by file name, in a fixed order."""
    rng = random.Random(20240601)
    texts: dict[str, str] = {}
    for i, t in enumerate(PROSE):
        texts[f"prose-{i:02d}.txt"] = t + "\n"
    texts["prose-long.txt"] = "\n\n".join(PROSE) + "\n"
    for i, t in enumerate(CODE):
        texts[f"code-{i:02d}.txt"] = t
    for i, t in enumerate(SHELL):
        texts[f"shell-{i:02d}.txt"] = t
    for i, t in enumerate(CJK):
        texts[f"cjk-{i:02d}.txt"] = t + "\n"
    for i, t in enumerate(_json_texts(rng)):
        texts[f"json-{i:02d}.txt"] = t
    for i, t in enumerate(_log_texts(rng)):
        texts[f"log-{i:02d}.txt"] = t
    for i, t in enumerate(_markdown_texts(rng)):
        texts[f"markdown-{i:02d}.txt"] = t
    texts["base64-00.txt"] = _base64ish(rng)
    texts["mixed-00.txt"] = CODE[0] + "\n" + SHELL[1] + "\n" + CJK[0] + "\n" + PROSE[2] + "\n"
    # Generated from their own seed, so adding them left every text above unchanged.
    for i, t in enumerate(_table_texts(random.Random(20261122))):
        texts[f"table-{i:02d}.txt"] = t
    return texts


def main() -> int:
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    texts = corpus()
    for old in CORPUS_DIR.glob("*.txt"):
        if old.name not in texts:
            old.unlink()
    for name, text in texts.items():
        (CORPUS_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(texts)} texts to {CORPUS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
