"""Norm modules that models define for themselves, as addnorm.torch.patch meets them in users'
code. Not a test file; imported by the patch tests.
"""
import torch


class LlamaRMSNorm(torch.nn.Module):
    """Llama's RMSNorm: statistics in float32, the weight applied in the input's dtype."""

    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.variance_epsilon = eps

    def forward(self, x):
        wide = x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * normed.to(x.dtype)


class GemmaRMSNorm(LlamaRMSNorm):
    """Gemma's: the weight is stored as an offset from 1 (a zero-centred weight)."""

    def forward(self, x):
        return (1 + self.weight) * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) +
                                                   self.variance_epsilon)


class CentredRMSNorm(LlamaRMSNorm):
    """Named like an RMSNorm but subtracts the mean: patch must not swap it."""

    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
