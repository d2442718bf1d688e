#!/usr/bin/python3
"""Writes docs/lab-results.md from the JSON of the runs scripts/lab-report.sh made.

usage: lab_report.py JSON_DIR OUT.md [--quick]

Every table is printed from a run's JSON; every section names the command that produced it, so
a claim in docs/lab.md can cite the section, and anyone can repeat the run.
"""
import json
import os
import sys

import numpy as np

import lab_stability  # noqa: E402  (scripts/ is on the path when this script runs)

SETTINGS = {
    "init-gradients-ffn": ("init-gradients", "--sublayers ffn"),
    "update-size-perturbation": ("update-size", "--mode perturbation"),
    "update-size-admin": ("update-size", "--placements post_norm,pre_norm,admin"),
    "trainability-map": ("trainability-map",
                         "--seeds 4 --lrs 1e-3,3e-3,1e-2 --schedules constant,linear,noam"),
}


def g(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:
        return "nan"
    return f"{value:.{digits}g}"


def spread(s):
    if s["seeds"] < 2:
        return g(s["median"])
    return f"{g(s['median'])} [{g(s['q25'])}, {g(s['q75'])}]"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def gradient_flow(r):
    p = r["params"]
    rows = []
    for s in r["stacks"]:
        others_without = spread(s["spread_without_residual"][-1]) if s["spread_without_residual"] else "-"
        others_with = spread(s["spread_with_residual"][-1]) if s["spread_with_residual"] else "-"
        rows.append([s["depth"], f"{s['without_residual'][-1]:.2e}", g(s["with_residual"][-1]),
                     others_without, others_with, g(s["expected_without_residual"][-1]),
                     g(s["expected_with_residual"][-1])])
    return (f"Width {p['width']}, W ~ N(0, {p['weight_std']}); the page's draw is "
            f"default_rng({p['seed']}); the spread is over seeds {p['seed'] + 1}.."
            f"{p['seed'] + p['spread_seeds']}.\n\n" +
            table(["layers", f"no residual, seed {p['seed']}", f"residual, seed {p['seed']}",
                   "no residual, other seeds: median [IQR]", "residual, other seeds",
                   "theory RMS, no residual", "theory RMS, residual"], rows))


def activation_growth(r):
    p = r["params"]
    rows = []
    for c in r["curves"]:
        past = c["first_layer_past_100"] or "never"
        spread_cell = spread(c["std_spread"][-1]) if c.get("std_spread") else "-"
        rows.append([c["mode"], g(c["std"][-1], 6), spread_cell, past])
    return (f"{p['tokens']} tokens x width {p['width']}, {p['layers']} layers, gain {p['gain']}, "
            f"seed {p['seed']}.\n\n" +
            table(["mode", f"std at layer {p['layers']}", "other seeds: median [IQR]",
                   "first layer past std 100"], rows))


def norm_steps(r):
    rows = [[s["name"], ", ".join(g(v, 5) for v in s["values"]), g(s["mean"], 5), g(s["std"], 8)]
            for s in r["steps"]]
    return table(["step", "values", "mean", "std"], rows)


def batch_vs_layer(r):
    rows = [[e["batch_size"], g(e["batch_norm_padded"]), g(e["batch_norm_real"]),
             g(e["layer_norm"])] for e in r["batch_sizes"]]
    m = r["modes"]
    return (table(["sentences in batch", "batch norm (padding counted)",
                   "batch norm (real tokens)", "layer norm"], rows) +
            "\nSentence 0's largest output change against its output alone, as above. "
            f"Inference vs training mode: batch norm {g(m['batch_norm_in_batch'])} (in its batch), "
            f"{g(m['batch_norm_alone'])} (alone); layer norm {g(m['layer_norm'])}.\n")


def depth_slope(depths, per_seed):
    """The fitted log-log slope of a depth trend: per seed, least squares of ln(value) on
    ln(depth) over the depths (the runs of one seed share its seed at every depth), then the
    median [IQR] over seeds (NumPy's linear quantiles, as Spread). per_seed: one list of values
    per depth, in seed order. Also the median over seeds of value(deepest) / value(shallowest)."""
    values = np.log(np.array(per_seed, dtype=float))  # [depths, seeds]
    x = np.log(np.array(depths, dtype=float))
    x = x - x.mean()
    slopes = (x[:, None] * (values - values.mean(axis=0))).sum(axis=0) / (x * x).sum()
    q25, median, q75 = np.percentile(slopes, [25, 50, 75])
    growth = float(np.median(np.exp(values[-1] - values[0])))
    return {"median": float(median), "q25": float(q25), "q75": float(q75),
            "seeds": len(slopes)}, growth


def slope_rows(named_series, depths):
    """Rows of (name, slope median [IQR], growth from the first depth to the last)."""
    rows = []
    for name, per_seed in named_series:
        slope, growth = depth_slope(depths, per_seed)
        rows.append([name, spread(slope), f"x{g(growth)}"])
    return rows


def slope_table(named_series, depths):
    header = ["series", f"log-log slope over L = {', '.join(map(str, depths))}: median [IQR]",
              f"growth L = {depths[0]} to {depths[-1]} (median)"]
    return table(header, slope_rows(named_series, depths))


def init_gradients(r):
    p = r["params"]
    rows = []
    for s in r["stacks"]:
        top_in = g(s["ffn_norm_input"][-1]) if s["ffn_norm_input"] else "-"
        top_out = g(s["ffn_norm_output"][-1]) if s["ffn_norm_output"] else "-"
        rows.append([s["placement"], s["depth"], spread(s["top_ffn_grad"]),
                     spread(s["top_to_bottom"]), spread(s["mean_layer_grad"]),
                     g(s["stream_norm"][-1]), top_in, top_out, g(s["token_cosine"][-1])])
    text = (f"d_model {p['d_model']}, {p['n_heads']} heads, d_ff {p['d_ff']}, sub-layers "
            f"{p['sublayers']}, task {p['task']}, batch {p['batch']}, {p['seeds']} seeds; "
            "median [interquartile range] over seeds; the last four columns are means over "
            "seeds at the top block.\n\n" +
            table(["placement", "L", "top block's FFN grad", "top / bottom",
                   "mean grad per block", "stream norm at top", "top FFN norm: input",
                   "output", "token cosine at top"], rows))
    if r.get("post_over_pre"):
        text += "\nPost-norm over pre-norm, the top block's FFN gradient, per seed (same batch):\n\n"
        text += table(["L", "post / pre: median [IQR]"],
                      [[x["depth"], spread(x["top_ffn_grad"])] for x in r["post_over_pre"]])
    depths = p["depths"]
    if len(depths) > 1:
        series = {}
        for s in r["stacks"]:
            series.setdefault(s["placement"], {})[s["depth"]] = s["top_ffn_grad_per_seed"]
        named = [(f"{name}: top block's FFN grad", [by_depth[d] for d in depths])
                 for name, by_depth in series.items()]
        if "post_norm" in series and "pre_norm" in series:
            named.append(("post / pre, per seed",
                          [np.array(series["post_norm"][d]) / np.array(series["pre_norm"][d])
                           for d in depths]))
        text += "\nDepth trends, fitted (scripts/lab_report.py `depth_slope`):\n\n"
        text += slope_table(named, depths)
    return text


def admin_below_post(r, lr, depths):
    """Per depth, "k/n": the seeds in which Admin's output change is below post-norm's (the two
    stacks of a seed share its batch); empty unless both placements ran."""
    cells = []
    for depth in depths:
        pick = {s["placement"]: s["output_change_per_seed"] for s in r["stacks"]
                if s["depth"] == depth and s["lr"] == lr}
        if "admin" not in pick or "post_norm" not in pick:
            return []
        below = sum(a < p for a, p in zip(pick["admin"], pick["post_norm"]))
        cells.append(f"{below}/{len(pick['admin'])}")
    return cells


def update_size(r):
    p = r["params"]
    text = (f"Mode {p['mode']}, d_model {p['d_model']}, sub-layers {p['sublayers']}, "
            f"{p['seeds']} seeds; RMS change of the stack's output over its RMS, median "
            "[interquartile range].\n")
    depths = p["depths"]
    for lr in p["lrs"]:
        rows = []
        for placement in p["placements"]:
            row = [placement]
            for depth in depths:
                match = [s for s in r["stacks"] if s["placement"] == placement and
                         s["depth"] == depth and s["lr"] == lr]
                row.append(spread(match[0]["output_change_spread"]) if match else "-")
            rows.append(row)
        admin_rows = admin_below_post(r, lr, depths)
        if admin_rows:
            rows.append(["admin < post (seeds)"] + admin_rows)
        orderings = [o for o in r["orderings"] if o["lr"] == lr]
        if orderings:
            rows.append(["post > pre > deep (seeds)"] +
                        [f"{o['holds']}/{o['seeds']}" for o in orderings])
        text += f"\nlr {lr:g}:\n\n" + table(["placement"] + [f"L = {d}" for d in depths], rows)
        if len(depths) > 1:
            named = []
            for placement in p["placements"]:
                by_depth = {s["depth"]: s["output_change_per_seed"] for s in r["stacks"]
                            if s["placement"] == placement and s["lr"] == lr}
                if all(d in by_depth for d in depths):
                    named.append((placement, [by_depth[d] for d in depths]))
            text += f"\nDepth trends at lr {lr:g}, fitted (`depth_slope`):\n\n"
            text += slope_table(named, depths)
    return text


def depth_training(r):
    p = r["params"]
    rows = []
    for s in r["summaries"]:
        rows.append([s["placement"], s["depth"], "warmup" if s["warmup"] else "constant",
                     spread(s["final_loss_spread"]),
                     spread({k: (100 * v if k != "seeds" else v)
                             for k, v in s["accuracy_spread"].items()}) + " %",
                     f"{s['reached_target']}/{p['seeds']}", f"{s['diverged']}/{p['seeds']}"])
    return (f"Task {p['task']} ({p['length']} symbols of {p['symbols']}), d_model {p['d_model']}, "
            f"{p['steps']} Adam steps of batch {p['batch']}, peak lr {p['lr']}, warmup "
            f"{p['warmup_steps']} steps, {p['seeds']} seeds; held-out loss (chance "
            f"{r['chance_loss']:.3f}) and accuracy, median [interquartile range].\n\n" +
            table(["placement", "depth", "schedule", "held-out loss", "accuracy",
                   f"reached loss {p['target_loss']}", "diverged"], rows))


def rank_collapse(r):
    p = r["params"]
    rows = []
    for c in r["curves"]:
        rows.append([c["placement"], spread(c["residual"][1]), spread(c["residual"][-1]),
                     spread(c["cosine"][-1]), c["collapsed_at"] or "never"])
    return (f"{p['depth']} blocks of {p['sublayers']}, d_model {p['d_model']}, {p['n_heads']} heads, "
            f"Xavier init; input {p['batch']} sequences of {p['tokens']} tokens ~ N(0, 1); "
            f"median [IQR] over {p['seeds']} seeds. The relative residual is "
            f"||X - 1 mean(X)^T||_F / ||X||_F per sequence; float32 rounding puts a collapsed "
            f"stack's between 5e-8 and 1e-7.\n\n" +
            table(["placement", "residual after block 1", f"residual after block {p['depth']}",
                   f"token cosine after block {p['depth']}",
                   f"first block below {r['collapsed_below']:g}"], rows))


def trainability_map(r):
    p = r["params"]
    schedules = []
    for c in r["cells"]:
        label = c["schedule"] if c["schedule"] == "constant" else f"{c['schedule']} {c['warmup_steps']}"
        if label not in schedules:
            schedules.append(label)
    text = (f"Task {p['task']} ({p['length']} symbols of {p['symbols']}), d_model {p['d_model']}, "
            f"{p['steps']} Adam steps (beta2 0.98) of batch {p['batch']}, {p['seeds']} seeds a "
            f"cell; each cell: the held-out loss, median [IQR] (chance {r['chance_loss']:.3f}), "
            f"and the seeds that trained (held-out loss below {p['target_loss']:g}).\n")
    for placement in p["placements"]:
        rows = []
        for depth in p["depths"]:
            for label in schedules:
                row = [depth, label]
                for lr in p["lrs"]:
                    match = [c for c in r["cells"] if c["placement"] == placement and
                             c["depth"] == depth and c["lr"] == lr and
                             (c["schedule"] if c["schedule"] == "constant" else
                              f"{c['schedule']} {c['warmup_steps']}") == label]
                    row.append(f"{spread(match[0]['final_loss'])} ({match[0]['trained']}/"
                               f"{match[0]['seeds']})" if match else "-")
                rows.append(row)
        text += f"\n{placement}:\n\n" + table(["L", "schedule"] + [f"lr {lr:g}" for lr in p["lrs"]],
                                                rows)
    trained = {}
    for c in r["cells"]:
        t = trained.setdefault(c["placement"], [0, 0])
        t[0] += c["trained"]
        t[1] += c["seeds"]
    text += "\nRuns that trained, over the whole map:\n\n" + table(
        ["placement", "trained / runs"], [[k, f"{v[0]}/{v[1]}"] for k, v in trained.items()])
    return text


def seed_count(label, result):
    """How many seeds a run's medians are over."""
    p = result["params"]
    return p["spread_seeds"] if label in ("gradient-flow", "activation-growth") else p["seeds"]


def stability(json_dir):
    """The seed-stability rule per run (scripts/lab_stability.py): the claim statistics' largest
    move between the two disjoint seed sets, and every reported median's."""
    rows = []
    for label, _ in SECTIONS:
        second_path = os.path.join(json_dir, "second", label + ".json")
        if not os.path.exists(second_path):
            continue
        with open(os.path.join(json_dir, label + ".json"), encoding="utf-8") as source:
            first = json.load(source)
        with open(second_path, encoding="utf-8") as source:
            second = json.load(source)
        verdict = lab_stability.judge(label, first, second)
        worst_claim, worst = verdict["claims"][0], verdict["medians"][0]
        rows.append([label, str(seed_count(label, first)),
                     "holds" if verdict["holds"] else "**fails**",
                     f"{verdict['claims_within']}/{len(verdict['claims'])}",
                     f"{100 * worst_claim[0]:.1f}% ({worst_claim[1]}: {g(worst_claim[2])} vs "
                     f"{g(worst_claim[3])})",
                     f"{verdict['medians_within']}/{len(verdict['medians'])}",
                     f"{100 * worst[0]:.1f}% ({worst[1]}: {g(worst[2])} vs {g(worst[3])})"])
    return table(["run", "seeds per set", "rule", "claim statistics < 10%", "largest claim move",
                  "all medians < 10%", "largest median move"], rows)


def run_times(json_dir):
    """The wall and CPU (user) seconds of each documented run, from the times.txt that
    lab-report.sh writes (the last line per run, after --resume), and the machine's load."""
    path = os.path.join(json_dir, "times.txt")
    if not os.path.exists(path):
        return "(no times.txt: the runs were not timed)\n"
    times, machine = {}, []
    with open(path, encoding="utf-8") as source:
        for line in source:
            words = line.split()
            if line.startswith("#"):
                machine.append(line[1:].strip())
            elif len(words) == 7 and words[2] == "s" and words[3] == "wall":
                times[words[0]] = (float(words[1]), float(words[4]))
    rows = [[label, f"{wall:.1f}", f"{user:.1f}"] for label, (wall, user) in times.items()]
    return ("Measured while the runs above were made (" + "; ".join(machine) + "). Wall seconds "
            "depend on what else the machine runs; CPU seconds are the work, which two idle cores "
            "share. Each run's time includes drawing its figure (`--plot`: Python and matplotlib, "
            "about 0.8 s).\n\n" + table(["run", "wall s", "CPU (user) s"], rows))


def busy_times(json_dir):
    """Each default run's wall and CPU seconds with one core kept busy (scripts/lab-busy-times.sh),
    against the 60 s rule."""
    path = os.path.join(json_dir, "busy-times.txt")
    if not os.path.exists(path):
        return "(not measured in this report: scripts/lab-busy-times.sh makes it)\n"
    machine, rows = [], []
    with open(path, encoding="utf-8") as source:
        for line in source:
            words = line.split()
            if line.startswith("#"):
                machine.append(line[1:].strip())
            elif len(words) == 3:
                wall = float(words[1])
                rows.append([words[0], f"{wall:.1f}", f"{float(words[2]):.1f}",
                             "yes" if wall <= 60.0 else "**no**"])
    return ("`bash scripts/lab-busy-times.sh`: every `addnorm lab-run NAME` at its defaults "
            "(`--json`, no figure) while a shell loop keeps one core busy (" + "; ".join(machine) +
            ").\n\n" + table(["run", "wall s", "CPU (user) s", "within 60 s"], rows))


SECTIONS = [
    ("gradient-flow", gradient_flow),
    ("activation-growth", activation_growth),
    ("norm-steps", norm_steps),
    ("batch-vs-layer", batch_vs_layer),
    ("init-gradients", init_gradients),
    ("init-gradients-ffn", init_gradients),
    ("update-size", update_size),
    ("update-size-perturbation", update_size),
    ("update-size-admin", update_size),
    ("depth-training", depth_training),
    ("rank-collapse", rank_collapse),
    ("trainability-map", trainability_map),
]


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--quick"):
        sys.exit("usage: lab_report.py JSON_DIR OUT.md [--quick]")
    json_dir, out = argv[1], argv[2]
    quick = len(argv) == 4
    lines = ["# The lab's results, generated\n",
             "Written by `bash scripts/lab-report.sh`" + (" --quick" if quick else "") +
             " from the JSON of the runs below; do not edit by hand. [lab.md](lab.md) states "
             "the claims and cites these sections. Each section's command repeats the run "
             "(add `--json` for every number, `--plot FILE.svg` for the figure).\n"]
    for label, render in SECTIONS:
        path = os.path.join(json_dir, label + ".json")
        with open(path, encoding="utf-8") as source:
            result = json.load(source)
        name, extra = SETTINGS.get(label, (label, ""))
        command = f"addnorm lab-run {name}{' ' + extra if extra else ''}{' --quick' if quick else ''}"
        lines.append(f"\n## {label}\n")
        lines.append(f"`{command}`\n")
        lines.append(render(result))
        lines.append(f"\n![{label}](figures/{label}.svg)\n")
    lines.append("\n## Seed stability\n")
    lines.append("Each stochastic run again on the next, disjoint set of seeds (the same count; "
                 "`--seed` moved past the first set), and how far its medians moved "
                 "(|a - b| / max(|a|, |b|)). The rule (docs/lab.md) holds when every claim "
                 "statistic moved less than 10%: the medians themselves for gradient-flow and "
                 "activation-growth, post-norm's top-block gradient over pre-norm's for "
                 "init-gradients, the share of seeds in which post > pre > DeepNorm for update-size "
                 "(Admin below post-norm for update-size-admin), "
                 "the accuracies for depth-training, the last-block residual of each placement "
                 "with a skip for rank-collapse, each placement's share of runs that "
                 "trained for trainability-map (scripts/lab_stability.py says why).\n")
    lines.append(stability(json_dir))
    lines.append("\n## Run times\n")
    lines.append(run_times(json_dir))
    lines.append("\n## Busy-machine times\n")
    lines.append(busy_times(json_dir))
    with open(out, "w", encoding="utf-8") as target:
        target.write("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv)
