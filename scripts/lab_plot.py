#!/usr/bin/python3
"""Draws one `addnorm lab-run` result (its --json output) as a figure with matplotlib.

usage: lab_plot.py RESULT.json OUT.svg|OUT.png

`addnorm lab-run NAME --plot OUT.svg` calls this with the run's JSON; scripts/lab-report.sh uses
it for docs/figures/. One function per experiment, chosen by the JSON's "experiment" key. Every
figure: labelled axes with units, log scales where the values span decades, a legend, and the
spread over seeds (interquartile range) as a band where the experiment has one.
"""
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

# One colour per series name, the same in every figure, and no two names of one experiment
# sharing a colour (activation-growth's modes and the placements are both here).
COLOURS = {
    "post_norm": "tab:red",
    "pre_norm": "tab:blue",
    "deep_norm": "tab:green",
    "admin": "tab:pink",
    "no_norm": "tab:gray",
    "no_residual": "tab:purple",
    "rezero": "tab:orange",
    "bare": "black",
    "none": "tab:gray",
    "layer_norm": "tab:brown",
    "rms_norm": "tab:cyan",
}


def depth_axis(axis, depths):
    """A log2 depth axis whose ticks are the measured depths and nothing else (set after the
    scale: setting the scale replaces the ticks)."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(depths, [str(d) for d in depths])
    axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def spans_decades(values):
    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return len(positive) > 1 and max(positive) / min(positive) > 30


def band(axis, x, spreads, colour):
    """The interquartile range over seeds as a shaded band."""
    if not spreads or spreads[0].get("seeds", 0) < 2:
        return
    axis.fill_between(x, [s["q25"] for s in spreads], [s["q75"] for s in spreads],
                      color=colour, alpha=0.2, linewidth=0)


def gradient_flow(result, figure):
    params = result["params"]
    stacks = result["stacks"]
    axes = figure.subplots(1, len(stacks), squeeze=False)[0]
    for axis, stack in zip(axes, stacks):
        k = list(range(stack["depth"] + 1))
        for key, label, colour in (("without_residual", "y = W x", "tab:red"),
                                   ("with_residual", "y = x + W x", "tab:blue")):
            axis.plot(k, stack[key], color=colour, marker=".",
                      label=f"{label}, default_rng({params['seed']})")
            axis.plot(k, stack["expected_" + key], color=colour, linestyle=":",
                      label=f"{label}, theory (RMS)")
            spreads = stack.get("spread_" + key, [])
            if spreads:
                axis.plot(k, [s["median"] for s in spreads], color=colour, linestyle="--",
                          label=f"{label}, median of {spreads[0]['seeds']} other seeds")
                band(axis, k, spreads, colour)
        axis.set_yscale("log")
        axis.set_xlabel("layers passed, from the top")
        axis.set_ylabel("gradient norm |g| (unitless)")
        axis.set_title(f"{stack['depth']} layers, width {params['width']}")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)


def activation_growth(result, figure):
    axis = figure.subplots()
    params = result["params"]
    values = []
    for curve in result["curves"]:
        layers = list(range(len(curve["std"])))
        colour = COLOURS.get(curve["mode"])
        axis.plot(layers, curve["std"], marker=".", color=colour, label=curve["mode"])
        band(axis, layers, curve.get("std_spread", []), colour)
        values += curve["std"]
    if spans_decades(values):
        axis.set_yscale("log")
    axis.set_xlabel("layer")
    axis.set_ylabel("std of the activations (unitless)")
    axis.set_title(f"activation growth: width {params['width']}, gain {params['gain']}")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()


def norm_steps(result, figure):
    steps = result["steps"]
    axes = figure.subplots(1, len(steps), squeeze=False, sharey=True)[0]
    for axis, step in zip(axes, steps):
        values = step["values"]
        axis.bar(range(len(values)), values, color="tab:blue")
        axis.axhline(0.0, color="black", linewidth=0.5)
        axis.set_title(f"{step['name']}\nmean {step['mean']:.3g}, std {step['std']:.3g}",
                       fontsize=8)
        axis.set_xlabel("feature index")
    axes[0].set_ylabel("value (unitless)")


def batch_vs_layer(result, figure):
    left, right = figure.subplots(1, 2)
    sizes = result["batch_sizes"]
    x = [e["batch_size"] for e in sizes]
    left.plot(x, [e["batch_norm_padded"] for e in sizes], marker="o", color="tab:red",
              label="batch norm, padding counted")
    left.plot(x, [e["batch_norm_real"] for e in sizes], marker="o", color="tab:orange",
              label="batch norm, real tokens only")
    left.plot(x, [e["layer_norm"] for e in sizes], marker="o", color="tab:blue",
              label="layer norm")
    left.set_xscale("log", base=2)
    left.set_xlabel("sentences in the batch")
    left.set_ylabel("max |output - output alone| for sentence 0")
    left.set_title("sentence 0's output depends on its batch-mates")
    left.legend(fontsize=7)
    left.grid(True, alpha=0.3)
    modes = result["modes"]
    names = ["batch norm\nin batch", "batch norm\nalone", "layer norm"]
    gaps = [modes["batch_norm_in_batch"], modes["batch_norm_alone"], modes["layer_norm"]]
    right.bar(names, gaps, color=["tab:red", "tab:orange", "tab:blue"])
    right.set_ylabel("max |inference - training output|")
    right.set_title("training vs inference mode")


def init_gradients(result, figure):
    params = result["params"]
    left, middle, right = figure.subplots(1, 3)
    by_placement = {}
    for stack in result["stacks"]:
        by_placement.setdefault(stack["placement"], []).append(stack)
    for placement, stacks in by_placement.items():
        colour = COLOURS.get(placement)
        depths = [s["depth"] for s in stacks]
        spreads = [s["top_ffn_grad"] for s in stacks]
        left.plot(depths, [s["median"] for s in spreads], marker="o", color=colour,
                  label=placement)
        band(left, depths, spreads, colour)
        if placement == "pre_norm" and len(depths) > 1:
            # Xiong et al.: pre-norm's gradient shrinks like 1 / sqrt(L).
            first = spreads[0]["median"]
            left.plot(depths, [first * math.sqrt(depths[0] / d) for d in depths], color=colour,
                      linestyle=":", label="1/sqrt(L) from the first depth")
        depth_axis(left, depths)
        deepest = stacks[-1]
        blocks = list(range(deepest["depth"]))
        middle.plot(blocks, deepest["ffn_grad_norm"], color=colour,
                    label=f"{placement}, {deepest['depth']} blocks")
        cosine = deepest.get("token_cosine", [])
        right.plot(range(len(cosine)), cosine, color=colour, label=placement)
    left.set_yscale("log")
    left.set_xlabel("depth L (blocks)")
    left.set_ylabel("top block's FFN |grad| at init")
    left.set_title(f"median and IQR over {params['seeds']} seeds", fontsize=9)
    middle.set_yscale("log")
    middle.set_xlabel("block (0 = bottom)")
    middle.set_ylabel("FFN weight |grad| (mean over seeds)")
    middle.set_title("per block, deepest stack", fontsize=9)
    right.set_xlabel("after block (0 = embedded input)")
    right.set_ylabel("mean cosine between tokens")
    right.set_ylim(-0.1, 1.05)
    right.set_title("token similarity (rank collapse)", fontsize=9)
    for axis in (left, middle, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)


def depth_training(result, figure):
    left, right = figure.subplots(1, 2)
    groups = {}
    for run in result["runs"]:
        key = (run["placement"], run["depth"], run["warmup"])
        groups.setdefault(key, []).append(run["loss"])
    depths = sorted({key[1] for key in groups})
    styles = {False: "-", True: "--"}
    for (placement, depth, warmup), curves in groups.items():
        length = min(len(c) for c in curves)
        steps = list(range(1, length + 1))
        columns = [sorted(c[i] for c in curves) for i in range(length)]
        median = [col[len(col) // 2] if len(col) % 2 else 0.5 * (col[len(col) // 2 - 1] +
                                                                 col[len(col) // 2])
                  for col in columns]
        axis = left if depth == depths[-1] else right
        colour = COLOURS.get(placement)
        axis.plot(steps, median, color=colour, linestyle=styles[warmup],
                  label=f"{placement}, {'warmup' if warmup else 'constant lr'}")
        if len(curves) > 1:
            axis.fill_between(steps, [col[len(col) // 4] for col in columns],
                              [col[(3 * len(col)) // 4 if len(col) > 3 else -1] for col in columns],
                              color=colour, alpha=0.12, linewidth=0)
    for axis, depth in ((left, depths[-1]), (right, depths[0])):
        axis.axhline(result["chance_loss"], color="black", linewidth=0.7, linestyle=":",
                     label="chance, ln(symbols)")
        axis.set_xlabel("optimiser step")
        axis.set_ylabel("training loss (nats per answer token)")
        axis.set_title(f"depth {depth}: median over seeds, band = quartiles", fontsize=9)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=7)


def update_size(result, figure):
    params = result["params"]
    lrs = params["lrs"]
    axes = figure.subplots(1, len(lrs), squeeze=False)[0]
    for axis, lr in zip(axes, lrs):
        by_placement = {}
        for stack in result["stacks"]:
            if stack["lr"] == lr:
                by_placement.setdefault(stack["placement"], []).append(stack)
        values = []
        for placement, stacks in by_placement.items():
            colour = COLOURS.get(placement)
            depths = [s["depth"] for s in stacks]
            spreads = [s["output_change_spread"] for s in stacks]
            axis.plot(depths, [s["median"] for s in spreads], marker="o", color=colour,
                      label=placement)
            band(axis, depths, spreads, colour)
            values += [s["q75"] for s in spreads] + [s["q25"] for s in spreads]
        depth_axis(axis, depths)
        if spans_decades(values):
            axis.set_yscale("log")
        axis.set_xlabel("depth L (blocks)")
        axis.set_ylabel("RMS(output change) / RMS(output)")
        axis.set_title(f"{params['mode']}, lr {lr:g}: median and IQR over {params['seeds']} seeds",
                       fontsize=9)
        axis.grid(True, which="both", alpha=0.3)
        # Below the axes, so that no legend covers a band.
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                    ncols=len(by_placement))


def rank_collapse(result, figure):
    params = result["params"]
    left, right = figure.subplots(1, 2)
    for curve in result["curves"]:
        colour = COLOURS.get(curve["placement"])
        blocks = list(range(len(curve["residual"])))
        left.plot(blocks, [s["median"] for s in curve["residual"]], marker=".", color=colour,
                  label=curve["placement"])
        band(left, blocks, curve["residual"], colour)
        right.plot(blocks, [s["median"] for s in curve["cosine"]], marker=".", color=colour,
                   label=curve["placement"])
        band(right, blocks, curve["cosine"], colour)
    left.set_yscale("log")
    left.axhline(result["collapsed_below"], color="black", linewidth=0.7, linestyle=":")
    left.annotate(f"collapsed: below {result['collapsed_below']:g}",
                  (0, result["collapsed_below"]), xytext=(2, 3), textcoords="offset points",
                  fontsize=7)
    # Just below the collapsed stacks' float32 floor (5e-8 to 1e-7 here), where no curve goes.
    left.axhline(3e-8, color="gray", linewidth=0.7, linestyle="--")
    left.annotate("float32 rounding (5e-8 to 1e-7 above this line): zero for all purposes",
                  (0, 3e-8), xytext=(2, -10), textcoords="offset points", fontsize=7,
                  color="gray")
    left.set_ylim(bottom=5e-9)
    left.set_xlabel("after block (0 = the random input)")
    left.set_ylabel("relative residual ||X - 1 mean(X)|| / ||X||")
    right.set_xlabel("after block (0 = the random input)")
    right.set_ylabel("mean cosine between tokens")
    right.set_ylim(-0.1, 1.05)
    title = (f"{params['depth']} attention-only blocks, d_model {params['d_model']}: median and "
             f"IQR over {params['seeds']} seeds")
    left.set_title(title, fontsize=9)
    right.set_title("token similarity", fontsize=9)
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=7, loc="lower right")


def schedule_label(cell):
    return "constant" if cell["schedule"] == "constant" else f"{cell['schedule']} {cell['warmup_steps']}"


def trainability_map(result, figure):
    """A heat map per placement: rows depth x schedule, columns peak lr, colour the median
    held-out loss (one shared scale, chance at the top), text the seeds that trained."""
    params = result["params"]
    placements = [p for p in params["placements"] if any(c["placement"] == p for c in result["cells"])]
    axes = figure.subplots(1, len(placements), squeeze=False, sharey=True)[0]
    schedules = []
    for c in result["cells"]:
        if schedule_label(c) not in schedules:
            schedules.append(schedule_label(c))
    rows = [(d, s) for d in params["depths"] for s in schedules]
    lrs = params["lrs"]
    chance = result["chance_loss"]
    image = None
    for axis, placement in zip(axes, placements):
        grid = [[float("nan")] * len(lrs) for _ in rows]
        for c in result["cells"]:
            if c["placement"] != placement:
                continue
            r = rows.index((c["depth"], schedule_label(c)))
            # A cell whose median is not finite (a diverged seed) comes as null: drawn blank.
            value = c["final_loss"]["median"]
            value = float("nan") if value is None else value
            grid[r][lrs.index(c["lr"])] = value
            axis.text(lrs.index(c["lr"]), r, f"{c['trained']}/{c['seeds']}", ha="center",
                      va="center", fontsize=8,
                      # viridis is dark at 0 and bright at chance
                      color="black" if value == value and value > 0.6 * chance else "white")
        image = axis.imshow(grid, cmap="viridis", vmin=0.0, vmax=chance, aspect="auto")
        axis.set_xticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
        axis.set_xlabel("peak learning rate")
        axis.set_title(placement, fontsize=9, color=COLOURS.get(placement, "black"))
        for boundary in range(len(schedules), len(rows), len(schedules)):
            axis.axhline(boundary - 0.5, color="white", linewidth=1.5)
    axes[0].set_yticks(range(len(rows)), [f"L = {d}, {s}" for d, s in rows])
    colourbar = figure.colorbar(image, ax=list(axes), shrink=0.9)
    colourbar.set_label(f"held-out loss, median of {params['seeds']} seeds (top: chance)\n"
                        f"text: seeds that trained (loss < {params['target_loss']:g}), "
                        f"{params['steps']} Adam steps, task {params['task']}", fontsize=8)


PLOTTERS = {
    "gradient-flow": (gradient_flow, (11, 4)),
    "activation-growth": (activation_growth, (7, 4.5)),
    "norm-steps": (norm_steps, (11, 3.5)),
    "batch-vs-layer": (batch_vs_layer, (11, 4)),
    "init-gradients": (init_gradients, (14, 4.2)),
    "depth-training": (depth_training, (12, 4.2)),
    "update-size": (update_size, (11, 4.6)),
    "rank-collapse": (rank_collapse, (12, 4.2)),
    "trainability-map": (trainability_map, (14, 4.6)),
}


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: lab_plot.py RESULT.json OUT.svg|OUT.png")
    with open(argv[1], encoding="utf-8") as source:
        result = json.load(source)
    name = result.get("experiment")
    if name not in PLOTTERS:
        sys.exit(f"lab_plot.py: experiment is {name!r}, expected one of {', '.join(PLOTTERS)}")
    if not argv[2].endswith((".svg", ".png")):
        sys.exit(f"lab_plot.py: output is {argv[2]!r}, expected a .svg or .png file")
    plot, size = PLOTTERS[name]
    figure = plt.figure(figsize=size, layout="constrained")
    figure.suptitle(f"addnorm lab-run {name}", fontsize=10)
    plot(result, figure)
    # A fixed date and no hash salt keep the SVG the same from run to run (the report diffs it).
    figure.savefig(argv[2], metadata={"Date": None} if argv[2].endswith(".svg") else None)
    plt.close(figure)


if __name__ == "__main__":
    plt.rcParams["svg.hashsalt"] = "addnorm"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable files
    main(sys.argv)
