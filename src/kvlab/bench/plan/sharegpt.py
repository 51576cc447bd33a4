"""The ``sharegpt`` dataset kind: conversations in ShareGPT's layout, one row per turn.

A file is a JSON array (or JSONL) of conversations::

    {"id": "c1", "conversations": [{"from": "human", "value": "..."},
                                   {"from": "gpt", "value": "..."}, ...]}

(``role``/``content`` keys and the roles ``user``/``assistant`` are read too; ``system``
turns are skipped). Each conversation gives:

- ``turns = 1`` (the default): one row, its first human turn as the prompt; the token
  count of the answer that follows is the row's output length (at least
  ``min_output_tokens``, 2 by default since ITL needs two tokens; at most
  ``max_output_tokens``). The answer is counted by the run's token counter: with the
  server's ``/tokenize`` or a tokenizer file that is the answer's own text; with
  calibration on ``usage`` it includes what the server adds to every request (a chat
  template), a few tokens more.
- ``turns = k``: up to k rows, turn ``j`` sending the earlier turns and their answers,
  then its own question, joined by blank lines (``h1 + "\\n\\n" + a1 + "\\n\\n" + h2``);
  its output length is the token count of answer ``j``. The earlier answers are the
  file's, not what the server generated, so every mode gets the same prompts, and
  each turn's prompt starts with the previous turn's whole prompt: a server that keeps
  its prefix cache (``cache_prompt = true``) answers that part from it. Row ids are
  ``<conversation>.t<j>``; the report checks that the server-counted prompt tokens grow
  from turn to turn as counted when the prompts were sized. Turns follow one another
  in a sequential load; under concurrency or a rate, turn ``j`` may leave before turn
  ``j − 1`` returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from kvlab.bench.plan.dataset import FileDatasetSettings, WorkloadFacts
from kvlab.bench.plan.rows import FileRow, read_json_array, unique_ids
from kvlab.bench.plan.textrows import OutputBounds, TextRow, TextRows

HUMAN = ("human", "user")
SKIPPED = ("system",)


class ShareGptDataset(FileDatasetSettings):
    """``[workload.dataset] kind = "sharegpt"``: ``rows`` is the number of conversations
    read (the first N; default all)."""

    kind: Literal["sharegpt"] = "sharegpt"
    turns: int = Field(default=1, ge=1)  # rows per conversation (turns sent)
    min_output_tokens: int = Field(default=2, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _bounds(self) -> ShareGptDataset:
        if self.max_output_tokens is not None and self.max_output_tokens < self.min_output_tokens:
            raise ValueError("max_output_tokens is below min_output_tokens")
        return self

    def build(self, workload: WorkloadFacts) -> TextRows:
        rows: list[TextRow] = []
        ids: list[tuple[str, FileRow]] = []
        for item in read_json_array(Path(self.path))[:self.rows]:
            found = conversation_rows(item, self.turns)
            rows += found
            ids += [(r.id, item) for r in found]
        unique_ids(ids)
        return TextRows(rows, OutputBounds(self.min_output_tokens, self.max_output_tokens))

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, for the reports (``prompt_fraction`` does not
        apply)."""
        turns = ("the first human turn of each conversation" if self.turns == 1 else
                 f"up to {self.turns} turns of each conversation, each sending the earlier "
                 "turns and the file's answers")
        return (f"Prompts = {turns} of {self.path}, sent as written; each row's output "
                "length is the token count of the answer that follows it. The same prompts "
                "for every mode at a capacity.")


def _turns(row: FileRow) -> list[tuple[bool, str]]:
    """(is it a human turn, text) of each turn, system turns left out."""
    turns = row.data.get("conversations", row.data.get("messages"))
    if not isinstance(turns, list):
        raise row.error("no prompt: the conversation has no 'conversations' list")
    out = []
    for turn in turns:
        if not isinstance(turn, dict):
            raise row.error("a turn is not an object with 'from' and 'value'")
        role = str(turn.get("from", turn.get("role", ""))).lower()
        text: Any = turn.get("value", turn.get("content"))
        if role in SKIPPED:
            continue
        out.append((role in HUMAN, text if isinstance(text, str) else ""))
    return out


def conversation_rows(row: FileRow, turns: int) -> list[TextRow]:
    """The rows of one conversation (see the module doc); ConfigError (``file:line``) when
    it opens without a human turn, or its first turn has no answer."""
    conversation = str(row.data.get("id") or f"line{row.line}")
    said = _turns(row)
    if not said or not said[0][0] or not said[0][1].strip():
        raise row.error(f"no prompt: conversation {conversation} does not open with a "
                        "human turn")
    rows: list[TextRow] = []
    history: list[str] = []
    for j in range(turns):
        pair = said[2 * j:2 * j + 2]
        if len(pair) < 2 or not pair[0][0] or pair[1][0] or not pair[0][1].strip():
            break
        question, answer = pair[0][1], pair[1][1]
        history.append(question)
        row_id = conversation if turns == 1 else f"{conversation}.t{j + 1}"
        rows.append(TextRow(row_id, "\n\n".join(history), row.where, answer=answer,
                            conversation=conversation if turns > 1 else None,
                            turn=j + 1 if turns > 1 else None))
        history.append(answer)
    if not rows:
        raise row.error(f"conversation {conversation}: its first human turn has no answer "
                        "(the answer's token length is the row's output length)")
    return rows
