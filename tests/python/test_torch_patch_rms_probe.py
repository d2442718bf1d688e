"""patch's RMSNorm probe: a module named like an RMSNorm is swapped only when it computes
x / sqrt(mean(x**2) + eps) * weight (or * (1 + weight)) at every input scale from 1e-4 to 1e4,
in its own dtype. x / (rms + eps) agrees with that at scale 1 (so a one-scale probe swaps it)
but not at small scales, and must be left alone."""
import pytest
import torch

import addnorm.torch as an
from addnorm._torch_patch import PROBE_SCALES


class PlainRMSNorm(torch.nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(width).uniform_(0.5, 1.5))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class OnePlusWeightRMSNorm(PlainRMSNorm):
    """Gemma's form: the weight starts at 0 and scales by (1 + weight)."""

    def forward(self, x):
        return (1 + self.weight) * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class EpsOutsideRootRMSNorm(PlainRMSNorm):
    """A common mistake: eps added to the root, not inside it."""

    def forward(self, x):
        return self.weight * x / (x.pow(2).mean(-1, keepdim=True).sqrt() + self.eps)


def test_the_wrong_rms_norm_passes_a_one_scale_probe_but_not_the_multi_scale_one():
    wrong, right = EpsOutsideRootRMSNorm(32), PlainRMSNorm(32)
    right.weight = wrong.weight
    x = torch.randn(4, 32)
    with torch.no_grad():
        # At scale 1 the two differ by about eps / rms ~ 1e-6: within any float32 tolerance.
        torch.testing.assert_close(wrong(x), right(x), rtol=1e-5, atol=1e-5)
        # At scale 1e-4, rms ~ 1e-4 ~ sqrt(eps): the outputs differ by a factor of about 10.
        small = x * 1e-4
        assert (wrong(small) - right(small)).abs().max() > 0.5 * right(small).abs().max()
    assert min(PROBE_SCALES) <= 1e-4 and max(PROBE_SCALES) >= 1e4

    model = torch.nn.Sequential(torch.nn.Linear(32, 32), wrong)
    with pytest.warns(UserWarning, match=r"left these modules alone: '1' "
                                         r"\(EpsOutsideRootRMSNorm\).*input scale 0.0001"):
        an.patch(model)
    assert model[1] is wrong


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cls, zero_centered", [(PlainRMSNorm, False),
                                                (OnePlusWeightRMSNorm, True)])
def test_right_rms_norms_are_swapped_in_their_dtype(cls, zero_centered, dtype):
    torch.manual_seed(3)
    old = cls(48).to(dtype)
    model = torch.nn.Sequential(old)
    x = torch.randn(6, 48, dtype=dtype)
    expected = {scale: old(x * scale).detach() for scale in (1e-3, 1.0, 1e3)}
    an.patch(model)
    new = model[0]
    assert type(new) is an.RMSNorm and new.zero_centered_weight is zero_centered
    assert new.weight is old.weight and new.weight.dtype == dtype
    tolerance = 1e-5 if dtype == torch.float32 else 1e-12
    for scale, wanted in expected.items():
        torch.testing.assert_close(new(x * scale), wanted, rtol=tolerance, atol=tolerance)


def test_a_module_that_fails_on_the_probe_is_left_alone():
    class ThreeDimRMSNorm(PlainRMSNorm):
        def forward(self, x):
            batch, time, width = x.shape  # refuses the probe's (rows, width) input
            return super().forward(x)

    model = torch.nn.Sequential(ThreeDimRMSNorm(8))
    with pytest.warns(UserWarning, match=r"'0' \(ThreeDimRMSNorm\): it raised ValueError"):
        an.patch(model)
    assert type(model[0]) is ThreeDimRMSNorm
