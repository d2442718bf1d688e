"""diagnose()'s result: the numbers over runs (median and interquartile range), each beside the
lab's result for stacks of the same placement and nearest depth, a verdict in words, and the
three outputs: a text table, JSON and a figure."""
import collections
import math

from ._diagnose_reference import LAB_CONFIGURATION, REFERENCE

# The summary figures: (key, label, what the lab reference calls it).
SUMMARY = (
    ("top_to_bottom", "gradient top/bottom block", "top_to_bottom"),
    ("stream_growth", "stream RMS growth", "stream_growth"),
    ("top_token_cosine", "token cosine, top block", "top_token_cosine"),
    ("top_relative_residual", "relative residual, top", None),
    ("output_change", "output change, one step", "output_change"),
    ("perturbation_change", "output change, random", None),
)


def spread(values):
    """Median and quartiles (linear interpolation, as numpy.percentile) of the finite values."""
    finite = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not finite:
        return {"median": float("nan"), "q25": float("nan"), "q75": float("nan"), "n": 0}

    def quantile(q):
        position = q * (len(finite) - 1)
        low = math.floor(position)
        high = min(low + 1, len(finite) - 1)
        return finite[low] + (finite[high] - finite[low]) * (position - low)

    return {"median": quantile(0.5), "q25": quantile(0.25), "q75": quantile(0.75),
            "n": len(finite)}


def _format(s):
    if not s or s["n"] == 0:
        return "-"
    if s["n"] == 1:
        return f"{s['median']:.3g}"
    return f"{s['median']:.3g} [{s['q25']:.3g}, {s['q75']:.3g}]"


def lab_reference(placement, depth):
    """The lab's figures for `placement` at the lab depth nearest `depth` (in log scale), or
    None for a placement the lab did not measure."""
    table = REFERENCE.get(placement)
    if not table or depth < 1:
        return None
    nearest = min(table, key=lambda d: abs(math.log(d) - math.log(depth)))
    return {"depth": nearest, **table[nearest]}


class Diagnosis:
    """What diagnose() measured. Attributes: structure (the blocks and norms found), runs (each
    (model, batch) pair's raw measures), summary (median and IQR of each figure), blocks (per
    block, medians over runs), placement (the blocks' most common placement), reference (the
    lab's figures for it), verdicts (sentences)."""

    def __init__(self, structure, runs, settings):
        self.structure, self.runs, self.settings = structure, runs, settings
        depth = len(structure["blocks"])
        self.depth = depth
        self.placement = collections.Counter(
            block["placement"] for block in runs[0]["blocks"]).most_common(1)[0][0]

        def per_run(function):
            return spread([function(run) for run in runs])

        self.summary = {
            "top_to_bottom": per_run(lambda r: _ratio(r["blocks"][-1]["grad_norm"],
                                                      r["blocks"][0]["grad_norm"])),
            "stream_growth": per_run(lambda r: _ratio(r["blocks"][-1]["stream_rms_out"],
                                                      r["blocks"][0]["stream_rms_in"])),
            "top_token_cosine": per_run(lambda r: r["blocks"][-1]["token_cosine"]),
            "top_relative_residual": per_run(lambda r: r["blocks"][-1]["relative_residual"]),
            "output_change": per_run(lambda r: r["output_change"]),
            "perturbation_change": per_run(lambda r: r["perturbation_change"]),
        }
        self.blocks = []
        for index, first in enumerate(runs[0]["blocks"]):
            row = {"name": first["name"], "placement": first["placement"]}
            for key in ("grad_norm", "stream_rms_in", "stream_rms_out", "token_cosine",
                        "relative_residual", "shortcut"):
                row[key] = spread([run["blocks"][index][key] for run in runs])
            # Runs of one architecture find the same norms; a run that found fewer adds
            # nothing to the norms it lacks.
            row["norms"] = [{"name": norm["name"], "kind": norm["kind"],
                             **{key: spread([run["blocks"][index]["norms"][k][key]
                                             for run in runs
                                             if k < len(run["blocks"][index]["norms"])])
                                for key in ("input_rms", "output_rms")}}
                            for k, norm in enumerate(first["norms"])]
            self.blocks.append(row)
        self.reference = lab_reference(self.placement, depth)
        self.verdicts = self._verdicts()

    def _verdicts(self):
        s, depth, placement = self.summary, self.depth, self.placement
        ratio = _format(s["top_to_bottom"])
        lab = ""
        if self.reference:
            lab = (f" (lab, {self.placement} at {self.reference['depth']} blocks: "
                   f"{_format(self.reference['top_to_bottom'])})")
        verdicts = []
        if "(no residual)" in placement:
            verdicts.append(
                f"{depth} blocks with no residual path: changes to a block's input do not pass "
                f"through it, so the gradient reaching the bottom depends on every layer's gain "
                f"(top/bottom {ratio}); the residual lesson: deep stacks without skips vanish "
                "or explode")
        elif placement.startswith("post_norm"):
            verdicts.append(
                f"post-norm, {depth} blocks: top/bottom gradient ratio {ratio}{lab}; the top "
                "blocks' gradients outgrow the bottom's as depth grows, so expect to need "
                "learning-rate warmup or DeepNorm-style scaling of the shortcut")
        elif placement.startswith("pre_norm"):
            verdicts.append(
                f"pre-norm, {depth} blocks: top/bottom gradient ratio {ratio}{lab}: the gradient "
                f"reaches the bottom; the stream's RMS grows x{_format(s['stream_growth'])} over "
                "the stack, so later blocks change it relatively less")
            after = self.structure["after_blocks"]
            verdicts.append(
                f"norms after the blocks: {', '.join(after)} (a pre-norm stack needs one before "
                "the output)" if after else
                "no norm after the blocks: a pre-norm stack usually ends with one, else the "
                "stream reaches the output unnormalised")
        elif placement.startswith("no_norm"):
            verdicts.append(
                f"no norm in the blocks: the stream's RMS grows x{_format(s['stream_growth'])} "
                "over the stack (the normalisation lesson: activations grow layer by layer)")
        else:
            verdicts.append(f"{placement}, {depth} blocks: top/bottom gradient ratio {ratio}; "
                            "the lab has no stacks of this placement to compare with")
        cosine = s["top_token_cosine"]["median"]
        if math.isfinite(cosine) and cosine > 0.9:
            verdicts.append(
                f"tokens near one direction at the top (mean cosine {cosine:.3g}, relative "
                f"residual {_format(s['top_relative_residual'])}): rank collapse (Dong et al. "
                "2021) is under way")
        return verdicts

    def to_dict(self):
        """Everything as plain values for standard JSON: an undefined figure (NaN, e.g. the
        token cosine of one-token outputs) is None, so json.dumps writes null."""
        return _finite_or_none({"structure": self.structure, "settings": self.settings,
                "depth": self.depth, "placement": self.placement, "summary": self.summary,
                "blocks": self.blocks, "lab_reference": self.reference,
                "lab_configuration": LAB_CONFIGURATION, "verdicts": self.verdicts,
                "runs": self.runs})

    def table(self):
        """The report as text: the blocks, then the summary beside the lab, then the verdicts."""
        lines = [f"{self.structure['model']}: {self.depth} blocks "
                 f"({self.structure['blocks'][0]} .. {self.structure['blocks'][-1]}), "
                 f"{len(self.structure['norms'])} norms, placement {self.placement}; "
                 f"{len(self.runs)} run(s): median [IQR]"]
        header = ("block", "placement", "grad norm", "stream RMS in", "token cos", "rel resid",
                  "shortcut", "norm in -> out RMS")
        rows = [header]
        for block in self.blocks:
            norms = "; ".join(f"{n['kind']} {n['input_rms']['median']:.3g} -> "
                              f"{n['output_rms']['median']:.3g}" for n in block["norms"]) or "-"
            rows.append((block["name"], block["placement"],
                         f"{block['grad_norm']['median']:.3g}",
                         f"{block['stream_rms_in']['median']:.3g}",
                         f"{block['token_cosine']['median']:.3g}",
                         f"{block['relative_residual']['median']:.3g}",
                         f"{block['shortcut']['median']:.2f}", norms))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                  for row in rows]
        lines.append("")
        where = (f"lab: {self.placement} at {self.reference['depth']} blocks"
                 if self.reference else "lab: no stacks of this placement")
        lines.append(f"{'measure':28} {'this model':28} {where}")
        for key, label, reference_key in SUMMARY:
            theirs = "-"
            if self.reference and reference_key and reference_key in self.reference:
                theirs = _format(self.reference[reference_key])
            lines.append(f"{label:28} {_format(self.summary[key]):28} {theirs}")
        lines.append(f"(lab stacks: {LAB_CONFIGURATION['description']})")
        lines.append("")
        lines += [f"- {verdict}" for verdict in self.verdicts]
        return "\n".join(lines)

    def plot(self, path):
        """Four panels against block index: gradient norm, stream RMS, token cosine and relative
        residual, each norm's input RMS. Median with the IQR as a band when there are runs
        enough. Written to `path` (the extension picks the format)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        index = list(range(1, self.depth + 1))
        figure, axes = plt.subplots(2, 2, figsize=(10, 7), constrained_layout=True)

        def draw(axis, key, label, color, log=False):
            median = [block[key]["median"] for block in self.blocks]
            axis.plot(index, median, marker="o", color=color, label=label)
            if len(self.runs) > 2:
                axis.fill_between(index, [b[key]["q25"] for b in self.blocks],
                                  [b[key]["q75"] for b in self.blocks], color=color, alpha=0.2,
                                  label=f"{label}: IQR over {len(self.runs)} runs")
            if log:
                axis.set_yscale("log")

        draw(axes[0][0], "grad_norm", "gradient norm of the block's weights", "tab:blue", True)
        axes[0][0].set_title("Gradient reaching each block")
        draw(axes[0][1], "stream_rms_in", "stream RMS entering the block", "tab:orange")
        axes[0][1].set_title("Residual stream")
        draw(axes[1][0], "token_cosine", "mean token cosine", "tab:green")
        draw(axes[1][0], "relative_residual", "relative residual |X - 1x'| / |X|", "tab:red")
        axes[1][0].set_ylim(-0.05, 1.05)
        axes[1][0].set_title("Token geometry of the block's output (rank collapse)")
        for k in range(max((len(b["norms"]) for b in self.blocks), default=0)):
            values = [b["norms"][k]["input_rms"]["median"] if k < len(b["norms"]) else math.nan
                      for b in self.blocks]
            axes[1][1].plot(index, values, marker="o", label=f"norm {k + 1} of the block: input")
        axes[1][1].set_title("Scale entering each norm (RMS)")
        for axis in (axes[0][0], axes[0][1], axes[1][0], axes[1][1]):
            axis.set_xlabel("block (bottom = 1)")
            axis.set_xticks(index if self.depth <= 24 else index[::max(1, self.depth // 12)])
            if axis.get_legend_handles_labels()[0]:
                axis.legend(fontsize=8, loc="best")
        figure.suptitle(f"{self.structure['model']}: {self.placement}, {self.depth} blocks")
        figure.savefig(path)
        plt.close(figure)
        return path


def _finite_or_none(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    return value


def _ratio(a, b):
    return a / b if b > 0 else float("nan")
