"""`python -m addnorm diagnose module:factory`: diagnose() on a model a user's function builds.

The factory is `module:function` (an importable module, the current directory included) or
`path/to/file.py:function`. It returns (model, batch) or (model, batch, loss_fn); when it takes
a `seed` argument, --seeds N calls it for seeds 0..N-1 and each model is measured at its own
batch, the figures reported as median and IQR over them."""
import argparse
import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path


def load_factory(spec):
    """The function named by 'module:function' or 'file.py:function'."""
    module_name, separator, function_name = spec.rpartition(":")
    if not separator or not module_name or not function_name:
        raise ValueError(f"factory is {spec!r}, expected 'module:function' or "
                         "'path/to/file.py:function'")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise ValueError(f"factory file {module_name!r} does not exist")
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except ValueError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's module: report it, do not trace back
        raise ValueError(f"factory {spec!r}: importing {module_name} raised "
                         f"{type(error).__name__}: {error}") from error
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"factory {spec!r}: {module_name} has no function {function_name!r}")
    return function


def _build(factory, seed):
    takes_seed = "seed" in inspect.signature(factory).parameters
    try:
        made = factory(seed=seed) if takes_seed else factory()
    except Exception as error:  # noqa: BLE001 - the user's code: report it, do not trace back
        raise ValueError(f"the factory raised {type(error).__name__}: {error}") from error
    if isinstance(made, list):
        made = tuple(made)
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise ValueError("the factory returned a "
                         f"{type(made).__name__}, expected (model, batch) or "
                         "(model, batch, loss_fn)")
    return made if len(made) == 3 else (*made, None)


def main(argv):
    parser = argparse.ArgumentParser(
        prog="python -m addnorm diagnose",
        description="The lab's Add & Norm measurements on your own PyTorch model: per-block "
                    "gradient norms, residual-stream growth, token collapse, one-step update "
                    "size and the placement of each norm, beside the lab's results.")
    parser.add_argument("factory", help="module:function or file.py:function returning "
                                        "(model, batch) or (model, batch, loss_fn)")
    parser.add_argument("--seeds", type=int, default=1,
                        help="call the factory with seed=0..N-1 (it must take `seed`)")
    parser.add_argument("--lr", type=float, default=1e-3,
                        help="Adam's step size for the one-step update (default 1e-3)")
    parser.add_argument("--blocks", nargs="+", default=None,
                        help="the blocks' module names, or the ModuleList holding them")
    parser.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    parser.add_argument("--plot", metavar="FILE", help="draw the figure (.png, .svg, .pdf)")
    args = parser.parse_args(argv)
    if not 1 <= args.seeds <= 64:
        parser.error(f"--seeds is {args.seeds}, expected 1..64")
    if not 0 < args.lr <= 1:
        parser.error(f"--lr is {args.lr}, expected a value in (0, 1]")
    if args.json and not Path(args.json).resolve().parent.is_dir():
        parser.error(f"--json {args.json}: the folder {Path(args.json).parent} does not exist")
    if args.plot:
        if not Path(args.plot).resolve().parent.is_dir():
            parser.error(f"--plot {args.plot}: the folder {Path(args.plot).parent} does not exist")
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib.backend_bases import FigureCanvasBase
        formats = FigureCanvasBase.get_supported_filetypes()
        if Path(args.plot).suffix.lstrip(".").lower() not in formats:
            parser.error(f"--plot {args.plot}: expected a file ending in one of "
                         f"{', '.join('.' + f for f in sorted(formats))}")
    from ._diagnose import diagnose_pairs  # noqa: E402 - torch only when asked
    try:
        factory = load_factory(args.factory)
        if args.seeds > 1 and "seed" not in inspect.signature(factory).parameters:
            raise ValueError(f"--seeds {args.seeds} needs a factory with a `seed` argument")
        built = [_build(factory, seed) for seed in range(args.seeds)]
        loss_fn = built[0][2]
        result = diagnose_pairs([(model, [batch]) for model, batch, _ in built], loss_fn,
                                blocks=args.blocks, lr=args.lr)
    except (ValueError, TypeError) as error:
        print(f"python -m addnorm diagnose: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - the model's own failure, e.g. a wrong batch
        print(f"python -m addnorm diagnose: running the model raised {type(error).__name__}: "
              f"{error}", file=sys.stderr)
        return 2
    print(result.table())
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=1, allow_nan=False))
        print(f"wrote {args.json}")
    if args.plot:
        result.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0
