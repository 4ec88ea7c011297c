"""A comparison's verdict and report: the keep rule of the spec applied to its results.

:func:`summarise` gathers, per decision split, each seed's F1 of A and B, the paired bootstrap over talks
(:func:`comparisons.bootstrap.paired_bootstrap`), each seed's minutes, and the verdict (:func:`verdict`). B is kept
only when every part of the spec's keep rule holds on every decision split:

* the mean gain over the seeds (B - A, F1 points) is at least ``min_effect`` (the split's own, where the spec gives
  one per split: a negative one is the most B may lose there, a split that must not get worse);
* ``interval_above_zero``: the bootstrap interval's lower bound is above 0 (above a negative ``min_effect``);
* ``every_seed``: B is above A on every seed (above a negative ``min_effect``);
* ``max_extra_minutes``: B's minutes less A's, averaged over the seeds whose two arms ran on one machine (CPU
  model and cores), are at most that many. Minutes of two machines are never set against each other: a seed
  whose arms ran on two machines is reported, not timed; with no seed timed the rule cannot hold.

Until every seed of the spec has both arms, there is no verdict. :func:`write_report` writes ``NAME.json`` (every
figure) and ``NAME.md`` (a table, the bootstrap line, the verdict). Test splits (Ref, ASR) are scored only after
the verdict, on request (:func:`score_test_splits`), and reported as "reported, not used to choose".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from comparisons.ab import ComparisonError, read_results
from comparisons.bootstrap import f1_from_confusions, paired_bootstrap, read_confusions, split_talks, talks_sha256
from comparisons.spec import Spec, is_test_split
from corpus.io import atomic_write_text
from corpus.labels import PUNCTUATION_CLASSES


def _f1(result: dict[str, Any], split: str) -> float:
    return 100 * result["scores"][split]["OVERALL"]["f1"]


def machine_label(machine: dict[str, Any] | None) -> str:
    """``AMD EPYC (family 23, model 49), 2 cores, no AVX-512``; results written before the family, model and
    AVX-512 were recorded show the name and cores alone."""
    if machine is None:
        return "mixed"
    cpu = machine["cpu"] + (f" (family {machine['family']}, model {machine['model']})" if "family" in machine else "")
    isa = {True: ", AVX-512", False: ", no AVX-512"}.get(machine.get("avx512"), "")
    return f"{cpu}, {machine['cores']} cores{isa}"


def summarise(spec: Spec, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the comparison so far, and its verdict once every seed has both arms."""
    by = {(r["arm"], r["seed"]): r for r in results}
    paired = [seed for seed in spec.seeds if ("A", seed) in by and ("B", seed) in by]
    seeds = []
    for seed in spec.seeds:
        a, b = by.get(("A", seed)), by.get(("B", seed))
        row: dict[str, Any] = {"seed": seed, "minutes": {arm: r["minutes"] for arm, r in (("A", a), ("B", b)) if r},
                               "machines": {arm: r["machine"] for arm, r in (("A", a), ("B", b)) if r}, "f1": {}}
        for split in spec.decide_on:
            row["f1"][split] = {arm: round(_f1(r, split), 3) for arm, r in (("A", a), ("B", b)) if r}
        if a and b:
            row["timed"] = a["machine"] is not None and a["machine"] == b["machine"] and None not in (
                a["minutes"], b["minutes"])
            row["extra_minutes"] = round(b["minutes"] - a["minutes"], 2) if row["timed"] else None
        seeds.append(row)
    splits = {}
    for split in spec.decide_on:
        if not paired:
            continue
        talks = {by[key]["scores"][split]["talks"]["sha256"] for key in by}
        if len(talks) > 1:
            raise ComparisonError(f"{split}: the results were scored on different talk blocks; score them again")
        gains = [_f1(by[("B", s)], split) - _f1(by[("A", s)], split) for s in paired]
        confusions = {arm: [read_confusions(by[(arm, s)]["scores"][split]["talks"]["confusions"]) for s in paired]
                      for arm in ("A", "B")}
        splits[split] = {"gains": [round(g, 3) for g in gains], "mean_gain": round(float(np.mean(gains)), 3),
                         "bootstrap": paired_bootstrap(confusions["A"], confusions["B"], resamples=spec.resamples,
                                                       seed=spec.bootstrap_seed, level=spec.level),
                         "talks": by[("A", paired[0])]["scores"][split]["talks"]["source"]}
    timed = [row["extra_minutes"] for row in seeds if row.get("timed")]
    summary = {"comparison": spec.name, "question": spec.question, "spec": str(spec.path),
               "spec_sha256": spec.sha256, "results_spec_sha256": sorted({r["spec_sha256"] for r in results}),
               "rule_sha256": spec.rule_sha256, "keep_rule": vars(spec.keep), "seeds": seeds, "splits": splits,
               "complete": len(paired) == len(spec.seeds),
               "extra_minutes": round(float(np.mean(timed)), 2) if timed else None, "timed_seeds": len(timed),
               "arms": {label: {"what": arm.what, "overrides": list(arm.written),
                                "train": [step.label() for step in arm.chain]} for label, arm in spec.arms.items()}}
    summary["verdict"] = verdict(spec, summary)
    return summary


def group_gains(spec: Spec, results: list[dict[str, Any]], split: str,
                groups: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """B - A on ``split`` within each group of talks (``{group: [talk names of the split's talks file]}``), from
    the results' per-talk confusions: per seed each arm's F1 pooled over the group's talks, the mean gain, and the
    paired bootstrap over the group's talks alone. Why: a cue can only help in talks that carry it, and an overall
    gain hides where it comes from. Reporting only: the keep rule never reads it."""
    if split not in spec.talks:
        raise ComparisonError(f"{split}: the spec names no talks file for it, so its talks have no names to group")
    talks = split_talks(spec.split_files[split], talks_tsv=spec.talks[split], pseudo_talk_tokens=0)
    names = [talk.talk_id for talk in talks]
    unknown = sorted({name for members in groups.values() for name in members} - set(names))
    if unknown:
        raise ComparisonError(f"{split}: groups name talks that {spec.talks[split]} does not hold: "
                              f"{', '.join(unknown)}")
    by = {(r["arm"], r["seed"]): r for r in results}
    paired = [seed for seed in spec.seeds if ("A", seed) in by and ("B", seed) in by]
    if not paired:
        raise ComparisonError(f"{spec.name}: no seed has both arms yet")
    sha = talks_sha256(talks)
    for (arm, seed), result in by.items():
        if result["scores"][split]["talks"]["sha256"] != sha:
            raise ComparisonError(f"{split}: arm {arm} seed {seed} was scored on other talk blocks than "
                                  f"{spec.talks[split]}'s; score it again")
    confusions = {arm: [read_confusions(by[(arm, seed)]["scores"][split]["talks"]["confusions"]) for seed in paired]
                  for arm in ("A", "B")}
    out: dict[str, Any] = {"split": split, "talks": spec.talks[split], "seeds": paired, "groups": {}}
    for group, members in groups.items():
        index = [names.index(name) for name in members]
        arms = {arm: [c[index] for c in confusions[arm]] for arm in ("A", "B")}
        f1 = {arm: [round(100 * float(f1_from_confusions(c.sum(axis=0).reshape(4, 4))[0]), 3) for c in arms[arm]]
              for arm in ("A", "B")}
        gains = [round(b - a, 3) for a, b in zip(f1["A"], f1["B"])]
        out["groups"][group] = {
            "talks": len(index), "tokens": sum(talks[i].tokens for i in index), "f1": f1, "gains": gains,
            "mean_gain": round(float(np.mean(gains)), 3),
            "bootstrap": paired_bootstrap(arms["A"], arms["B"], resamples=spec.resamples, seed=spec.bootstrap_seed,
                                          level=spec.level)}
    return out


def verdict(spec: Spec, summary: dict[str, Any]) -> dict[str, Any]:
    """``{"keep": "A" | "B" | None, "checks": [{"rule", "holds"}], "why"}`` by the spec's keep rule."""
    if not summary["complete"]:
        done = sum(1 for row in summary["seeds"] if "timed" in row)
        return {"keep": None, "checks": [], "why": f"not decided: {done} of {len(spec.seeds)} seeds have both arms"}
    rule, checks = spec.keep, []
    for split, figures in summary["splits"].items():
        effect = rule.min_effect[split]
        floor = min(effect, 0.0)  # a gain is asked for above 0; a bounded loss above its bound
        checks.append({"rule": f"{split}: mean gain at least {effect:+g} F1 (it is {figures['mean_gain']:+.2f})",
                       "holds": figures["mean_gain"] >= effect})
        if rule.interval_above_zero:
            low = figures["bootstrap"]["low"]
            checks.append({"rule": f"{split}: the {100 * spec.level:g} % interval's lower bound above {floor:+g} "
                                   f"(it is {low:+.2f})", "holds": low > floor})
        if rule.every_seed:
            checks.append({"rule": f"{split}: B − A above {floor:+g} on every seed "
                                   f"(it is {', '.join(f'{g:+.2f}' for g in figures['gains'])})",
                           "holds": all(g > floor for g in figures["gains"])})
    if rule.max_extra_minutes is not None:
        extra = summary["extra_minutes"]
        if extra is None:
            return {"keep": None, "checks": checks, "why": "not decided: no seed has both arms timed on one machine "
                                                           "(minutes of two machines are not compared)"}
        checks.append({"rule": f"minutes: B at most {rule.max_extra_minutes:g} over A (it is {extra:+.1f}, the mean of "
                               f"{summary['timed_seeds']} seeds timed on one machine)",
                       "holds": extra <= rule.max_extra_minutes})
    failed = [check["rule"] for check in checks if not check["holds"]]
    if failed:
        return {"keep": "A", "checks": checks, "why": "B not kept, these parts fail: " + "; ".join(failed)}
    return {"keep": "B", "checks": checks, "why": "every part of the keep rule holds"}


def markdown(spec: Spec, summary: dict[str, Any]) -> str:
    """The report: a table per seed, a bootstrap line per decision split, the verdict, then the arms."""
    splits = list(spec.decide_on)
    header = ["seed", *(f"{arm} {split} F1" for split in splits for arm in ("A", "B")),
              *(f"{split} B − A" for split in splits), "A min", "B min", "machine"]
    lines = [f"# A/B: {spec.name}", "", spec.question, "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in summary["seeds"]:
        f1 = [_cell(row["f1"][split].get(arm)) for split in splits for arm in ("A", "B")]
        gains = [f"{row['f1'][s]['B'] - row['f1'][s]['A']:+.1f}" if len(row["f1"][s]) == 2 else "–" for s in splits]
        machines = {machine_label(m) for m in row["machines"].values()}
        where = " / ".join(sorted(machines)) + ("" if row.get("timed", True) else " (not timed)")
        lines.append("| " + " | ".join([str(row["seed"]), *f1, *gains, _cell(row["minutes"].get("A")),
                                        _cell(row["minutes"].get("B")), where]) + " |")
    lines.append("")
    for split, figures in summary["splits"].items():
        boot = figures["bootstrap"]
        classes = ", ".join(f"{c} {boot['classes'][c]['difference']:+.2f} ({boot['classes'][c]['low']:+.2f} to "
                            f"{boot['classes'][c]['high']:+.2f})" for c in PUNCTUATION_CLASSES)
        lines.append(f"{split}: B − A {boot['difference']:+.2f} F1 ({100 * boot['level']:g} % interval "
                     f"{boot['low']:+.2f} to {boot['high']:+.2f}; paired bootstrap over {boot['talks']} talks "
                     f"({figures['talks']}), {boot['resamples']:,} resamples, seed {boot['seed']}, mean of "
                     f"{boot['seeds']} seeds). Per class: {classes}.")
        lines.append("")
    decided = summary["verdict"]
    keep = {"A": "**keep A** (B not kept)", "B": "**keep B**", None: "**no verdict yet**"}[decided["keep"]]
    lines += [f"Verdict: {keep}. {decided['why'][0].upper() + decided['why'][1:]}.", ""]
    if decided["checks"]:
        lines += [f"- {'holds' if check['holds'] else '**fails**'}: {check['rule']}" for check in decided["checks"]]
        lines.append("")
    rule = spec.keep
    effects = set(rule.min_effect.values())
    wanted = (f"{effects.pop():g} F1 on every decision split" if len(effects) == 1 else
              ", ".join(f"{value:+g} F1 on {split}" for split, value in rule.min_effect.items()))
    lines += ["The keep rule, fixed in the spec before the run: mean gain at least "
              + wanted
              + (", the bootstrap interval above 0 (above a negative bound)" if rule.interval_above_zero else "")
              + (", B above A on every seed (above a negative bound)" if rule.every_seed else "")
              + (f", B at most {rule.max_extra_minutes:g} minutes more than A (one machine)"
                 if rule.max_extra_minutes is not None else ", no time rule") + ".", ""]
    for label, arm in summary["arms"].items():
        overrides = ", ".join(f"`{text}`" for text in arm["overrides"]) or "none"
        what = arm["what"] if arm["what"].endswith((".", "?", "!")) or not arm["what"] else arm["what"] + "."
        lines.append(f"- {label}: {what} Trains {' → '.join(arm['train'])}; overrides: {overrides}.")
    if spec.notes:
        lines += ["", f"Notes: {spec.notes}"]
    lines += ["", f"Minutes: the trainer's wall clock of the arm's chain (training, dev evaluations, checkpoints). "
              f"Spec `{spec.path}`, SHA-256 {spec.sha256[:12]}"
              + (f" (its results made under {', '.join(s[:12] for s in summary['results_spec_sha256'])}: the same rule,"
                 " other free text)" if set(summary["results_spec_sha256"]) - {spec.sha256} else "")
              + f"; its decision rule {spec.rule_sha256[:12]}. Written by `python -m comparisons report {spec.path}`."]
    if summary.get("reported"):
        lines += ["", "## Test splits: reported, not used to choose", "", *reported_table(summary["reported"])]
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def write_report(spec: Spec, out: Path) -> dict[str, Any]:
    """``out/NAME.json`` and ``out/NAME.md`` from the results under ``out/NAME``; returns the summary."""
    results = read_results(spec, out)
    summary = summarise(spec, results)
    summary["reported"] = reported_tests(spec, results)
    atomic_write_text(out / f"{spec.name}.json", json.dumps(summary, indent=1) + "\n")
    atomic_write_text(out / f"{spec.name}.md", markdown(spec, summary))
    return summary


def reported_tests(spec: Spec, results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each test split scored after the verdict: per seed, A's and B's F1 in points (none scored: {})."""
    splits = sorted({split for r in results for split in (r.get("reported") or {})})
    by = {(r["arm"], r["seed"]): r for r in results}
    return {split: [{"seed": seed, **{arm: round(100 * by[(arm, seed)]["reported"][split]["OVERALL"]["f1"], 3)
                                      for arm in ("A", "B")
                                      if split in ((by.get((arm, seed)) or {}).get("reported") or {})}}
                    for seed in spec.seeds] for split in splits}


def reported_table(reported: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The Markdown table of :func:`reported_tests`: a row per seed, A's and B's F1 per test split."""
    splits = list(reported)
    header = ["seed", *(f"{arm} {split} F1" for split in splits for arm in ("A", "B"))]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in enumerate(reported[splits[0]]):
        cells = [_cell(reported[split][index].get(arm)) for split in splits for arm in ("A", "B")]
        rows.append("| " + " | ".join([str(row["seed"]), *cells]) + " |")
    return rows


def score_test_splits(spec: Spec, out: Path, work: Path, splits: list[str] | None = None,
                      evaluate: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """Score every result's model on the test ``splits`` (default: the params' ``evaluate.test_splits``) through
    the evaluate stage's function
    (:func:`evaluation.benchmark.evaluate_model`), after the verdict: refused while there is none, or where it was
    reached under another rule. The scores go into each result under ``reported``; the report is written again."""
    from comparisons.ab import result_path
    from experiments.params import load_params

    if evaluate is None:
        from evaluation.benchmark import evaluate_model as evaluate
    written = out / f"{spec.name}.json"
    previous = json.loads(written.read_text(encoding="utf-8")) if written.is_file() else {}
    if previous.get("rule_sha256") != spec.rule_sha256 or (previous.get("verdict") or {}).get("keep") is None:
        raise ComparisonError(f"{written}: no verdict of this rule yet; test splits are scored only after it")
    params = load_params(spec.params)
    settings = params["evaluate"]
    splits = list(settings["test_splits"] if splits is None else splits)
    for split in splits:
        if not is_test_split(split, params):
            raise ComparisonError(f"{split!r} is not a test split (a dev split decides, in the spec's decide_on)")
    for result in read_results(spec, out):
        missing = [split for split in splits if split not in (result.get("reported") or {})]
        if not missing:
            continue
        predictions = work / spec.name / result["arm"] / f"seed{result['seed']}" / "test_predictions"
        scores = evaluate(Path(result["model_dir"]), spec.prepared, predictions, splits=missing,
                          batch_size=int(settings["batch_size"]), device=str(settings["device"]),
                          **({"threads": int(settings["threads"])} if settings.get("threads") else {}))
        result["reported"] = {**(result.get("reported") or {}), **{split: scores[split] for split in missing}}
        atomic_write_text(result_path(out, spec, result["arm"], result["seed"]), json.dumps(result, indent=1) + "\n")
    return write_report(spec, out)
