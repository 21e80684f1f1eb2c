"""The doctor names the atlas entry of the upstream bug a finding or a torch path condition
matches; every id it can name is an entry of cases/atlas.toml (read here with tomllib)."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.doctor.atlas_refs import CONDITIONS
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.findings import Code
from ctcbench.doctor.torch_path import PATH_ATLAS

ATLAS = tomllib.loads((Path(__file__).parents[2] / "cases" / "atlas.toml").read_text())
ENTRIES = {e["id"]: e for e in ATLAS["entry"]}


def test_every_id_the_doctor_can_name_is_in_the_atlas():
    named = {i for code in Code for i in code.atlas} | set(CONDITIONS.values()) | {
        i for ids in PATH_ATLAS.values() for i in ids}
    assert named and named <= set(ENTRIES), sorted(named - set(ENTRIES))


def test_target_length_256_on_cuda_names_the_cudnn_entry(tmp_path):
    """--device cuda on a batch with a 256-label target: the failing condition names the
    atlas entry of pytorch#53505 and its URL, in the table and in the JSON."""
    T, N, C, L = 300, 2, 6, 256
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(T, N, C)).astype(np.float32)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    targets = rng.integers(1, C, size=N * L).astype(np.int32)
    np.savez(tmp_path / "b.npz", log_probs=log_probs, targets=targets,
             input_lengths=np.full(N, T, np.int32), target_lengths=np.full(N, L, np.int32))
    table = CliRunner().invoke(cli, ["doctor", str(tmp_path / "b.npz"), "--device", "cuda"])
    out = CliRunner().invoke(cli, ["doctor", str(tmp_path / "b.npz"), "--device", "cuda",
                                   "--format", "json"]).output
    cond = {c["name"]: c for c in json.loads(out)["torch_path"]["conditions"]}["target lengths"]
    assert not cond["holds"]
    entry = ENTRIES[cond["atlas"]]
    assert entry["url"].endswith("/pytorch/pytorch/issues/53505")
    assert cond["atlas"] in cond["fix"] and entry["url"] in cond["fix"]
    assert cond["atlas"] in table.output and entry["url"] in table.output


def test_target_length_255_names_no_entry_in_the_fix():
    T, N, C, L = 300, 1, 6, 255
    lp = np.log(np.full((T, N, C), 1 / C, np.float32))
    from ctcbench.doctor.torch_path import torch_path
    report = torch_path(lp, targets=np.ones(L, np.int32), input_lengths=np.full(N, T, np.int32),
                        target_lengths=np.full(N, L, np.int32), device="cuda")
    assert report.path == "cudnn" and all("atlas entry" not in c.fix for c in report.conditions)
    assert "torch-cudnn-target-length-256" in report.atlas


def test_infeasible_target_finding_names_the_torch_nan_gradient_entry():
    lp = np.log(np.full((3, 1, 5), 0.2))
    report = diagnose(lp, targets=np.array([[1, 1, 1]]), input_lengths=np.array([3]),
                      target_lengths=np.array([3]))
    finding = next(f for f in report.findings if f.code == "infeasible-target")
    assert "torch-nan-gradient-of-infinite-loss" in finding.evidence["atlas"]
    assert set(finding.evidence["atlas"]) <= set(ENTRIES)
    assert ENTRIES["torch-nan-gradient-of-infinite-loss"]["url"] in finding.fix
