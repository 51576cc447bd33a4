from __future__ import annotations

import torch

from kvlab.engine.masks import causal_mask


def test_window_keeps_only_the_most_recent_keys() -> None:
    # Window 3: position 4 sees 2, 3, 4 (itself included), as llama.cpp counts it.
    mask = causal_mask(5, 0, 3)
    assert mask[4].tolist() == [False, False, True, True, True]
    assert mask[1].tolist() == [True, True, False, False, False]


def test_keys_that_start_after_position_zero() -> None:
    # 2 new tokens after 6 cached, given only the last 4 keys (positions 4..7).
    mask = causal_mask(2, 6, 3, 4)
    assert mask.shape == (2, 4)
    assert mask.tolist() == [[True, True, True, False],  # position 6 sees 4, 5, 6
                             [False, True, True, True]]  # position 7 sees 5, 6, 7


def test_without_a_window_it_is_the_plain_offset_mask() -> None:
    assert torch.equal(causal_mask(3, 0, None), torch.ones(3, 3, dtype=torch.bool).tril())
    assert torch.equal(causal_mask(3, 0, 8), causal_mask(3, 0))
