"""What diagnose() finds in a model before it measures: the blocks, the norms and how each block
places its norm. Everything here runs the model and records its modules' calls; nothing in it
changes the model (diagnose() restores parameters, buffers, gradients, modes and the RNG state
around it all)."""
import itertools

import torch

# Scaling by powers of two and shifting by small integers is exact in binary floating point, so
# a norm's output changes only through eps: the tests below tell a norm from other modules.
_ROW_SCALES = (1.0, 2.0, 4.0)
_ROW_SHIFTS = (1.0, 2.0, 3.0)
_OUTPUT_KEYS = ("logits", "last_hidden_state", "prediction_logits")


def forward(model, batch):
    """model(batch): a tuple is passed as positional arguments, a dict as keywords."""
    if isinstance(batch, tuple):
        return model(*batch)
    if isinstance(batch, dict):
        return model(**batch)
    return model(batch)


def _is_float(value):
    return torch.is_tensor(value) and value.is_floating_point() and value.dim() > 0


def first_float(value):
    """The floating-point tensor (of at least one dimension) a module's output stands for:
    itself, or the first one in a tuple, list or dict; None if there is none."""
    if torch.is_tensor(value):
        return value if _is_float(value) else None
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        for item in value:
            found = first_float(item)
            if found is not None:
                return found
    return None


def model_output(value):
    """The tensor diagnose measures as the model's output: a dict's logits or last_hidden_state
    (HuggingFace-style outputs put a loss first when labels are given), else the first floating
    tensor."""
    if isinstance(value, dict):
        for key in _OUTPUT_KEYS:
            if _is_float(value.get(key)):
                return value[key]
    return first_float(value)


def main_input(args, kwargs):
    """Where a module's main input is: ("arg", i) for the first floating positional tensor, else
    ("kw", name) for the first floating keyword tensor (hidden_states=...); None if neither."""
    for i, arg in enumerate(args):
        if _is_float(arg):
            return ("arg", i), arg
    for name, arg in kwargs.items():
        if _is_float(arg):
            return ("kw", name), arg
    return None, None


def call_with(module, call, new_input):
    """The module called as recorded, with its main input replaced."""
    args, kwargs = list(call.args), dict(call.kwargs)
    kind, key = call.where
    if kind == "arg":
        args[key] = new_input
    else:
        kwargs[key] = new_input
    return module(*args, **kwargs)


class Call:
    """A module's first call in a forward: its arguments, output, where its main input is,
    when it began and ended (a counter over every recorded call) and the modules it ran in."""

    def __init__(self, args, kwargs, began, parents):
        self.args, self.kwargs, self.began, self.parents = args, kwargs, began, parents
        self.where, self.input = main_input(args, kwargs)
        self.output, self.ended, self.count = None, None, 1


class Recorder:
    """Records the calls of `modules` during the forwards run inside it, by wrapping each one's
    forward for the duration (forward hooks in PyTorch 1.13 do not see keyword arguments)."""

    def __init__(self, modules):
        self.modules = list(dict.fromkeys(modules))
        self.calls, self.stack, self.saved = {}, [], {}
        self.counter = itertools.count()

    def __enter__(self):
        for module in self.modules:
            if isinstance(module, torch.jit.ScriptModule):
                continue
            self.saved[module] = module.__dict__.get("forward")
            module.forward = self._wrap(module, module.forward)
        return self

    def __exit__(self, *exc):
        for module, own in self.saved.items():
            if own is None:
                del module.forward
            else:
                module.forward = own
        return False

    def _wrap(self, module, original):
        def recorded(*args, **kwargs):
            call = self.calls.get(module)
            if call is None:
                call = Call(args, kwargs, next(self.counter), tuple(self.stack))
                self.calls[module] = call
            else:
                call.count += 1
            self.stack.append(module)
            try:
                output = original(*args, **kwargs)
            finally:
                self.stack.pop()
            if call.output is None:
                call.output, call.ended = output, next(self.counter)
            return output
        return recorded

    def clear(self):
        self.calls, self.counter = {}, itertools.count()


def _is_addnorm_fused(module):
    from ._torch_modules import AddNorm  # the fused box: two inputs, known placement
    return isinstance(module, AddNorm)


def _tolerance(dtype):
    return max(1e-4, 8 * torch.finfo(dtype).eps)


def same(a, b, dtype):
    """a and b equal within what the dtype's rounding explains (relative to b's scale)."""
    if a is None or b is None or a.shape != b.shape:
        return False
    scale = b.float().abs().max().clamp_min(1e-30)
    return bool(((a.float() - b.float()).abs().max() / scale) <= _tolerance(dtype))


def _per_row(x, values):
    """A tensor of x's shape but a last dimension of 1 cycling through `values` row by row."""
    rows = x.numel() // x.shape[-1]
    pattern = torch.tensor(values, dtype=torch.float32)[torch.arange(rows) % len(values)]
    return pattern.reshape(*x.shape[:-1], 1).to(device=x.device, dtype=x.dtype)


class NormInfo:
    """A module found to be a norm: its kind ("layer_norm": centres and scales each row,
    "rms_norm": scales only) and how it was recognised."""

    def __init__(self, kind, how):
        self.kind, self.how = kind, how


def _norm_kind(module, call):
    """layer_norm / rms_norm when the module behaves as a row norm at its recorded input, else
    None. A row norm's output does not change when each row (last dimension) is scaled by its
    own power of two, but does change when the input does otherwise; a centring one ignores a
    shift of each row too. The input is first brought to RMS >= 1 by a power of two, so that
    eps (which matters only for rows of tiny variance) cannot hide a norm."""
    x = call.input
    if x is None or x.dim() == 0 or x.shape[-1] < 2:
        return None
    size = float(x.detach().float().pow(2).mean().sqrt())
    if not 0.0 < size < float("inf"):
        return None
    exponent = max(0, -int(torch.tensor(size).log2().floor()))
    x0 = (x.detach() * 2.0 ** exponent)

    def run(value):
        try:
            return first_float(call_with(module, call, value))
        except Exception:  # noqa: BLE001 - a module that cannot take the probe is no norm
            return None

    y0 = run(x0)
    if y0 is None or y0.shape != x0.shape or not bool(torch.isfinite(y0).all()):
        return None
    dtype = y0.dtype
    if not same(run(x0 * _per_row(x0, _ROW_SCALES)), y0, dtype):
        return None
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(x0.shape, generator=generator).to(device=x0.device, dtype=x0.dtype)
    if same(run(x0 + noise), y0, dtype):  # does not depend on its input at all
        return None
    return "layer_norm" if same(run(x0 + _per_row(x0, _ROW_SHIFTS)), y0, dtype) else "rms_norm"


def find_norms(model, calls):
    """The row norms among the model's modules, recognised by behaviour at the input each got
    in the surveyed forward (not by class: a hand-written RMSNorm is found as torch's LayerNorm
    is). addnorm.torch.AddNorm, which takes two inputs, is known by its class. BatchNorm in eval
    mode normalises with fixed statistics and GroupNorm not by rows, so neither is listed."""
    norms = {}
    with torch.no_grad():
        for module in model.modules():
            call = calls.get(module)
            if call is None:
                continue
            if _is_addnorm_fused(module):
                norms[module] = NormInfo(module.norm, "addnorm.torch.AddNorm")
            elif not any(True for _ in module.children()):
                kind = _norm_kind(module, call)
                if kind is not None:
                    norms[module] = NormInfo(kind, "output unchanged when each row is scaled" +
                                             (" or shifted" if kind == "layer_norm" else ""))
    return norms


def _chain_problem(members, calls):
    """Why `members` (in call order) are not a stack of blocks, or None: each must run once,
    keep its input's shape, and take the previous one's output as its input."""
    previous = None
    for name, module in members:
        call = calls.get(module)
        if call is None:
            return f"{name} did not run in the forward"
        output = first_float(call.output)
        if call.input is None or output is None:
            return f"{name} has no floating-point tensor in and out"
        if output.shape != call.input.shape:
            return f"{name} changes its input's shape {tuple(call.input.shape)} to " \
                   f"{tuple(output.shape)}"
        if previous is not None and not (call.input is previous or (
                call.input.shape == previous.shape and torch.equal(call.input, previous))):
            return f"{name} does not take the previous block's output as its input"
        previous = output
    return None


def in_call_order(members, calls):
    return sorted(members, key=lambda item: calls[item[1]].began if item[1] in calls else 1e18)


def find_blocks(model, norms, calls, names=None):
    """The model's blocks as (name, module) in the order they run. With `names` (module names as
    in model.named_modules(), or the name of one ModuleList/Sequential holding them), those;
    else the largest group of two or more children of one class in a ModuleList or Sequential
    that form a chain (each takes the previous one's output, shape kept), preferring groups
    whose members contain a norm."""
    named = dict(model.named_modules())
    if names is not None:
        if isinstance(names, str):
            names = [names]
        names = list(names)
        if len(names) == 1 and isinstance(named.get(names[0]),
                                          (torch.nn.ModuleList, torch.nn.Sequential)):
            prefix = names[0]
            names = [f"{prefix}.{child}" for child in named[prefix]._modules]
        missing = [name for name in names if name not in named]
        if missing:
            raise ValueError(f"blocks names {missing!r}, which are not modules of the model; "
                             "expected names from model.named_modules(), e.g. "
                             f"{_examples(named)}")
        chosen = in_call_order([(name, named[name]) for name in names], calls)
        idle = [name for name, module in chosen if module not in calls]
        if idle:
            raise ValueError(f"blocks {idle!r} did not run in the forward; name the blocks the "
                             "model calls")
        return chosen
    best, best_key, rejected = None, None, []
    for prefix, container in named.items():
        if not isinstance(container, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        entries = list(container._modules.items())
        groups = {}
        for name, child in entries:
            groups.setdefault(type(child), []).append((f"{prefix}.{name}" if prefix else name,
                                                       child))
        for group in groups.values():
            if len(group) < 2 or not any(True for _, c in group for _ in c.parameters()):
                continue
            where = prefix or "the model"
            if len({id(child) for _, child in group}) < len(group):
                rejected.append(f"{where}: one module repeated (shared weights); name the "
                                "blocks to measure such a model")
                continue
            ordered = in_call_order(group, calls)
            problem = _chain_problem(ordered, calls)
            if problem is not None:
                rejected.append(f"{where}: {problem}")
                continue
            with_norm = any(m in norms for _, child in group for m in child.modules())
            key = (with_norm, len(group))
            if best_key is None or key > best_key:
                best, best_key = ordered, key
    if best is None:
        why = ("; ".join(rejected[:3]) + ". ") if rejected else ""
        raise ValueError(
            f"cannot find the blocks of {type(model).__name__}: no ModuleList or Sequential in it "
            "holds two or more children of one class that run one after the other, each on the "
            f"previous one's output. {why}Name them: diagnose(model, batch, blocks=['layers.0', "
            f"'layers.1', ...]) or blocks='layers' (module names from model.named_modules(), "
            f"e.g. {_examples(named)})")
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
    samples. The residual is |X - 1 x^T|_F / |X|_F with x the tokens' mean: the distance to the
    nearest matrix whose rows (tokens) are all equal, relative to X; 0 when every token is the
    same vector (rank collapse), near 1 for spread ones."""
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


def shortcut_share(block, call, seed):
    """cos(f(x + d) - f(x), d) for a small random d: how much of a change to the block's input
    passes straight through. A residual block passes d itself (pre-norm: d + branch'(x) d;
    post-norm: the norm's Jacobian applied to that), a block without one only branch'(x) d, a
    random direction nearly orthogonal to d. The block is called as the model called it."""
    x = call.input
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(x.shape, generator=generator).to(device=x.device, dtype=x.dtype)
    sixteen_bit = torch.finfo(x.dtype).bits <= 16
    d = noise * ((0.1 if sixteen_bit else 1e-3) * max(rms(x), 1e-12))
    with torch.no_grad():
        base = first_float(call_with(block, call, x))
        moved = first_float(call_with(block, call, x + d))
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
        pre = pre or same(norm_input, block_input, dtype)
        post = post or same(norm_output, block_output, dtype)
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
