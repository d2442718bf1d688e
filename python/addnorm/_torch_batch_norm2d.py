"""addnorm.torch.BatchNorm2d: torch.nn.BatchNorm2d computed by addnorm, for (N, C, H, W) input
in either memory format."""
import torch

from . import _torch_functions as F
from . import _torch_modules


class BatchNorm2d(_torch_modules._TorchNnLeaf, _torch_modules._BatchNorm,
                  torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d computed by addnorm: same arguments, parameters, buffers, state_dict
    and results (training statistics over N, H and W; running statistics as in PyTorch); it
    scripts (torch.jit.script).

    Input (N, C, H, W). Contiguous (NCHW) input is normalised as the view (N, C, H*W);
    channels-last (NHWC) input as the view (N*H*W, C), every pixel a row and every channel a
    column, and the result is returned channels-last, as torch's module does. Input in neither
    memory format is made contiguous first, as torch.nn.BatchNorm2d would.
    """

    def forward(self, input):
        self._check_input_dim(input)
        if F.batch_norm_channels_last(input):  # every pixel a row, as _torch_modules._BatchNorm
            y = self._normalise(F.channels_as_columns(input), input.size())
            return F.columns_as_channels(y, input.size())
        n, c, h, w = input.size(0), input.size(1), input.size(2), input.size(3)
        return self._normalise(input.reshape(n, c, h * w), input.size()).view(n, c, h, w)
