"""The seed-stability rule of docs/lab.md, computed from two runs of one experiment on disjoint
seed sets (scripts/lab-report.sh makes the second run with --seed moved past the first set).

A median is stable when it moves by less than 10% between the two sets: |a - b| / max(|a|, |b|).
The rule is judged on each experiment's claim statistics, the numbers docs/lab.md's claims are
about; where a raw median sits near zero or scales with a setting, the claim is about a ratio
between placements or an accuracy, and that is the statistic judged (see claim_statistics).
Every reported median's move is listed as well, so what the rule does not cover stays visible.
"""

import math

THRESHOLD = 0.10


def relative_move(a, b):
    """|a - b| / max(|a|, |b|); 0 when both are 0; 1 (as far as it goes) when either is missing
    or not finite (a diverged run's null), so it can never pass silently."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if a == b or (a is None and b is None) else 1.0
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def reported_medians(label, result):
    """Every headline median the run prints, by name."""
    out = {}
    if label == "gradient-flow":
        for s in result["stacks"]:
            out[f"{s['depth']} layers, no residual"] = s["spread_without_residual"][-1]["median"]
            out[f"{s['depth']} layers, residual"] = s["spread_with_residual"][-1]["median"]
    elif label == "activation-growth":
        for c in result["curves"]:
            out[f"{c['mode']}, last std"] = c["std_spread"][-1]["median"]
    elif label.startswith("init-gradients"):
        for s in result["stacks"]:
            out[f"{s['placement']} L={s['depth']} top FFN grad"] = s["top_ffn_grad"]["median"]
        for x in result.get("post_over_pre", []):
            out[f"post/pre L={x['depth']}"] = x["top_ffn_grad"]["median"]
    elif label.startswith("update-size"):
        for s in result["stacks"]:
            out[f"{s['placement']} L={s['depth']} lr={s['lr']:g}"] = s["output_change"]
    elif label == "trainability-map":
        for c in result["cells"]:
            key = (f"{c['placement']} L={c['depth']} lr={c['lr']:g} {c['schedule']}"
                   f"{'' if c['schedule'] == 'constant' else ' ' + str(c['warmup_steps'])}")
            out[key + " loss"] = c["final_loss"]["median"]
    elif label == "rank-collapse":
        for c in result["curves"]:
            out[f"{c['placement']} residual, last block"] = c["residual"][-1]["median"]
    elif label == "depth-training":
        for s in result["summaries"]:
            key = f"{s['placement']} L={s['depth']} {'warmup' if s['warmup'] else 'constant'}"
            out[key + " loss"] = s["final_loss"]
            out[key + " accuracy"] = s["accuracy"]
    return out


def _update_size_orderings(result):
    """Per lr and depth, the share of seeds in which post > pre > DeepNorm (output change): the
    claims are about this ordering, and each raw change is proportional to lr."""
    return {f"post>pre>deep L={o['depth']} lr={o['lr']:g}": o["holds"] / o["seeds"]
            for o in result.get("orderings", [])}


def _admin_below_post(result):
    """Per lr and depth, the share of seeds in which Admin's output change is below post-norm's
    (the claim of Liu et al. the run is about; each seed's stacks share its batch)."""
    out = {}
    for stack in result["stacks"]:
        if stack["placement"] != "admin":
            continue
        post = [s for s in result["stacks"] if s["placement"] == "post_norm" and
                s["depth"] == stack["depth"] and s["lr"] == stack["lr"]]
        if post:
            pairs = list(zip(stack["output_change_per_seed"], post[0]["output_change_per_seed"]))
            out[f"admin<post L={stack['depth']} lr={stack['lr']:g}"] = (
                sum(a < p for a, p in pairs) / len(pairs))
    return out


def claim_statistics(label, result):
    """The statistics the docs' claims rest on, by name.

    gradient-flow, activation-growth: the medians themselves (far from zero, or compared over
    decades). rank-collapse: each skip placement's last-block residual. trainability-map: each placement's share of runs that trained.
    update-size-admin: the share of seeds in which Admin's change is below post-norm's. init-gradients: post-norm's top-block FFN gradient over pre-norm's, per depth (the
    per-seed ratio's median). update-size: the share of seeds in which post > pre > DeepNorm, per
    lr and depth (the raw change is proportional to lr, and the ratio of two placements' medians
    is noisier than either). depth-training: the accuracies; the held-out losses
    of the runs that learn sit near 0 and differ by factors between seeds, so no claim uses them.
    """
    if label in ("gradient-flow", "activation-growth"):
        return reported_medians(label, result)
    if label.startswith("init-gradients"):
        return {f"post/pre L={x['depth']}": x["top_ffn_grad"]["median"]
                for x in result.get("post_over_pre", [])}
    if label == "update-size-admin":
        return _admin_below_post(result)
    if label.startswith("update-size"):
        return _update_size_orderings(result)
    if label == "depth-training":
        return {k: v for k, v in reported_medians(label, result).items()
                if k.endswith(" accuracy")}
    if label == "rank-collapse":
        return _rank_collapse_margins(result)
    if label == "trainability-map":
        return _trained_shares(result)
    return {}


def _trained_shares(result):
    """Per placement, the share of its runs over the whole map that trained: the map's claims
    are about which placements train where, and a single cell's few seeds are too few to hold a
    median still (the cells' losses are listed among the medians all the same)."""
    shares = {}
    for c in result["cells"]:
        trained, runs = shares.get(c["placement"], (0, 0))
        shares[c["placement"]] = (trained + c["trained"], runs + c["seeds"])
    return {f"{name} share trained": t / n for name, (t, n) in shares.items() if n}


def _rank_collapse_margins(result):
    """Per placement with a skip, its last-block residual median: the claim is that a skip keeps
    the tokens apart, and these medians are far from zero. The collapsed stacks' residuals sit at
    float32 rounding, which no claim is about (they are among the medians all the same)."""
    return {f"{c['placement']} residual, last block": c["residual"][-1]["median"]
            for c in result["curves"] if c["placement"] not in ("bare", "no_residual")}


def moves(first, second):
    """(move, name, a, b) for every statistic of `first`, largest move first."""
    out = [(relative_move(a, second[name]), name, a, second[name]) for name, a in first.items()]
    out.sort(key=lambda m: (-m[0], m[1]))
    return out


def judge(label, first_result, second_result, threshold=THRESHOLD):
    """The rule's verdict for one experiment: a dict with the claim statistics' moves, all
    reported medians' moves, and `holds` (every claim statistic moved less than threshold)."""
    claims = moves(claim_statistics(label, first_result), claim_statistics(label, second_result))
    medians = moves(reported_medians(label, first_result), reported_medians(label, second_result))
    return {
        "claims": claims,
        "medians": medians,
        "holds": bool(claims) and all(m[0] < threshold for m in claims),
        "claims_within": sum(1 for m in claims if m[0] < threshold),
        "medians_within": sum(1 for m in medians if m[0] < threshold),
    }
