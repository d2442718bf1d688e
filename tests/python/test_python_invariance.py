"""The invariance table of Ba, Kiros & Hinton (2016), "Layer Normalization", as property tests
on addnorm's functions with eps = 0.

Pre-activations are a = x @ W (rows = examples, columns = units); the norm is applied to a.
  LayerNorm: invariant to re-scaling and to re-centering a single example, and to re-scaling
             the whole weight matrix.
  BatchNorm: invariant to re-scaling the dataset and the weight matrix, NOT to re-scaling a
             single example (the batch statistics move, so the other examples' outputs move).
  RMSNorm:   invariant to re-scaling, NOT to re-centering.
Every "invariant" cell holds to float tolerance; every "not invariant" cell differs by far more
than that tolerance (a tolerance-sized change would not count as a difference).
"""
import numpy as np
from hypothesis import given, settings, strategies as st

import addnorm

SETTINGS = settings(max_examples=30, deadline=None, database=None)
TOLERANCE = {np.float32: 1e-4, np.float64: 1e-9}
DIFFERS = 1e-2  # a "not invariant" cell must move some output by at least this much


@st.composite
def layers(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    examples, inputs, units = draw(st.integers(3, 8)), draw(st.integers(2, 6)), draw(
        st.integers(3, 12))
    x = rng.standard_normal((examples, inputs))
    weights = rng.standard_normal((inputs, units))
    return dict(x=x, weights=weights, dtype=dtype, rng=rng,
                scale=draw(st.sampled_from([0.01, 0.5, 3.0, 1000.0])),
                shift=draw(st.sampled_from([-50.0, -1.0, 0.75, 20.0])),
                example=draw(st.integers(0, examples - 1)))


def pre_activations(x, weights, dtype):
    return np.ascontiguousarray((x @ weights).astype(dtype))


def layer_norm(a):
    return addnorm.layer_norm(a, a.shape[-1], eps=0.0)


def rms_norm(a):
    return addnorm.rms_norm(a, a.shape[-1], eps=0.0)


def batch_norm(a):
    return addnorm.batch_norm(a, None, None, training=True, eps=0.0)


def assert_invariant(before, after, dtype):
    np.testing.assert_allclose(after, before, rtol=0, atol=TOLERANCE[dtype])


def assert_differs(before, after):
    assert np.abs(after.astype(np.float64) - before).max() > DIFFERS


def one_example_scaled(case):
    x = case["x"].copy()
    x[case["example"]] *= case["scale"]
    return x


@SETTINGS
@given(layers())
def test_layer_norm_invariances(case):
    x, weights, dtype = case["x"], case["weights"], case["dtype"]
    a = pre_activations(x, weights, dtype)
    y = layer_norm(a)
    assert_invariant(y, layer_norm(pre_activations(one_example_scaled(case), weights, dtype)),
                     dtype)
    recentred = a.copy()
    recentred[case["example"]] += dtype(case["shift"])
    assert_invariant(y, layer_norm(recentred), dtype)
    assert_invariant(y, layer_norm(pre_activations(x, weights * case["scale"], dtype)), dtype)


@SETTINGS
@given(layers())
def test_batch_norm_invariances_and_single_example_sensitivity(case):
    x, weights, dtype = case["x"], case["weights"], case["dtype"]
    y = batch_norm(pre_activations(x, weights, dtype))
    assert_invariant(y, batch_norm(pre_activations(x * case["scale"], weights, dtype)), dtype)
    assert_invariant(y, batch_norm(pre_activations(x, weights * case["scale"], dtype)), dtype)
    # Re-scaling one example by 7 (never 1) moves the batch statistics.
    x_one = x.copy()
    x_one[case["example"]] *= 7.0
    assert_differs(y, batch_norm(pre_activations(x_one, weights, dtype)))


@SETTINGS
@given(layers())
def test_rms_norm_invariant_to_rescaling_not_recentering(case):
    x, weights, dtype = case["x"], case["weights"], case["dtype"]
    a = pre_activations(x, weights, dtype)
    y = rms_norm(a)
    assert_invariant(y, rms_norm(pre_activations(one_example_scaled(case), weights, dtype)),
                     dtype)
    assert_invariant(y, rms_norm(pre_activations(x, weights * case["scale"], dtype)), dtype)
    recentred = a.copy()
    recentred[case["example"]] += dtype(case["shift"])
    assert_differs(y, rms_norm(recentred))
    # LayerNorm of the same re-centred input does not move: the difference is RMSNorm's.
    assert_invariant(layer_norm(a), layer_norm(recentred), dtype)
