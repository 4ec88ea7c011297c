"""benchmarks/earnings22_cost.py: the two arms' params and stages (what it times, not how long)."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks import earnings22_cost

REPO = Path(__file__).resolve().parents[1]


def test_the_before_arm_tunes_on_ted_alone_and_the_after_arm_reads_its_own_mix(tmp_path):
    paths = earnings22_cost.write_params(REPO / "params.yaml", tmp_path)
    before = yaml.safe_load(paths["before"].read_text(encoding="utf-8"))
    after = yaml.safe_load(paths["after"].read_text(encoding="utf-8"))
    pipeline = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    assert before["pauses"]["mix"] is None
    # the TED tunings are the mix tunings' settings on TED's feature sets
    for name in earnings22_cost.BEFORE_TUNINGS:
        expected = {**pipeline["tunings"][name.replace("minilm_word_pauses", "minilm_word_pauses_mix")],
                    "features": name.removeprefix("minilm_")}
        assert before["tunings"][name] == expected
    assert after["pauses"] == pipeline["pauses"] and after["tunings"] == pipeline["tunings"]
    mix = after["embed"]["feature_sets"]["word_pauses_mix_control"]
    assert mix["prepared"] == str(tmp_path / "after" / "pauses" / "mix" / "prepared")
    assert mix["speech_source"]["path"] == str(tmp_path / "after" / "pauses" / "mix" / "control")

    stages = {arm: [stage for stage, _ in earnings22_cost.arm_stages(arm, paths[arm], tmp_path, tmp_path / "shared")]
              for arm in ("before", "after")}
    assert stages["before"] == ["fit_pauses", "tune@minilm_word_pauses", "tune@minilm_word_pauses_control"]
    assert stages["after"] == ["prepare_earnings22", "fit_pauses", "embed_set@word_pauses_mix",
                               "embed_set@word_pauses_mix_control", "tune@minilm_word_pauses_mix",
                               "tune@minilm_word_pauses_mix_control", "evaluate_earnings22"]
    # every command writes under the work folder, never into the pipeline's outputs
    for arm in ("before", "after"):
        for _, argv in earnings22_cost.arm_stages(arm, paths[arm], tmp_path, tmp_path / "shared"):
            outputs = [argv[i + 1] for i, flag in enumerate(argv) if flag in ("--out", "--artifacts", "--metrics",
                                                                             "--checkpoints", "--report")]
            assert outputs and all(path.startswith(str(tmp_path)) for path in outputs)
