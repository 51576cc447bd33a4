"""The results page's step files read by their models: a memory file of another shape
is a line naming the file and the field it lacks."""

from __future__ import annotations

import json
from pathlib import Path

from kvlab.report.results_steps import measured_headline, paged_headline, step_machines


def test_a_memory_file_of_another_shape_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "toy.json").write_text(json.dumps({
        "mode": "formula", "machine": {"cpu": "Xeon", "cores": 2, "load_average": [1.5, 1, 1]},
        "models": [{"shape": {"name": "toy"},
                    "rows": [{"context": 192, "type_k": "f32", "measured_bytes": 10}]}]}))
    line = measured_headline("measured", tmp_path)
    assert line.source == "memory/toy.json"
    assert "lacks what this page reads (bytes: Field required)" in line.text
    assert "step not run" in paged_headline("paged", tmp_path).text
    [machine] = step_machines(tmp_path)
    assert (machine.cpu, machine.cores, machine.one_minute()) == ("Xeon", 2, [1.5])
