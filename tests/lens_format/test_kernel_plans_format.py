"""kernel_plans.json's record (lens_format/kernel_plans.py): what is written reads back the same, and a reader
skips malformed kernels and decisions instead of failing."""
import json

import pytest

from lens_format.errors import UnsupportedVersionError
from lens_format.kernel_plans import VERSION, KernelPlanRecord, KernelPlansFile, PlanDecision, read_kernel_plans


def test_a_file_reads_back_as_written(tmp_path):
    plan = KernelPlanRecord("cpp_fused__softmax_0", "nest", ("8192",), True, ("buf3",), "buf1", "buf3", True,
                            ("4096*s77 >= 16777216",),
                            (PlanDecision("streaming", "buf3", "streamed", "an unread graph output"),))
    doc = KernelPlansFile("graph_0", [plan]).to_json()
    assert doc["version"] == VERSION and doc["kernels"][0]["decisions"][0]["pass"] == "streaming"
    (tmp_path / "kernel_plans.json").write_text(json.dumps(doc))
    back = read_kernel_plans(tmp_path / "kernel_plans.json")
    assert back == KernelPlansFile("graph_0", [plan]) and back.plans_of("cpp_fused__softmax_0") == [plan]


def test_malformed_kernels_and_decisions_are_skipped_and_a_newer_major_version_is_refused(tmp_path):
    doc = {"version": 1, "graph_id": "graph_1",
           "kernels": [{"strategy": "nest"}, "nonsense",
                       {"kernel": "k", "strategy": 3, "decisions": [{"choice": "x"}, {"pass": "threads", "choice": "one thread"}]}]}
    (tmp_path / "kernel_plans.json").write_text(json.dumps(doc))
    (k,) = read_kernel_plans(tmp_path / "kernel_plans.json").kernels
    assert k.kernel == "k" and k.strategy == "" and k.decisions == (PlanDecision("threads", "", "one thread", ""),)
    (tmp_path / "kernel_plans.json").write_text(json.dumps({**doc, "version": 2}))
    with pytest.raises(UnsupportedVersionError):
        read_kernel_plans(tmp_path / "kernel_plans.json")
