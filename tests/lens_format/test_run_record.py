"""`lens/run.json` (lens_format/run_record.py): the writing process and its rank, read back; bad files rejected."""
import json

import pytest

from lens_format.errors import ParseError, UnsupportedVersionError
from lens_format.run_record import RunRecord, read_run_record


def test_a_rank_record_reads_back_and_names_its_rank(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(RunRecord(123, 1, 2, "gloo").to_json()))
    record = read_run_record(path)
    assert (record.pid, record.rank, record.world_size, record.backend) == (123, 1, 2, "gloo")
    assert record.rank_label() == "rank 1 of 2"


def test_a_process_outside_a_group_has_no_rank_label(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(RunRecord(7).to_json()))
    record = read_run_record(path)
    assert record.rank is None and record.rank_label() == ""


@pytest.mark.parametrize("text, error", [("{", ParseError), ("[]", ParseError),
                                         ('{"version": 2, "pid": 1}', UnsupportedVersionError)])
def test_bad_files_are_rejected_naming_the_file(tmp_path, text, error):
    path = tmp_path / "run.json"
    path.write_text(text)
    with pytest.raises(error, match="run.json"):
        read_run_record(path)
