"""addnorm.torch.diagnose: the lab's Add & Norm measurements on a user's own PyTorch model.

The lab (docs/lab.md) measures on its own stacks how the gradient reaches the bottom block, how
the residual stream grows with depth, whether tokens collapse toward one direction and how far
one optimiser step moves the output. diagnose() measures the same on any model, with hooks, and
puts each number beside what the lab found for stacks of the same placement and depth.
"""
import inspect
import math

import torch

from . import _diagnose_probe as probe
from ._diagnose_report import Diagnosis


class _Preserved:
    """Puts the model back exactly as it was: parameter and buffer values (bit for bit), each
    parameter's .grad object and requires_grad flag, every module's training flag, and torch's
    global RNG state."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.parameters = [(p, p.detach().clone(), p.grad, p.requires_grad)
                           for p in self.model.parameters()]
        self.buffers = [(b, b.detach().clone()) for b in self.model.buffers()]
        self.modes = [(m, m.training) for m in self.model.modules()]
        self.rng = torch.get_rng_state()
        return self

    def restore_values(self):
        with torch.no_grad():
            for parameter, value, _, _ in self.parameters:
                parameter.copy_(value)
            for buffer, value in self.buffers:
                buffer.copy_(value)

    def __exit__(self, *exc):
        self.restore_values()
        for parameter, _, grad, flag in self.parameters:
            parameter.grad = grad
            parameter.requires_grad_(flag)
        for module, mode in self.modes:
            module.training = mode
        torch.set_rng_state(self.rng)
        return False


def _readout_loss(output, seed):
    """The default loss: a fixed random linear readout of the output, sum(out * g) / sqrt(n)
    with g ~ N(0, 1) from `seed`. Its gradient with respect to the output does not depend on the
    output's scale, so what reaches each block is the model's doing, not the loss's."""
    generator = torch.Generator().manual_seed(seed)
    g = torch.randn(output.shape, generator=generator, dtype=torch.float32)
    return (output.float() * g).sum() / math.sqrt(output.numel())


def _optimizer_for(optimizer, parameters, lr):
    """A fresh optimiser over `parameters`: `optimizer` is None (Adam at lr), a torch.optim
    class, or a function of the parameters returning one. Never the user's own optimiser
    object, whose state one step would change."""
    if optimizer is None:
        return torch.optim.Adam(parameters, lr=lr)
    if inspect.isclass(optimizer) and issubclass(optimizer, torch.optim.Optimizer):
        return optimizer(parameters, lr=lr)
    if isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("optimizer is an optimiser object, expected its class (e.g. "
                        "torch.optim.AdamW) or a function of the parameters that builds one: "
                        "diagnose takes one step with a fresh one and leaves yours untouched")
    if callable(optimizer):
        return optimizer(parameters)
    raise TypeError(f"optimizer is a {type(optimizer).__name__}, expected None, a torch.optim "
                    "class or a function of the parameters")


def _relative(a, b):
    denominator = float(b.float().norm())
    return float((a.float() - b.float()).norm()) / denominator if denominator > 0 else float("nan")


class _Recorder:
    """Hooks on the blocks and norms for one forward: each block's input (and its other
    positional arguments, for the shortcut probe) and output, and each norm's input and output
    with the block it ran in."""

    def __init__(self, blocks, norms, names):
        self.blocks, self.norms, self.names = blocks, norms, names
        self.inputs, self.extra, self.outputs = {}, {}, {}
        self.norm_records = {index: [] for index in range(len(blocks))}
        self.current = []
        self.hooks = []

    def __enter__(self):
        for index, (_, block) in enumerate(self.blocks):
            self.hooks.append(block.register_forward_pre_hook(self._enter_block(index)))
            self.hooks.append(block.register_forward_hook(self._leave_block(index)))
        for module in self.norms:
            self.hooks.append(module.register_forward_hook(self._norm_ran))
        return self

    def __exit__(self, *exc):
        for hook in self.hooks:
            hook.remove()
        return False

    def _enter_block(self, index):
        def hook(module, args):
            self.current.append(index)
            if index not in self.inputs and args and torch.is_tensor(args[0]):
                self.inputs[index] = args[0].detach()
                self.extra[index] = tuple(args[1:])
        return hook

    def _leave_block(self, index):
        def hook(module, args, output):
            self.current.pop()
            tensor = probe.first_tensor(output)
            if index not in self.outputs and tensor is not None:
                self.outputs[index] = tensor.detach()
        return hook

    def _norm_ran(self, module, args, output):
        if not self.current or not args or not torch.is_tensor(args[0]):
            return
        if len(args) > 1 and torch.is_tensor(args[1]) and probe._is_addnorm_fused(module):
            norm_input = (args[0] + args[1]).detach()  # the fused box normalises x + branch
            norm_output = output[1] if isinstance(output, tuple) else output
        else:
            norm_input, norm_output = args[0].detach(), probe.first_tensor(output)
        if norm_output is not None:
            self.norm_records[self.current[-1]].append(
                (self.names.get(module, type(module).__name__), norm_input,
                 norm_output.detach()))


def _measure(model, batch, loss_fn, blocks, norms, names, optimizer, lr, seed, saved):
    """One model at one batch: the per-block measures and the update sizes."""
    parameters = [p for p in model.parameters() if p.is_floating_point()]
    for parameter in parameters:
        parameter.grad = None
        parameter.requires_grad_(True)
    with _Recorder(blocks, norms, names) as recorder:
        output = probe.first_tensor(probe.forward(model, batch))
    if output is None:
        raise ValueError("the model's output holds no tensor; diagnose needs one to measure")
    missing = [blocks[i][0] for i in range(len(blocks)) if i not in recorder.outputs]
    if missing:
        raise ValueError(f"blocks {missing!r} did not run in the forward (or gave no tensor); "
                         "name the blocks the model calls with blocks=[...]")
    loss = loss_fn(output, batch) if loss_fn is not None else _readout_loss(output, seed)
    if not torch.is_tensor(loss) or loss.numel() != 1:
        raise ValueError("loss_fn returned no scalar tensor; expected loss_fn(output, batch) "
                         "to return one")
    loss.float().backward()
    per_block = []
    for index, (name, block) in enumerate(blocks):
        grads = [p.grad.float().pow(2).sum() for p in block.parameters() if p.grad is not None]
        x_in, x_out = recorder.inputs[index], recorder.outputs[index]
        batch_first = probe.batch_first_of(block)
        cosine, residual = probe.token_geometry(x_out, batch_first)
        shortcut = probe.shortcut_share(block, x_in, recorder.extra[index], seed + index)
        records = recorder.norm_records[index]
        per_block.append({
            "name": name,
            "grad_norm": float(torch.stack(grads).sum().sqrt()) if grads else 0.0,
            "stream_rms_in": probe.rms(x_in),
            "stream_rms_out": probe.rms(x_out),
            "token_cosine": cosine,
            "relative_residual": residual,
            "shortcut": shortcut,
            "placement": probe.placement_of(block, records, x_in, x_out, x_out.dtype, shortcut),
            "norms": [{"name": norm_name, "kind": norms_kind(norms, names, norm_name),
                       "input_rms": probe.rms(norm_in), "output_rms": probe.rms(norm_out)}
                      for norm_name, norm_in, norm_out in records],
        })
    before = output.detach()
    step = _optimizer_for(optimizer, [p for p in parameters if p.grad is not None], lr)
    step.step()
    with torch.no_grad():
        after = probe.first_tensor(probe.forward(model, batch))
        deltas = [(p, p.detach() - value) for p, value, _, _ in saved.parameters
                  if p.is_floating_point()]
        saved.restore_values()
        generator = torch.Generator().manual_seed(seed + 1_000_003)
        for parameter, delta in deltas:
            size = float(delta.float().norm())
            if size > 0:
                r = torch.randn(delta.shape, generator=generator, dtype=torch.float32)
                parameter.add_((r * (size / float(r.norm()))).to(parameter.dtype))
        perturbed = probe.first_tensor(probe.forward(model, batch))
        saved.restore_values()
    for parameter in parameters:
        parameter.grad = None
    return {
        "blocks": per_block,
        "output_change": _relative(after, before),
        "perturbation_change": _relative(perturbed, before),
    }


def norms_kind(norms, names, norm_name):
    for module, info in norms.items():
        if names.get(module) == norm_name:
            return info.kind
    return "unknown"


def diagnose(model, batch, loss_fn=None, *, blocks=None, optimizer=None, lr=1e-3, seed=0):
    """The lab's Add & Norm measurements on a PyTorch model, beside the lab's own results.

    model: an nn.Module, or a list of them (several seeds of one architecture).
    batch: what the model takes (a tensor; a tuple or list passed as positional arguments; a
        dict as keywords), or a list of such batches: every (model, batch) pair is measured and
        each figure is reported as median and interquartile range over them.
    loss_fn(output, batch) -> scalar tensor; default: a fixed random linear readout of the
        output (its gradient does not depend on the output's scale).
    blocks: the blocks' module names (or the name of the ModuleList/Sequential holding them);
        default: the largest group of repeated children holding a norm.
    optimizer: for the one-step update size: None (Adam at lr), a torch.optim class, or a
        function of the parameters returning an optimiser. A fresh one is used; the model's
        parameters are put back after the step.
    seed: the readout's, the perturbation's and the shortcut probe's random draws.

    Measured in eval mode (dropout off), with gradients on; afterwards the model's parameters,
    buffers, gradients, requires_grad flags, training modes and torch's RNG state are as they
    were. Returns a Diagnosis: .table() (text), .to_dict() (JSON), .plot(path) (matplotlib).
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    batches = list(batch) if isinstance(batch, list) else [batch]
    if not batches:
        raise ValueError("batch is an empty list, expected at least one batch")
    return diagnose_pairs([(m, batches) for m in models], loss_fn, blocks=blocks,
                          optimizer=optimizer, lr=lr, seed=seed)


def diagnose_pairs(pairs, loss_fn=None, *, blocks=None, optimizer=None, lr=1e-3, seed=0):
    """diagnose() over explicit (model, [batches]) pairs: each model is measured at its own
    batches (the command line's --seeds builds model and batch together for each seed)."""
    if not pairs or not all(isinstance(m, torch.nn.Module) for m, _ in pairs):
        raise TypeError("model is not an nn.Module (or a list of them)")
    runs, structure = [], None
    for model_index, (one_model, batches) in enumerate(pairs):
        with _Preserved(one_model) as saved:
            one_model.eval()
            norms = probe.find_norms(one_model, batches[0])
            found = probe.find_blocks(one_model, norms, blocks)
            module_names = {module: name for name, module in one_model.named_modules()}
            names = {module: module_names.get(module, type(module).__name__) for module in norms}
            if structure is None:
                structure = {
                    "model": type(one_model).__name__,
                    "blocks": [name for name, _ in found],
                    "norms": {names[module]: {"kind": info.kind, "recognised_by": info.how}
                              for module, info in norms.items()},
                    "outside_blocks": sorted(
                        names[module] for module in norms
                        if not any(module in block.modules() for _, block in found)),
                }
            elif len(found) != len(structure["blocks"]):
                raise ValueError(f"model {model_index} has {len(found)} blocks, the first "
                                 f"{len(structure['blocks'])}: expected models of one "
                                 "architecture (seeds of one model)")
            for batch_index, one_batch in enumerate(batches):
                run_seed = seed + 7919 * model_index + 104729 * batch_index
                runs.append(_measure(one_model, one_batch, loss_fn, found, norms, names,
                                     optimizer, lr, run_seed, saved))
    return Diagnosis(structure, runs, {"lr": lr, "runs": len(runs), "seed": seed,
                                       "optimizer": "Adam" if optimizer is None else
                                       getattr(optimizer, "__name__", type(optimizer).__name__),
                                       "loss": "random readout" if loss_fn is None else
                                       getattr(loss_fn, "__name__", "loss_fn")})


__all__ = ["diagnose", "diagnose_pairs"]
