# SPDX-License-Identifier: GPL-2.0
"""torch.distributed's ``rbln`` backend: two ranks, each on its own card of
one VM (dist_worker.py runs the checks, one process per rank; these tests
assert on what each rank reported)."""

import json
import os
import socket
import subprocess
import sys

import pytest
import torch.distributed as dist
import torch_rbln

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 2


def test_import_registers_the_rbln_backend():
    assert dist.Backend.RBLN == "RBLN"
    assert "RBLN" in dist.Backend._plugins
    assert dist.Backend("rbln") == "rbln"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(mode, world=WORLD, timeout=600):
    """Runs dist_worker.py as ``world`` ranks on 127.0.0.1; returns each
    rank's report (failing with every rank's stderr)."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port, RBLN_DIST_CARD=str(rank), PYTHONDONTWRITEBYTECODE="1")
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "dist_worker.py"), mode],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    reports, errors = [], []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            errors.append(f"rank {rank}: timed out after {timeout}s\n{err[-2000:]}")
            continue
        if p.returncode != 0:
            errors.append(f"rank {rank}: exit {p.returncode}\n{err[-3000:]}")
            continue
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert not errors, "\n".join(errors)
    return reports


@pytest.fixture(scope="module")
def ranks():
    if torch_rbln.device_count() < WORLD:
        pytest.skip(f"needs {WORLD} rbln devices")
    return run_ranks("test")


CHECKS = ([f"all_reduce_{op}_{dt}" for op in ("sum", "avg", "max", "min")
           for dt in ("float32", "float16", "bfloat16")]
          + ["all_reduce_int64_sum", "broadcast", "all_gather", "reduce_scatter", "barrier",
             "errors", "ddp"])


@pytest.mark.card
@pytest.mark.parametrize("check", CHECKS)
def test_two_ranks_on_two_cards(ranks, check):
    """Each rank's result of one collective (or of DDP) on its own card."""
    assert [r["card"] for r in ranks] == list(range(WORLD))
    assert all(r["backend"] == "rbln" or r["backend"] == "RBLN" for r in ranks)
    for r in ranks:
        assert r["results"][check] == "ok", f"rank {r['rank']}:\n{r['results'][check]}"


@pytest.mark.card
def test_ddp_matches_one_process_on_the_combined_batch(ranks):
    for r in ranks:
        assert r["results"]["ddp"] == "ok", r["results"]["ddp"]
        assert r["ddp_max_diff"] <= 2e-5 and r["half_batch_diff"] > 1e-3, r
        assert r["ddp_backend_name"] == "rbln", r
