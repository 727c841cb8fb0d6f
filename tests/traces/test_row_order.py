"""Row order: the importers of sources that promise none (Nsight Systems 2025.6 orders no table
of its export, not even by time; rocpd's SQL rows come in storage order) sort what they need,
so a file whose rows are shuffled gives the same span table and the same figures."""

from __future__ import annotations

import random
import shutil
import sqlite3

import pandas as pd
import pytest

from workbench.traces import analysis, load, overlap
from tests.support.paths import DATA, ROOT

FILES = [DATA / "two_streams_gpu0" / "nsys_small.sqlite", DATA / "nsys_2x" / "nsys_schema2_synthetic.sqlite",
         ROOT / "traces" / "examples" / "nsys_small_synthetic.sqlite", DATA / "two_ranks_training_step" / "rank0.db"]


def shuffled_copy(src, dst, seed: int):
    """A copy of a SQLite file with the rows of every table stored in a random order."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    rng = random.Random(seed)
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
        rng.shuffle(rows)
        con.execute(f'DELETE FROM "{table}"')
        if rows:
            con.executemany(f'INSERT INTO "{table}" VALUES ({",".join("?" * len(rows[0]))})', rows)
    con.commit()
    con.close()
    return dst


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """The table with categoricals as text (their category order follows first appearance)."""
    out = df.drop(columns=["args"]).copy()
    for c in ("source", "process", "name", "category", "kind"):
        out[c] = out[c].astype(str)
    out["track"] = out["track"].astype(str)
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("seed", [1, 2])
def test_shuffled_rows_give_the_same_table(path, seed, tmp_path):
    a, meta_a = load(path)
    b, meta_b = load(shuffled_copy(path, tmp_path / f"shuffled{path.suffix}", seed))
    assert list(b["track"].cat.categories) == list(a["track"].cat.categories)  # lanes in the same order
    pd.testing.assert_frame_equal(_plain(a), _plain(b))
    assert b["args"].tolist() == a["args"].tolist()
    assert (b["start_ns"].diff().dropna() >= 0).all()  # in time order
    pd.testing.assert_frame_equal(analysis.name_stats(a), analysis.name_stats(b))
    if overlap.has_gpu_work(a):
        pd.testing.assert_frame_equal(overlap.breakdown(a), overlap.breakdown(b))
        pd.testing.assert_frame_equal(overlap.steps(a), overlap.steps(b))
