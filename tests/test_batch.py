"""check_batch (dryz/check.py): a batch's classes are check()'s classes of its cases, row by row."""

import numpy as np

from dryz.case import Case
from dryz.check import AGREE, MISMATCH, check, check_batch
from dryz.config import case_config


class _Given:
    """A subject whose run() returns a given output (check() then judges it as the library's)."""

    def __init__(self, output):
        self.abi, self.output = 7, output

    def run(self, case):
        return self.output


def test_a_sorted_flag_alone_is_a_mismatch_in_a_batch_as_in_check():
    # a b a b: every candidate agrees with the model; the library clears no sorted flag where apply reaches
    # Step 4 (it must). Batch.odd_rows, with every logit agreeing, once classed that row oracle-disagreement.
    from dryz.subject.interface import Output
    case = Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=64, candidates=((0, 0.0), (1, 0.0)), sorted=True)
    cfg = case_config(case)
    H = np.array([case.history, case.history], dtype=np.uint8)
    cands = np.array([0, 1], dtype=np.uint8)
    b0 = check_batch(cfg, H[:1], cands, np.zeros((1, 2), dtype=np.float32), np.zeros(2, dtype=np.float32), True,
                     np.array([False]))
    right = b0.expected[0]
    observed = np.array([right, right], dtype=np.float32)
    b = check_batch(cfg, H, cands, observed, np.zeros(2, dtype=np.float32), True, np.array([False, True]))
    assert b.odd_rows() == [(1, MISMATCH)]
    assert check(case, lib=_Given(Output((0, 1), right.copy(), True, 2))).klass == MISMATCH
    assert check(case, lib=_Given(Output((0, 1), right.copy(), False, 2))).klass == AGREE
