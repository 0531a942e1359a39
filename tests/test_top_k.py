"""Row-wise max and top-k through block maxima return what torch's max and topk return."""

from __future__ import annotations

import pytest
import torch

from nmt.search.top_k import BLOCK, row_max, row_topk


@pytest.mark.parametrize("width", [8 * BLOCK, 8 * BLOCK + 13, 3 * BLOCK])  # whole, tail, short
def test_row_max_equals_torch_max(width):
    torch.manual_seed(0)
    x = torch.randn(37, width).log_softmax(-1)
    x[3, -1] = 50.0  # the max in the tail
    x[4, 0] = 50.0  # in the first block
    val, idx = row_max(x)
    ref_val, ref_idx = x.max(-1)
    assert torch.equal(val, ref_val) and torch.equal(idx, ref_idx)


def test_row_max_takes_the_first_of_equal_maxima():
    x = torch.zeros(3, 8 * BLOCK + 5)
    x[0, [7, BLOCK + 1, 8 * BLOCK + 2]] = 1.0  # blocks 0 and 1, and the tail
    x[1, [3 * BLOCK, 8 * BLOCK + 4]] = 2.0  # a block and the tail
    x[2, 8 * BLOCK + 1] = 3.0  # the tail alone
    val, idx = row_max(x)
    assert idx.tolist() == [7, 3 * BLOCK, 8 * BLOCK + 1] and val.tolist() == [1.0, 2.0, 3.0]
    assert torch.equal(idx, x.max(-1).indices)


@pytest.mark.parametrize("width", [5 * 8 * BLOCK, 5 * 8 * BLOCK + 7])
@pytest.mark.parametrize("k", [1, 10])
def test_row_topk_equals_torch_topk(width, k):
    torch.manual_seed(1)
    x = torch.randn(23, width)
    x[0, :k] = 10.0 + torch.arange(k)  # all of them in the first block
    x[1, -k:] = 10.0 + torch.arange(k)  # at the end (in the tail where there is one)
    val, idx = row_topk(x, k)
    ref_val, ref_idx = x.topk(k, -1)
    assert torch.equal(val, ref_val) and torch.equal(idx, ref_idx)


def test_row_topk_with_fewer_finite_values_than_k_matches_torch_values():
    """Beam search's first step: one live beam, the other beams' candidates at -inf."""
    x = torch.full((4, 5 * 8 * BLOCK), float("-inf"))
    x[:, 100:103] = torch.tensor([-1.0, -3.0, -2.0])
    val, idx = row_topk(x, 10)
    assert torch.equal(val, x.topk(10, -1).values)
    assert idx[:, :3].tolist() == [[100, 102, 101]] * 4
    assert torch.equal(x.gather(1, idx), val)  # every index points at its value


def test_rows_that_are_not_contiguous_give_the_same_answers():
    torch.manual_seed(2)
    x = torch.randn(3000, 9).t()  # 9 rows of 3,000, each strided
    assert torch.equal(row_max(x)[1], x.max(-1).indices)
    val, idx = row_topk(x, 4)
    assert torch.equal(val, x.topk(4, -1).values) and torch.equal(x.gather(1, idx), val)


NAN = float("nan")


def test_row_max_of_rows_with_nan_equals_torch_max():
    """torch.max gives NaN and the first NaN's index; a NaN in the tail must win too."""
    torch.manual_seed(3)
    x = torch.randn(5, 8 * BLOCK + 13)
    x[0, -1] = NAN  # the tail alone
    x[1, BLOCK + 6] = NAN  # a whole block alone
    x[2, [BLOCK + 6, 8 * BLOCK + 2]] = NAN  # a block and the tail: the block's comes first
    x[3, [8 * BLOCK + 9, 8 * BLOCK + 3]] = NAN  # twice in the tail
    x[4, -2] = 50.0  # and a row without NaN
    val, idx = row_max(x)
    ref_val, ref_idx = x.max(-1)
    assert torch.equal(idx, ref_idx), (idx, ref_idx)
    torch.testing.assert_close(val, ref_val, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("k", [1, 3])
def test_row_topk_of_rows_with_nan_equals_torch_topk(k):
    """torch.topk ranks NaN above every number; which of several NaNs comes first is open."""
    torch.manual_seed(4)
    x = torch.randn(4, 5 * 8 * BLOCK + 7)
    x[0, -1] = NAN  # the tail
    x[1, BLOCK + 6] = NAN  # a whole block
    x[2, [BLOCK + 6, 5 * 8 * BLOCK + 2]] = NAN  # both
    x[3, [5, 900, x.size(1) - 1]] = NAN  # three: fills k=3 with NaN
    val, idx = row_topk(x, k)
    ref_val, ref_idx = x.topk(k, -1)
    torch.testing.assert_close(val, ref_val, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(x.gather(1, idx), val, equal_nan=True, rtol=0, atol=0)
    nan = ref_val.isnan()
    assert torch.equal(idx[~nan], ref_idx[~nan])
    for row in range(4):  # distinct NaNs, all of them where the row has at most k
        nans = sorted(idx[row][nan[row]].tolist())
        assert len(set(nans)) == len(nans)
        if x[row].isnan().sum() <= k:
            assert nans == sorted(ref_idx[row][nan[row]].tolist())
