"""addnorm.torch.diagnose: the lab's Add & Norm measurements on a user's own PyTorch model.

The lab (docs/lab.md) measures on its own stacks how the gradient reaches the bottom block, how
the residual stream grows with depth, whether tokens collapse toward one direction and how far
one optimiser step moves the output. diagnose() measures the same on any model, by recording
its modules' calls, and puts each number beside what the lab found for stacks of the same
placement and depth.
"""
import inspect
import math

import torch

from . import _diagnose_probe as probe
from ._diagnose_report import Diagnosis


class _Preserved:
    """Puts the model back exactly as it was: parameter and buffer values (bit for bit), each
    parameter's .grad object and requires_grad flag, every module's training flag, and torch's
    global RNG states (CPU, and CUDA where present)."""

    def __init__(self, model):
        self.model = model

    def __enter__(self):
        self.parameters = [(p, p.detach().clone(), p.grad, p.requires_grad)
                           for p in self.model.parameters()]
        self.buffers = [(b, b.detach().clone()) for b in self.model.buffers()]
        self.modes = [(m, m.training) for m in self.model.modules()]
        self.rng = torch.get_rng_state()
        self.cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        return self

    def trainable(self):
        """The floating-point parameters the user trains (requires_grad as given)."""
        return [p for p, _, _, flag in self.parameters if flag and p.is_floating_point()]

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
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state_all(self.cuda_rng)
        return False


def _random_like(tensor, generator):
    """N(0, 1) of tensor's shape, drawn on the CPU from `generator` (so the draw is the same on
    every device), then moved to tensor's device in float32."""
    return torch.randn(tensor.shape, generator=generator).to(tensor.device)


def _readout_loss(output, seed):
    """The default loss: a fixed random linear readout of the output, sum(out * g) / sqrt(n)
    with g ~ N(0, 1) from `seed`. Its gradient with respect to the output does not depend on the
    output's scale, so what reaches each block is the model's doing, not the loss's."""
    g = _random_like(output, torch.Generator().manual_seed(seed))
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


def _output_of(model, batch):
    output = probe.model_output(probe.forward(model, batch))
    if output is None:
        raise ValueError("the model's output holds no floating-point tensor; diagnose needs one "
                         "(a tensor, or a tuple or dict holding one: logits first)")
    return output


def _norm_record(module, call):
    """(input, output) of a norm's call: the fused AddNorm normalises x + branch."""
    if probe._is_addnorm_fused(module) and len(call.args) > 1:
        output = call.output[1] if isinstance(call.output, tuple) else call.output
        return (call.args[0] + call.args[1]).detach(), output.detach()
    output = probe.first_float(call.output)
    return call.input.detach(), None if output is None else output.detach()


def _measure(model, batch, loss_fn, blocks, norms, names, optimizer, lr, seed, saved):
    """One model at one batch: the per-block measures and the update sizes."""
    parameters = [p for p in model.parameters() if p.is_floating_point()]
    for parameter in parameters:
        parameter.grad = None
    block_modules = [block for _, block in blocks]
    with probe.Recorder(block_modules + list(norms)) as recorder:
        output = _output_of(model, batch)
    calls = recorder.calls
    loss = loss_fn(output, batch) if loss_fn is not None else _readout_loss(output, seed)
    if not torch.is_tensor(loss) or loss.numel() != 1:
        raise ValueError("loss_fn returned no scalar tensor; expected loss_fn(output, batch) "
                         "to return one")
    loss.float().backward()
    per_block = []
    for index, (name, block) in enumerate(blocks):
        call = calls.get(block)
        x_out = probe.first_float(call.output) if call else None
        if call is None or call.input is None or x_out is None:
            raise ValueError(f"block {name} did not run in this forward, or had no floating-point "
                             "tensor in and out; name the blocks the model calls with blocks=")
        grads = [p.grad.float().pow(2).sum() for p in block.parameters() if p.grad is not None]
        x_in, x_out = call.input.detach(), x_out.detach()
        cosine, residual = probe.token_geometry(x_out, probe.batch_first_of(block))
        same_shape = x_in.shape == x_out.shape
        shortcut = probe.shortcut_share(block, call, seed + index) if same_shape else math.nan
        records = []  # (module, input, output) of the block's norms, in call order
        for module in sorted((m for m in norms if m in calls and block in calls[m].parents),
                             key=lambda m: calls[m].began):
            norm_in, norm_out = _norm_record(module, calls[module])
            if norm_out is not None:
                records.append((module, norm_in, norm_out))
        per_block.append({
            "name": name,
            "grad_norm": float(torch.stack(grads).sum().sqrt()) if grads else 0.0,
            "stream_rms_in": probe.rms(x_in),
            "stream_rms_out": probe.rms(x_out),
            "token_cosine": cosine,
            "relative_residual": residual,
            "shortcut": shortcut,
            "calls": call.count,
            "placement": probe.placement_of(block, records, x_in, x_out, x_out.dtype,
                                            shortcut if same_shape else 1.0),
            "norms": [{"name": names[module], "kind": norms[module].kind,
                       "input_rms": probe.rms(norm_in), "output_rms": probe.rms(norm_out)}
                      for module, norm_in, norm_out in records],
        })
    # The one-step change: every output from the same kind of forward (no autograd), since
    # PyTorch may take other paths without it (TransformerEncoder's nested tensors). The step
    # moves the parameters the user trains (all of them when none is trainable).
    with torch.no_grad():
        before = _output_of(model, batch).detach().clone()
    trainable = [p for p in saved.trainable() if p.grad is not None] or \
        [p for p in parameters if p.grad is not None]
    _optimizer_for(optimizer, trainable, lr).step()
    with torch.no_grad():
        after = _output_of(model, batch)
        deltas = [(p, p.detach() - value) for p, value, _, _ in saved.parameters
                  if p.is_floating_point()]
        saved.restore_values()
        generator = torch.Generator().manual_seed(seed + 1_000_003)
        for parameter, delta in deltas:
            size = float(delta.float().norm())
            if size > 0:
                r = _random_like(delta, generator)
                parameter.add_((r * (size / float(r.norm()))).to(parameter.dtype))
        perturbed = _output_of(model, batch)
        saved.restore_values()
    for parameter in parameters:
        parameter.grad = None
    return {
        "blocks": per_block,
        "output_change": _relative(after, before),
        "perturbation_change": _relative(perturbed, before),
    }


def diagnose(model, batch, loss_fn=None, *, batches=None, blocks=None, optimizer=None, lr=1e-3,
             seed=0):
    """The lab's Add & Norm measurements on a PyTorch model, beside the lab's own results.

    model: an nn.Module, or a list of them (several seeds of one architecture).
    batch: what the model takes: a tensor, a tuple (positional arguments) or a dict (keywords).
    batches: more batches (a list of such); every (model, batch) pair is measured and each
        figure is reported as median and interquartile range over them.
    loss_fn(output, batch) -> scalar tensor; default: a fixed random linear readout of the
        output (its gradient does not depend on the output's scale). The output is the model's
        tensor, or a dict's logits / last_hidden_state, or the first floating tensor.
    blocks: the blocks' module names (or the name of the ModuleList/Sequential holding them);
        default: the largest group of repeated children that run one after the other.
    optimizer: for the one-step update size: None (Adam at lr), a torch.optim class, or a
        function of the parameters returning an optimiser. A fresh one steps the parameters
        that require grad (all, when none does); the model is put back after the step.
    seed: the readout's, the perturbation's and the shortcut probe's random draws.

    Measured in eval mode (dropout off) with gradients on, whatever the caller's grad mode;
    afterwards the model's parameters, buffers, gradients, requires_grad flags, training modes
    and torch's RNG states are as they were. Returns a Diagnosis: .table() (text), .to_dict()
    (JSON), .plot(path) (matplotlib).
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    if batches is not None and not isinstance(batches, (list, tuple)):
        raise TypeError(f"batches is a {type(batches).__name__}, expected a list of batches")
    every_batch = [batch] + list(batches or [])
    return diagnose_pairs([(m, every_batch) for m in models], loss_fn, blocks=blocks,
                          optimizer=optimizer, lr=lr, seed=seed)


def _scripted(model):
    """The names of model's TorchScript submodules (torch.jit.script or trace): their calls
    cannot be recorded, since the Recorder wraps each module's Python forward and a
    ScriptModule's forward is compiled."""
    scripted = [name for name, module in model.named_modules()
                if name and isinstance(module, torch.jit.ScriptModule)]
    # The outermost only: a scripted module's children are scripted with it.
    return [name for name in scripted
            if not any(name.startswith(outer + ".") for outer in scripted)]


def _survey(model, batch, blocks):
    """One forward with every module's first call recorded, then the norms and blocks."""
    with probe.Recorder(model.modules()) as recorder:
        _output_of(model, batch)
    norms = probe.find_norms(model, recorder.calls)
    try:
        found = probe.find_blocks(model, norms, recorder.calls, blocks)
    except ValueError as error:
        scripted = _scripted(model)
        if not scripted:
            raise
        shown = ", ".join(repr(name) for name in scripted[:4]) + (", ..." if scripted[4:] else "")
        raise ValueError(f"{error}. TorchScript modules cannot be measured, their calls are "
                         f"not recorded: {shown}; pass the eager modules they were made "
                         "from") from None
    return norms, found, recorder.calls


def diagnose_pairs(pairs, loss_fn=None, *, blocks=None, optimizer=None, lr=1e-3, seed=0):
    """diagnose() over explicit (model, [batches]) pairs: each model is measured at its own
    batches (the command line's --seeds builds model and batch together for each seed)."""
    if not pairs or not all(isinstance(m, torch.nn.Module) for m, _ in pairs):
        raise TypeError("model is not an nn.Module (or a list of them)")
    if any(isinstance(m, torch.jit.ScriptModule) for m, _ in pairs):
        raise TypeError("model is a TorchScript module (torch.jit.script or trace), expected "
                        "the eager nn.Module it was made from: diagnose records each "
                        "submodule's calls by wrapping its Python forward, which a compiled "
                        "module does not have")
    runs, structure = [], None
    for model_index, (one_model, batches) in enumerate(pairs):
        with _Preserved(one_model) as saved, torch.enable_grad():
            one_model.eval()
            # Gradients everywhere: they are measured, and PyTorch's fused inference paths
            # (which skip the submodules' calls) stay off.
            for parameter in one_model.parameters():
                if parameter.is_floating_point():
                    parameter.requires_grad_(True)
            norms, found, calls = _survey(one_model, batches[0], blocks)
            module_names = {module: name for name, module in one_model.named_modules()}
            names = {module: module_names.get(module, type(module).__name__) for module in norms}
            last_block_end = max(calls[block].ended for _, block in found)
            outside = [module for module in norms
                       if not any(module in block.modules() for _, block in found)]
            if structure is None:
                structure = {
                    "model": type(one_model).__name__,
                    "blocks": [name for name, _ in found],
                    "norms": {names[module]: {"kind": info.kind, "recognised_by": info.how}
                              for module, info in norms.items()},
                    "outside_blocks": sorted(names[module] for module in outside),
                    "after_blocks": sorted(names[module] for module in outside
                                           if calls[module].began > last_block_end),
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
