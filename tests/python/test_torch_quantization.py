"""Eager-mode quantization on a model whose BatchNorm modules addnorm.torch.patch swapped: the
fusions, and the whole static-quantization flow, give what they give on the unpatched model
(PyTorch's own result is the expectation)."""
import copy

import pytest
import torch
from torch.ao.quantization import fuse_modules, fuse_modules_qat

import addnorm.torch


class Net(torch.nn.Module):
    """Every fusion PyTorch 1.13 lists with a BatchNorm, once."""

    def __init__(self):
        super().__init__()
        self.conv1d, self.bn1d = torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4)
        self.conv2d, self.bn2d, self.relu2d = (torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                               torch.nn.ReLU())
        self.conv3d, self.bn3d = torch.nn.Conv3d(3, 4, 3), torch.nn.BatchNorm3d(4)
        self.linear, self.bn_linear = torch.nn.Linear(5, 6), torch.nn.BatchNorm1d(6)
        self.bn_alone, self.relu_alone = torch.nn.BatchNorm2d(3), torch.nn.ReLU()
        self.deconv, self.bn_deconv = torch.nn.ConvTranspose2d(3, 4, 2), torch.nn.BatchNorm2d(4)

    def forward(self, x1, x2, x3, v):
        return (self.bn1d(self.conv1d(x1)), self.relu2d(self.bn2d(self.conv2d(x2))),
                self.bn3d(self.conv3d(x3)), self.bn_linear(self.linear(v)),
                self.relu_alone(self.bn_alone(x2)), self.bn_deconv(self.deconv(x2)))


FUSIONS = [["conv1d", "bn1d"], ["conv2d", "bn2d", "relu2d"], ["conv3d", "bn3d"],
           ["linear", "bn_linear"], ["bn_alone", "relu_alone"], ["deconv", "bn_deconv"]]


def inputs():
    generator = torch.Generator().manual_seed(3)
    return (torch.randn(8, 3, 9, generator=generator), torch.randn(8, 3, 7, 7, generator=generator),
            torch.randn(8, 3, 5, 5, 5, generator=generator), torch.randn(8, 5, generator=generator))


def trained_pair():
    """A torch.nn model with running statistics that moved, and its patched copy."""
    torch.manual_seed(0)
    theirs = Net()
    with torch.no_grad():
        theirs(*inputs())  # training mode: the running statistics move
    ours = addnorm.torch.patch(copy.deepcopy(theirs), batch_norm=True)
    assert type(ours.bn2d) is addnorm.torch.BatchNorm2d
    return theirs, ours


def test_fuse_modules_in_eval_mode_gives_torchs_fused_modules_and_outputs():
    theirs, ours = (m.eval() for m in trained_pair())
    fused_theirs = fuse_modules(theirs, FUSIONS)
    fused_ours = fuse_modules(ours, FUSIONS)
    for name, module in fused_theirs.named_modules():
        assert type(dict(fused_ours.named_modules())[name]) is type(module), name
    with torch.no_grad():
        for a, b in zip(fused_ours(*inputs()), fused_theirs(*inputs())):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_fuse_modules_qat_keeps_the_very_parameters_and_buffers():
    theirs, ours = trained_pair()
    weight, running_mean = ours.bn2d.weight, ours.bn2d.running_mean
    fusions = FUSIONS[:-1]  # PyTorch 1.13 fuses no ConvTranspose + BatchNorm for QAT
    fused_theirs = fuse_modules_qat(theirs, fusions)
    fused_ours = fuse_modules_qat(ours, fusions, inplace=True)
    assert type(fused_ours.conv2d) is type(fused_theirs.conv2d)  # ConvBnReLU2d
    assert type(fused_ours.conv2d[1]) is torch.nn.BatchNorm2d
    assert fused_ours.conv2d[1].weight is weight  # an optimizer holding it keeps working
    assert fused_ours.conv2d[1].running_mean is running_mean
    for a, b in zip(fused_ours(*inputs()), fused_theirs(*inputs())):
        torch.testing.assert_close(a, b)


needs_qnnpack = pytest.mark.skipif(
    "qnnpack" not in torch.backends.quantized.supported_engines, reason="no quantized engine")


def statically_quantized(model, x, fusions):
    """model (its running statistics moved) through eager static quantization with qnnpack:
    patched with batch_norm=True (a copy) and as it is, fused, calibrated on x and converted.
    Returns (the patched model's output, the unpatched one's) on x, and the converted copies."""
    ours = addnorm.torch.patch(copy.deepcopy(model), batch_norm=True)
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        outputs, converted = [], []
        for one in (ours, model):
            one.eval()
            one.qconfig = torch.ao.quantization.get_default_qconfig("qnnpack")
            one = torch.ao.quantization.prepare(fuse_modules(one, fusions) if fusions else one)
            with torch.no_grad():
                one(x)  # calibration
            converted.append(torch.ao.quantization.convert(one))
            with torch.no_grad():
                outputs.append(converted[-1](x))
    finally:
        torch.backends.quantized.engine = previous
    return outputs, converted


@needs_qnnpack
def test_static_quantization_of_a_patched_model_matches_the_unpatched_one():
    class ConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = (torch.ao.quantization.QuantStub(),
                                        torch.ao.quantization.DeQuantStub())
            self.conv, self.bn, self.relu = (torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                             torch.nn.ReLU())

        def forward(self, x):
            return self.dequant(self.relu(self.bn(self.conv(self.quant(x)))))

    torch.manual_seed(1)
    model, x = ConvNet(), inputs()[1]
    with torch.no_grad():
        model(x)
    (ours, theirs), _ = statically_quantized(model, x, [["conv", "bn", "relu"]])
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@needs_qnnpack
def test_an_unfused_batch_norm_becomes_pytorchs_quantized_batch_norm():
    torch.manual_seed(2)
    x = inputs()[1]
    model = torch.nn.Sequential(torch.ao.quantization.QuantStub(), torch.nn.BatchNorm2d(3),
                                torch.ao.quantization.DeQuantStub())
    with torch.no_grad():
        model(x)
    (ours, theirs), converted = statically_quantized(model, x, None)
    assert type(converted[0][1]) is torch.ao.nn.quantized.BatchNorm2d
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_a_module_made_directly_fuses_too_and_is_left_unchanged():
    bn = addnorm.torch.BatchNorm1d(6).eval()
    model = torch.nn.Sequential(torch.nn.Linear(5, 6), bn).eval()
    expected = copy.deepcopy(model)
    expected[1] = torch.nn.BatchNorm1d(6).eval()
    expected[1].load_state_dict(bn.state_dict())
    fused = fuse_modules(copy.deepcopy(model), [["0", "1"]])
    theirs = fuse_modules(expected, [["0", "1"]])
    assert type(fused[0]) is torch.nn.Linear and type(fused[1]) is torch.nn.Identity
    torch.testing.assert_close(fused(inputs()[3]), theirs(inputs()[3]), rtol=0, atol=0)
    assert type(model[1]) is addnorm.torch.BatchNorm1d  # fusing a copy left the model alone
