"""What diagnose() finds in a model before it measures: the blocks, the norms and how each block
places its norm. Everything here runs the model with hooks; nothing in it changes the model
(diagnose() restores parameters, buffers, gradients, modes and the RNG state around it all)."""
import torch

# Scaling and shifting a row by these is exact in binary floating point, so a norm's output
# changes only through eps: the test below tells a norm from other shape-keeping modules.
_SCALE = 4.0
_SHIFT = 2.0


def forward(model, batch):
    """model(batch): a tuple or list is passed as positional arguments, a dict as keywords."""
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    if isinstance(batch, dict):
        return model(**batch)
    return model(batch)


def first_tensor(value):
    """The tensor a module's output or input stands for: itself, or the first tensor of a
    tuple, list or dict (HuggingFace-style outputs keep their main tensor first)."""
    if torch.is_tensor(value):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


def _is_addnorm_fused(module):
    from ._torch_modules import AddNorm  # the fused box: two inputs, known placement
    return isinstance(module, AddNorm)


def _tolerance(dtype):
    return max(1e-4, 8 * torch.finfo(dtype).eps)


def _same(a, b, dtype):
    """a and b equal within what the dtype's rounding explains (relative to b's scale)."""
    scale = b.float().abs().max().clamp_min(1e-30)
    return bool(((a.float() - b.float()).abs().max() / scale) <= _tolerance(dtype))


class NormInfo:
    """A module found to be a norm: its kind ("layer_norm": centres and scales each row,
    "rms_norm": scales only) and how it was recognised."""

    def __init__(self, kind, how):
        self.kind, self.how = kind, how


def find_norms(model, batch):
    """The row norms of the model, recognised by behaviour, not by class: a leaf module whose
    output keeps its input's shape and does not change when each row is scaled by 4 is a norm;
    one that also ignores a shift of every row by 2 centres (LayerNorm-like), the others scale
    only (RMSNorm-like). addnorm.torch.AddNorm, which takes two inputs, is known by its class.
    BatchNorm in eval mode normalises with fixed statistics and is therefore not a row norm."""
    inputs = {}
    hooks = []

    def remember(module, args, output):
        if module not in inputs and args and torch.is_tensor(args[0]) and torch.is_tensor(output):
            inputs[module] = (args[0].detach(), output.detach())

    norms = {}
    for module in model.modules():
        if _is_addnorm_fused(module):
            norms[module] = NormInfo(module.norm, "addnorm.torch.AddNorm")
        elif not any(True for _ in module.children()):
            hooks.append(module.register_forward_hook(remember))
    try:
        with torch.enable_grad():  # keeps torch's fused inference paths (which skip hooks) off
            forward(model, batch)
    finally:
        for hook in hooks:
            hook.remove()
    with torch.no_grad():
        for module, (x, y) in inputs.items():
            if (x.shape != y.shape or not x.is_floating_point() or x.dim() == 0
                    or not bool(y.abs().max() > 0) or not bool(torch.isfinite(y).all())):
                continue
            dtype = y.dtype
            scaled = module(x * _SCALE)
            if not torch.is_tensor(scaled) or not _same(scaled, y, dtype):
                continue
            centred = _same(module(x + _SHIFT), y, dtype)
            norms[module] = NormInfo("layer_norm" if centred else "rms_norm",
                                     "output unchanged when rows are scaled" +
                                     (" or shifted" if centred else ""))
    return norms


def _repeated_children(container):
    """The children of a ModuleList or Sequential grouped by class, largest group first."""
    groups = {}
    for name, child in container.named_children():
        groups.setdefault(type(child), []).append((name, child))
    return sorted(groups.values(), key=len, reverse=True)


def find_blocks(model, norms, names=None):
    """The model's blocks as (name, module) in call order. With `names` (module names as in
    model.named_modules(), or the name of one ModuleList/Sequential holding them), those; else
    the largest group of two or more children of one class in a ModuleList or Sequential,
    preferring groups whose members contain a norm."""
    named = dict(model.named_modules())
    if names is not None:
        if isinstance(names, str):
            names = [names]
        names = list(names)
        if len(names) == 1 and isinstance(named.get(names[0]),
                                          (torch.nn.ModuleList, torch.nn.Sequential)):
            prefix = names[0]
            return [(f"{prefix}.{child}", module)
                    for child, module in named[prefix].named_children()]
        missing = [name for name in names if name not in named]
        if missing:
            raise ValueError(f"blocks names {missing!r}, which are not modules of the model; "
                             "expected names from model.named_modules(), e.g. "
                             f"{_examples(named)}")
        return [(name, named[name]) for name in names]
    best, best_key = None, None
    for prefix, container in named.items():
        if not isinstance(container, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        for group in _repeated_children(container):
            if len(group) < 2:
                continue
            with_norm = sum(any(m in norms for m in child.modules()) for _, child in group)
            with_params = any(True for _, child in group for _ in child.parameters())
            if not with_params:
                continue
            key = (with_norm > 0, len(group))
            if best_key is None or key > best_key:
                best_key = key
                best = [(f"{prefix}.{name}" if prefix else name, child) for name, child in group]
    if best is None:
        raise ValueError(
            f"cannot find the blocks of {type(model).__name__}: no ModuleList or Sequential in it "
            "holds two or more children of one class with parameters. Name them: "
            "diagnose(model, batch, blocks=['layers.0', 'layers.1', ...]) or blocks='layers' "
            f"(module names from model.named_modules(), e.g. {_examples(named)})")
    return best


def _examples(named):
    names = [name for name in named if name][:4]
    return ", ".join(repr(name) for name in names) or "none: the model has no submodules"


def batch_first_of(block):
    """Whether the block's tensors are (batch, tokens, d): the batch_first attribute of the block
    or of a submodule (torch's attention and transformer layers), else True (GPT-style)."""
    for module in block.modules():
        flag = getattr(module, "batch_first", None)
        if isinstance(flag, bool):
            return flag
    return True


def tokens_view(tensor, batch_first):
    """(samples, tokens, d) float32 from a block's output: 3-D tensors by batch_first, 2-D as
    one sample, more dimensions with the middle ones flattened into tokens."""
    t = tensor.detach().float()
    if t.dim() == 1:
        return t.reshape(1, 1, -1)
    if t.dim() == 2:
        return t.unsqueeze(0)
    if t.dim() == 3 and not batch_first:
        t = t.transpose(0, 1)
    return t.reshape(t.shape[0], -1, t.shape[-1])


def token_geometry(tensor, batch_first):
    """(mean token cosine, Dong et al.'s relative residual) of a block's output, averaged over
    samples. The residual is |X - 1 x^T|_F / |X|_F with x the tokens' mean, the rank-1 matrix
    nearest X: 0 when every token is the same vector (rank collapse), near 1 for spread ones."""
    x = tokens_view(tensor, batch_first)
    samples, tokens, _ = x.shape
    unit = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    if tokens > 1:
        gram = unit @ unit.transpose(1, 2)
        cosine = ((gram.sum(dim=(1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)) /
                  (tokens * (tokens - 1))).mean()
    else:
        cosine = torch.tensor(float("nan"))
    centred = x - x.mean(dim=1, keepdim=True)
    residual = (centred.norm(dim=(1, 2)) / x.norm(dim=(1, 2)).clamp_min(1e-30)).mean()
    return float(cosine), float(residual)


def rms(tensor):
    return float(tensor.detach().float().pow(2).mean().sqrt())


def shortcut_share(block, x, extra_args, seed):
    """cos(f(x + d) - f(x), d) for a small random d: how much of a change to the block's input
    passes straight through. A residual block passes d itself (pre-norm: d + branch'(x) d;
    post-norm: the norm's Jacobian applied to that), a block without one only branch'(x) d, a
    random direction nearly orthogonal to d."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(x.shape, generator=generator, dtype=torch.float32).to(x.dtype)
    sixteen_bit = torch.finfo(x.dtype).bits <= 16
    step = (0.1 if sixteen_bit else 1e-3) * max(rms(x), 1e-12)
    d = noise * step
    with torch.no_grad():
        base = first_tensor(block(x, *extra_args))
        moved = first_tensor(block(x + d, *extra_args))
    change = (moved.float() - base.float()).flatten()
    d = d.float().flatten()
    denominator = float(change.norm() * d.norm())
    return float(change @ d) / denominator if denominator > 0 else 0.0


def placement_of(block, records, block_input, block_output, dtype, shortcut):
    """The placement of one block from what its norms saw: 'pre_norm' when a norm reads the
    block's input (the norm before the branch), 'post_norm' when the block's output is a norm's
    output (the norm after the add), 'sandwich' for both, 'norm_in_branch' for a norm that is
    neither, 'no_norm' for none; with ' (no residual)' when changes to the input do not pass
    through (shortcut_share below 0.2)."""
    fused = [module for module in block.modules() if _is_addnorm_fused(module)]
    pre = any(getattr(module, "mode", "") == "pre" for module in fused)
    post = any(getattr(module, "mode", "") == "post" for module in fused)
    for _, norm_input, norm_output in records:
        if norm_input.shape == block_input.shape and _same(norm_input, block_input, dtype):
            pre = True
        if norm_output.shape == block_output.shape and _same(norm_output, block_output, dtype):
            post = True
    if pre and post:
        placement = "sandwich"
    elif pre:
        placement = "pre_norm"
    elif post:
        placement = "post_norm"
    elif records or fused:
        placement = "norm_in_branch"
    else:
        placement = "no_norm"
    if shortcut < 0.2:
        placement += " (no residual)"
    return placement
