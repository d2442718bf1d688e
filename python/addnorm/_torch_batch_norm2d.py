"""addnorm.torch.BatchNorm2d: torch.nn.BatchNorm2d computed by addnorm, for (N, C, H, W) input
in either memory format."""
import torch

from . import _torch_modules


def channels_as_columns(input):
    """(view, restore): a view of the 4-D input whose channel axis is addnorm batch_norm's axis 1,
    and the function that turns the result back into (N, C, H, W). Neither copies, except that
    an input in neither memory format is first made contiguous (as torch.nn.BatchNorm2d would).

    Contiguous (NCHW) memory is (N, C, H*W). Channels-last (NHWC) memory is (N*H*W, C): every
    pixel is a row, every channel a column; the result is returned channels-last, as torch does.
    """
    n, c, h, w = input.shape
    if input.is_contiguous():
        return input.view(n, c, h * w), lambda y: y.view(n, c, h, w)
    if input.is_contiguous(memory_format=torch.channels_last):
        pixels = input.permute(0, 2, 3, 1).view(n * h * w, c)
        return pixels, lambda y: y.view(n, h, w, c).permute(0, 3, 1, 2)
    return channels_as_columns(input.contiguous())


class BatchNorm2d(torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d computed by addnorm: same arguments, parameters, buffers, state_dict
    and results (training statistics over N, H and W; running statistics as in PyTorch).

    Input (N, C, H, W). Contiguous input is normalised as (N, C, H*W) and channels-last input
    as (N*H*W, C), both views of the input's memory (see channels_as_columns): no layout
    conversion, and channels-last input gives channels-last output, as with torch's module.
    """

    def forward(self, input):
        torch.nn.BatchNorm2d._check_input_dim(self, input)
        columns, restore = channels_as_columns(input)
        # The running-statistics bookkeeping (momentum, cumulative average,
        # num_batches_tracked) is BatchNorm1d's, applied to the view above.
        return restore(_torch_modules.BatchNorm1d.forward(self, columns))

    def _check_input_dim(self, input):
        # BatchNorm1d.forward calls this on the (N, C, L) or (rows, C) view; forward has
        # already checked the user's input against torch's 4-D rule.
        if input.dim() not in (2, 3):
            raise ValueError(f"expected a 2-D or 3-D view of the input, got {input.dim()}-D")
