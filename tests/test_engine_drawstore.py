"""The draw store: what it hands out equals the keyed draws, however it batches them, and it gives slots back."""

import numpy as np

from simlab.acceptance.draws import ArmDraws
from simlab.config.acceptance import ConfidenceConfig, HeterogeneityConfig
from simlab.engine import drawstore
from simlab.engine.drawstore import DrawStore

GAMMA = 5


def arm_draws(seed=11) -> ArmDraws:
    return ArmDraws(
        seed=seed, gamma=GAMMA, base_logit=np.array([[1.5, 1.2, 1.0, 0.8, 0.6]]),
        heterogeneity=HeterogeneityConfig(request_logit_sd=0.4, step_logit_sd=0.7, step_correlation=0.6,
                                          token_logit_sd=0.9),
        confidence=ConfidenceConfig(noise_logit_sd=0.5, bias_logit=0.2),
        temperatures=np.linspace(1.0, 1.4, GAMMA),
    )


def store_for(output_tokens, lag_steps=0) -> DrawStore:
    draws = arm_draws()
    shift = draws.request_shift(len(output_tokens))
    return DrawStore(draws, lambda ids: draws.base_logit[np.zeros(len(ids), dtype=int)] + shift[ids][:, None],
                     np.asarray(output_tokens), lag_steps)


def test_ragged_draws_equal_each_request_drawn_alone():
    draws = arm_draws()
    ids = np.array([3, 0, 7])
    logit = draws.base_logit[[0, 0, 0]] + draws.request_shift(8)[ids][:, None]
    first = np.array([0, 5, 2])
    previous = np.array([0.0, 0.3, -0.2])
    num_steps = np.array([4, 1, 6])
    conf, accepted, shift = draws.generate(ids, logit, first, previous, num_steps)
    row = 0
    for i in range(len(ids)):
        alone = draws.generate(ids[i : i + 1], logit[i : i + 1], first[i : i + 1], previous[i : i + 1],
                               num_steps[i : i + 1])
        n = num_steps[i]
        assert np.array_equal(conf[row : row + n], alone[0])
        assert np.array_equal(accepted[row : row + n], alone[1])
        assert np.array_equal(shift[row : row + n], alone[2])
        row += n


def test_store_hands_out_the_keyed_draws_of_a_whole_run():
    """Walking one request step by step through the store (with extensions) gives the draws of its whole run
    drawn in one call: the step-difficulty process continues across extensions."""
    output_tokens = [400, 3, 250]
    store = store_for(output_tokens, lag_steps=2)
    draws = arm_draws()
    shift = draws.request_shift(len(output_tokens))
    num_steps = 300
    whole = draws.generate(np.array([0]), draws.base_logit[[0]] + shift[[0]][:, None], np.array([0]),
                           np.array([0.0]), np.array([num_steps]))
    for step in range(num_steps):
        # pretend one token per step: the request never finishes within the walk
        got = store.gather(np.array([0]), np.array([[step]]), np.array([399 - step]))
        assert np.array_equal(got["conf"][0, 0], whole[0][step])
        assert got["true_accepted"][0, 0] == whole[1][step]
        if step >= 2:  # two steps behind are kept for lagged confidences
            assert got["lagged_known"][0, 0] and np.array_equal(got["lagged_conf"][0, 0], whole[0][step - 2])
        else:
            assert not got["lagged_known"][0, 0]


def test_requests_that_never_decode_get_no_slot_and_finished_ones_give_theirs_back():
    output_tokens = np.array([5, 1, 9, 1, 1, 40, 2, 1] * 20)
    store = store_for(output_tokens)
    store.gather(np.array([0]), np.zeros((1, 1), dtype=int), np.array([4]))
    single = np.flatnonzero(output_tokens == 1)
    assert (store.slot[single] < 0).all()  # drawn ahead with the others, but never for one-token requests
    held = np.flatnonzero(store.slot >= 0)
    assert set(held) == set(np.flatnonzero(output_tokens > 1)[: len(held)])
    store.release(held)
    assert (store.slot < 0).all()
    assert len(store._free) == len(store.true_accepted) // drawstore.SLOT_STEPS  # every slot is free again
