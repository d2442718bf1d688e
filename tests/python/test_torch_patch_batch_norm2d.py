"""addnorm.torch.BatchNorm2d against torch.nn.BatchNorm2d: training and inference forward,
backward (input, weight, bias), running statistics over steps, in contiguous (NCHW) and
channels-last (NHWC) memory, and through patch(batch_norm=True)."""
import pytest
import torch

import addnorm.torch as an

LAYOUTS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}


def pair(channels=3, dtype=torch.float64, **options):
    """(ours, theirs): the same BatchNorm2d with random affine parameters, in dtype."""
    theirs = torch.nn.BatchNorm2d(channels, **options).to(dtype)
    if theirs.affine:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.normal_()
    ours = an.BatchNorm2d(channels, **options).to(dtype)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def batch(layout, dtype=torch.float64, shape=(4, 3, 5, 6)):
    x = (torch.randn(*shape, dtype=torch.float64) * 3 + 2).to(dtype)
    return x.to(memory_format=LAYOUTS[layout]).requires_grad_()


def forward_backward(module, x):
    """(y, dx, dweight, dbias) for loss = sum(y * upstream) with a fixed random upstream."""
    x = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
    y = module(x)
    upstream = torch.randn(y.shape, generator=torch.Generator().manual_seed(1),
                           dtype=torch.float64).to(y.dtype)
    module.zero_grad()
    (y * upstream).sum().backward()
    grads = [x.grad] + ([module.weight.grad, module.bias.grad] if module.affine else [])
    return [y] + grads


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(2024)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_float64_training_matches_torch_over_steps(layout, momentum):
    ours, theirs = pair(momentum=momentum)
    for _ in range(3):
        x = batch(layout)
        for a, b in zip(forward_backward(ours, x), forward_backward(theirs, x)):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), rtol=1e-12,
                                   atol=1e-12)
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked) == 3
    ours.eval()
    theirs.eval()
    x = batch(layout)
    for a, b in zip(forward_backward(ours, x), forward_backward(theirs, x)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("training", [True, False])
def test_float32_against_a_float64_reference(layout, training):
    ours, _ = pair(dtype=torch.float32)
    reference = torch.nn.BatchNorm2d(3).double()
    reference.load_state_dict(ours.state_dict())
    with torch.no_grad():  # running statistics away from the defaults, for inference
        reference.running_mean.normal_()
        reference.running_var.uniform_(0.5, 2.0)
        ours.running_mean.copy_(reference.running_mean)
        ours.running_var.copy_(reference.running_var)
    ours.train(training)
    reference.train(training)
    x = batch(layout, torch.float32, shape=(8, 3, 7, 9))
    results = forward_backward(ours, x)
    expected = forward_backward(reference, x.double())
    for a, b in zip(results, expected):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ours.running_var.double(), reference.running_var, rtol=1e-6,
                               atol=1e-6)


def test_channels_last_is_returned_channels_last():
    x = batch("channels_last").detach()
    ours, theirs = pair()
    y = ours(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert theirs(x).is_contiguous(memory_format=torch.channels_last)  # as torch does
    torch.testing.assert_close(y, theirs(x), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_batch_norm2d_scripts_and_gives_the_modules_results(layout):
    ours, theirs = pair()
    scripted = torch.jit.script(ours)
    x = batch(layout).detach()
    torch.testing.assert_close(scripted(x), theirs(x), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(scripted.running_mean, theirs.running_mean, rtol=1e-10,
                               atol=1e-10)


def test_other_strides_and_options():
    ours, theirs = pair()
    assert isinstance(ours, torch.nn.BatchNorm2d) and repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = batch("contiguous", shape=(4, 3, 5, 12)).detach()[..., ::2]  # neither layout
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-10, atol=1e-10)
    for options in ({"affine": False}, {"track_running_stats": False}):
        ours, theirs = pair(**options)
        for mode in (True, False):
            ours.train(mode)
            theirs.train(mode)
            x = batch("channels_last")
            torch.testing.assert_close(ours(x), theirs(x), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="expected 4D input"):
        ours(torch.randn(4, 3, 5, dtype=torch.float64))


def test_gradcheck_channels_last():
    ours, _ = pair(channels=2)
    x = batch("channels_last", shape=(3, 2, 2, 3))
    assert torch.autograd.gradcheck(ours, (x,))


def test_patch_swaps_batch_norm2d_in_a_conv_net():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3),
                                torch.nn.BatchNorm2d(4)).to(memory_format=torch.channels_last)
    twin = torch.nn.Sequential(*model)  # the same module objects: torch's, after the patch
    x = torch.randn(2, 3, 9, 9).to(memory_format=torch.channels_last)
    model(x)  # one training step moves the running statistics
    an.patch(model)
    assert type(model[1]) is torch.nn.BatchNorm2d  # batch_norm=False by default
    an.patch(model, batch_norm=True)
    assert type(model[1]) is an.BatchNorm2d and type(model[4]) is an.BatchNorm2d
    assert model[1].weight is twin[1].weight and model[1].running_mean is twin[1].running_mean
    model.eval()
    twin.eval()
    torch.testing.assert_close(model(x), twin(x), rtol=1e-5, atol=1e-5)


def layouts(count, seed):
    """Random (N, C, H, W) and (N, C, D, H, W) tensors of sizes 1 to 3 in every order of their
    strides, some sliced with a step: the layouts whose memory format PyTorch decides with
    dimensions of size 1 among them."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(count):
        rank = 4 + int(torch.randint(0, 2, (1,), generator=g))
        sizes = [1 + int(s) for s in torch.randint(0, 3, (rank,), generator=g)]
        order = torch.randperm(rank, generator=g).tolist()
        x = torch.randn([sizes[d] for d in order], generator=g).permute(
            [order.index(d) for d in range(rank)])
        if torch.rand(1, generator=g).item() < 0.3:
            d = int(torch.randint(0, rank, (1,), generator=g))
            x = torch.cat([x, x], d).narrow(d, 0, 2 * sizes[d])[
                tuple(slice(None, None, 2) if i == d else slice(None) for i in range(rank))]
        yield x


def memory_formats(y):
    layout = torch.channels_last if y.dim() == 4 else torch.channels_last_3d
    return y.is_contiguous(), y.is_contiguous(memory_format=layout)


@pytest.mark.parametrize("seed", range(12, 20))
@pytest.mark.parametrize("training", [True, False])
def test_outputs_take_the_memory_format_pytorchs_take(training, seed):
    # The modules and the function, on every layout: the output is contiguous or channels-last
    # exactly where PyTorch's is (4-D and 5-D follow different rules in PyTorch 1.13).
    for x in layouts(150, seed):
        channels = x.size(1)
        ours = (an.BatchNorm2d if x.dim() == 4 else an.BatchNorm3d)(channels).train(training)
        theirs = (torch.nn.BatchNorm2d if x.dim() == 4 else torch.nn.BatchNorm3d)(channels)
        theirs.train(training)
        if training and x.numel() == channels:
            continue  # one value a channel: refused by both (another test)
        expected = theirs(x)
        for got in (ours(x), an.batch_norm(x, None, None, training=True) if training else
                    an.batch_norm(x, torch.zeros(channels), torch.ones(channels))):
            assert memory_formats(got) == memory_formats(expected), (x.shape, x.stride())
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
