"""The feature cache and TokenEmbedder: build, reuse, invalidation, OOV policies, persistence."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corpus.labels import LABEL_TO_ID
from embeddings import cache as cache_module
from embeddings.cache import build_feature_cache
from embeddings.embedder import TokenEmbedder
from embeddings.sources import load_word_vectors
from embeddings.store import CACHE_FORMAT, FeatureCacheError, SourceMismatchError, load_split
from embeddings.vocab import PAD, UNK, UNK_ID, build_vocab, clitic_parts, random_oov_vector
from tests.fixture_corpus import write_cue_caches
from tests.helpers import read_word2vec_text, write_word2vec_text

REPO = Path(__file__).resolve().parents[1]
VECTORS = {
    "the": [0.1, 0.2, 0.3, 0.4],
    "cat": [0.5, -0.5, 0.25, 1.0],
    "sat": [-1.0, 0.0, 0.5, 0.75],
    "on": [0.0, 0.0, 1.0, -1.0],
    "mat": [0.3, 0.3, -0.3, 0.3],
    "do": [0.2, 0.1, 0.0, -0.2],
    "n't": [0.9, -0.1, 0.2, 0.0],
}
SPLITS = {
    "train": [("the", "O"), ("cat", "O"), ("sat", "COMMA"), ("the", "O"), ("zyx", "O"), ("do", "O"),
              ("n't", "PERIOD"), ("the", "O"), ("mat", "QUESTION")],
    "dev": [("the", "O"), ("dog", "O"), ("sat", "PERIOD")],
    "ref": [("\ufffd?cat", "O"), ("on", "O"), ("mat", "PERIOD")],
    "asr": [("qwerty", "O"), ("qwerty", "COMMA"), ("the", "PERIOD")],
}


def write_split(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w}\t{label}\n" for w, label in rows), encoding="utf-8")
    return path


@pytest.fixture()
def setup(tmp_path):
    prepared = tmp_path / "prepared"
    for split, rows in SPLITS.items():
        write_split(prepared / f"{split}.tsv", rows)
    source = write_word2vec_text(tmp_path / "vectors.txt", VECTORS)
    spec = {"type": "word2vec-text", "path": str(source)}
    return prepared, tmp_path / "features", spec


def vec(word):
    return np.asarray(VECTORS[word], dtype=np.float32)


def stamp(path: Path):
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def test_vocab_order_and_min_count():
    words = ["b", "a", "c", "a", "b", "d", "a"]
    assert build_vocab(words) == [PAD, UNK, "a", "b", "c", "d"]
    assert build_vocab(words, min_count=2) == [PAD, UNK, "a", "b"]


def test_build_writes_arrays_and_manifest(setup):
    prepared, out, spec = setup
    paths = build_feature_cache(prepared, out, word_source=spec, oov="zero")
    assert paths.rebuilt and set(paths) == {"train", "dev", "ref", "asr"}
    assert paths["train"] == out / "train"

    train = load_split(out, "train")
    assert isinstance(train.vectors, np.memmap)
    assert train.vectors.dtype == np.float32 and train.vectors.shape == (9, 4)
    assert train.ids.dtype == np.int32 and train.labels.dtype == np.int8 and train.oov.dtype == np.bool_
    np.testing.assert_array_equal(train.vectors[1], vec("cat"))
    np.testing.assert_array_equal(train.vectors[4], np.zeros(4, np.float32))  # "zyx": OOV, zero policy
    assert train.oov.tolist() == [False, False, False, False, True, False, False, False, False]
    assert train.labels.tolist() == [LABEL_TO_ID[label] for _, label in SPLITS["train"]]
    vocab = (out / "embedder" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    # most frequent first ("the" x3), then alphabetical
    assert vocab == [PAD, UNK, "the", "cat", "do", "mat", "n't", "sat", "zyx"]
    assert train.ids.tolist() == [2, 3, 7, 2, 8, 4, 6, 2, 5]

    dev = load_split(out, "dev")
    assert dev.ids.tolist() == [2, UNK_ID, 7] and dev.oov.tolist() == [False, True, False]
    ref = load_split(out, "ref")  # mangled-prefix fallback finds "cat"
    assert ref.oov.tolist() == [False, False, False]
    np.testing.assert_array_equal(ref.vectors[0], vec("cat"))
    assert ref.ids[0] == UNK_ID  # ids are the raw tokens' (not in the training vocab)

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cache_format"] == CACHE_FORMAT
    assert manifest["word_source"] == {"type": "word2vec-text", "path": spec["path"]}
    assert manifest["fingerprint"].startswith("sha256:") and manifest["oov"] == "zero" and manifest["dim"] == 4
    assert manifest["vocab_size"] == 9 and len(manifest["vocab_sha256"]) == 64
    assert set(manifest["inputs"]) == {"train", "dev", "ref", "asr"}
    assert manifest["splits"]["asr"] == {
        "tokens": 3, "oov_tokens": 2, "oov_types": 1, "types": 2,
        "coverage_tokens": 33.333, "coverage_types": 50.0, "unk_tokens": 2,
    }
    assert manifest["splits"]["train"]["coverage_tokens"] == pytest.approx(100 * 8 / 9, abs=1e-3)
    assert not list(out.parent.glob(".features.*"))  # no temp leftovers


def test_reuse_then_rebuild_on_any_change(setup, caplog):
    prepared, out, spec = setup
    build_feature_cache(prepared, out, word_source=spec, oov="random")
    vectors_file = out / "train" / "vectors.npy"
    before = stamp(vectors_file)

    with caplog.at_level(logging.INFO, logger="embeddings.cache"):
        again = build_feature_cache(prepared, out, word_source=spec, oov="random")
    assert not again.rebuilt and stamp(vectors_file) == before
    assert "cache up to date" in caplog.text

    # Stale-cache guard: same path, same size, same mtime, different vector bytes.
    source = Path(spec["path"])
    stat = source.stat()
    changed = dict(VECTORS, cat=[0.7, -0.5, 0.25, 1.0])
    write_word2vec_text(source, changed)
    assert source.stat().st_size == stat.st_size
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    rebuilt = build_feature_cache(prepared, out, word_source=spec, oov="random")
    assert rebuilt.rebuilt
    np.testing.assert_array_equal(load_split(out, "train").vectors[1], np.float32([0.7, -0.5, 0.25, 1.0]))

    # OOV policy change.
    before = load_split(out, "train").vectors[4].copy()
    assert build_feature_cache(prepared, out, word_source=spec, oov="mean").rebuilt
    mean = np.float32(list(changed.values())).mean(axis=0, dtype=np.float64).astype(np.float32)
    np.testing.assert_array_equal(load_split(out, "train").vectors[4], mean)
    assert not np.array_equal(before, mean)

    # A split file changes.
    write_split(prepared / "dev.tsv", [("cat", "O"), ("on", "PERIOD")])
    assert build_feature_cache(prepared, out, word_source=spec, oov="mean").rebuilt
    assert load_split(out, "dev").labels.tolist() == [0, LABEL_TO_ID["PERIOD"]]
    assert not build_feature_cache(prepared, out, word_source=spec, oov="mean").rebuilt


def test_failed_build_keeps_old_cache(setup, monkeypatch):
    prepared, out, spec = setup
    build_feature_cache(prepared, out, word_source=spec, oov="zero")
    manifest = (out / "manifest.json").read_text()
    original = cache_module._write_split

    def fail_on_ref(split, *args, **kwargs):
        if split == "ref":
            raise KeyboardInterrupt
        return original(split, *args, **kwargs)

    monkeypatch.setattr(cache_module, "_write_split", fail_on_ref)
    with pytest.raises(KeyboardInterrupt):
        build_feature_cache(prepared, out, word_source=spec, oov="mean")
    assert (out / "manifest.json").read_text() == manifest  # old, complete cache untouched
    assert not list(out.parent.glob(".features.*"))
    monkeypatch.undo()
    assert not build_feature_cache(prepared, out, word_source=spec, oov="zero").rebuilt


def test_random_oov_is_deterministic_across_processes(setup):
    _, _, spec = setup
    words = ["zyx", "qwerty", "\ufffd?", "ünïcode"]
    script = (
        "import json, sys\n"
        "from embeddings.embedder import TokenEmbedder\n"
        "spec, words = json.loads(sys.argv[1]), json.loads(sys.argv[2])\n"
        "e = TokenEmbedder(spec, 'random', ['the'])\n"
        "print(e.embed(words).vectors.tobytes().hex())\n"
    )
    args = [sys.executable, "-c", script, json.dumps(spec), json.dumps(words)]
    outputs = [subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
               for _ in range(2)]
    here = TokenEmbedder(spec, "random", ["the"]).embed(words)
    assert outputs[0] == outputs[1] == here.vectors.tobytes().hex()
    assert here.oov.all()
    assert len({bytes(row) for row in here.vectors.view(np.uint8)}) == len(words)  # distinct per word
    # sigma is the std of the source's vectors
    sigma = float(np.std(np.float32(list(VECTORS.values())), dtype=np.float64))
    np.testing.assert_array_equal(here.vectors[0], random_oov_vector("zyx", 4, sigma))


def test_embedder_save_load_round_trip(setup, tmp_path):
    _, _, spec = setup
    embedder = TokenEmbedder(spec, "random", build_vocab(["cat", "the", "cat"]))
    words = ["the", "cat", "zyx", "\ufffd?mat", "new-word", "the"]
    first = embedder.embed(words)
    embedder.save(tmp_path / "emb")
    meta = json.loads((tmp_path / "emb" / "embedder.json").read_text())
    assert meta["word_source"]["type"] == "word2vec-text" and meta["oov"] == "random" and meta["dim"] == 4
    assert meta["fingerprint"] == embedder.fingerprint
    loaded = TokenEmbedder.load(tmp_path / "emb")
    second = loaded.embed(words)
    assert second.vectors.tobytes() == first.vectors.tobytes()
    np.testing.assert_array_equal(second.ids, first.ids)
    np.testing.assert_array_equal(second.oov, first.oov)
    assert first.ids.tolist() == [3, 2, UNK_ID, UNK_ID, UNK_ID, 3]
    assert first.oov.tolist() == [False, False, True, False, True, False]

    # The saved embedder carries its vectors: the source file changing, or going, changes nothing.
    write_word2vec_text(Path(spec["path"]), dict(VECTORS, the=[9.0, 9.0, 9.0, 9.0]))
    assert TokenEmbedder.load(tmp_path / "emb").embed(words).vectors.tobytes() == first.vectors.tobytes()
    Path(spec["path"]).unlink()
    assert TokenEmbedder.load(tmp_path / "emb").embed(words).vectors.tobytes() == first.vectors.tobytes()


def test_an_embedder_directory_of_format_1_still_loads_from_its_source(setup, tmp_path):
    """Directories saved before the vectors went inside (no table) re-read their source, and refuse a changed one."""
    _, _, spec = setup
    embedder = TokenEmbedder(spec, "random", build_vocab(["cat", "the"]))
    words = ["the", "cat", "zyx", "we've"]
    embedder.save(tmp_path / "emb")
    meta_path = tmp_path / "emb" / "embedder.json"
    meta = json.loads(meta_path.read_text())
    del meta["table"]
    meta["embedder_format"] = 1
    meta_path.write_text(json.dumps(meta))
    for leftover in (tmp_path / "emb").glob("word_vectors_*"):
        leftover.unlink()
    again = TokenEmbedder.load(tmp_path / "emb").embed(words)
    assert again.vectors.tobytes() == embedder.embed(words).vectors.tobytes()
    write_word2vec_text(Path(spec["path"]), dict(VECTORS, the=[9.0, 9.0, 9.0, 9.0]))
    with pytest.raises(SourceMismatchError, match="fingerprint"):
        TokenEmbedder.load(tmp_path / "emb")


def test_the_cache_embedder_holds_the_vectors_of_its_splits_words_only(setup):
    """The table keeps the keys the lookup rules used for the splits' words (a fallback's key, a contraction's
    parts); any other word gets the rules against the table, else the OOV policy."""
    prepared, out, spec = setup
    source = Path(spec["path"])
    write_word2vec_text(source, dict(VECTORS, dog=[1.0, 1.0, 1.0, 1.0], we=[1, 2, 3, 4], **{"'ve": [3, 4, 5, 6]},
                                     elephant=[2.0, 0.0, 0.0, 2.0]))
    write_split(prepared / "asr.tsv", [("we've", "O"), ("\ufffd?gimme", "O"), ("qwerty", "PERIOD")])
    build_feature_cache(prepared, out, word_source=spec, oov="random")
    keys = (out / "embedder" / "word_vectors_words.txt").read_text(encoding="utf-8").splitlines()
    # every key the splits' words used, "dog" from dev, the parts of "we've"; not "elephant" (in no split)
    assert set(keys) == {"the", "cat", "sat", "on", "mat", "do", "n't", "dog", "we", "'ve"}
    assert np.load(out / "embedder" / "word_vectors_vectors.npy").shape == (len(keys), 4)
    meta = json.loads((out / "embedder" / "embedder.json").read_text())
    assert meta["embedder_format"] == 2 and meta["table"]["rows"] == len(keys) and meta["table"]["dim"] == 4
    full = TokenEmbedder(spec, "random", ["the"])
    loaded = TokenEmbedder.load(out / "embedder")
    assert loaded.oov_stats == full.oov_stats  # the OOV statistics of the whole source
    elephant = loaded.embed(["elephant", "you've", "\ufffd?dog"])
    assert elephant.oov.tolist() == [True, True, False]  # outside the table: the OOV rule, as any unknown word
    np.testing.assert_array_equal(elephant.vectors[0], random_oov_vector("elephant", 4, full.oov_stats["sigma"]))
    np.testing.assert_array_equal(elephant.vectors[2], np.float32([1.0, 1.0, 1.0, 1.0]))


def test_a_cache_without_the_vector_table_is_rebuilt(setup):
    prepared, out, spec = setup
    build_feature_cache(prepared, out, word_source=spec, oov="zero")
    assert not build_feature_cache(prepared, out, word_source=spec, oov="zero").rebuilt
    (out / "embedder" / "word_vectors_vectors.npy").unlink()
    assert build_feature_cache(prepared, out, word_source=spec, oov="zero").rebuilt
    assert (out / "embedder" / "word_vectors_vectors.npy").is_file()


def test_a_damaged_vector_table_is_named(setup):
    prepared, out, spec = setup
    build_feature_cache(prepared, out, word_source=spec, oov="zero")
    table = out / "embedder" / "word_vectors_vectors.npy"
    table.write_bytes(table.read_bytes()[:-8])  # truncated
    with pytest.raises(FeatureCacheError, match="word_vectors_vectors.npy"):
        TokenEmbedder.load(out / "embedder")
    (out / "embedder" / "word_vectors_words.txt").unlink()
    with pytest.raises(FeatureCacheError, match="word_vectors_words.txt: missing"):
        TokenEmbedder.load(out / "embedder")


def test_a_saved_embedder_loads_from_any_folder_without_gensim_or_its_source(setup, tmp_path):
    """A cache built from a word2vec-text file named by a *relative* path: its embedder loads from another
    folder, after the file changed and after it is gone, with numpy alone."""
    prepared, _, spec = setup
    project = tmp_path / "project"
    project.mkdir()
    (project / "vectors.txt").write_bytes(Path(spec["path"]).read_bytes())
    here = os.getcwd()
    os.chdir(project)
    try:
        build_feature_cache(prepared, project / "features",
                            word_source={"type": "word2vec-text", "path": "vectors.txt"}, oov="random")
    finally:
        os.chdir(here)
    expected = {split: load_split(project / "features", split).vectors.tobytes().hex() for split in SPLITS}
    write_word2vec_text(project / "vectors.txt", dict(VECTORS, the=[9.0, 9.0, 9.0, 9.0]))
    script = (
        "import json, sys\n"
        "from embeddings.embedder import TokenEmbedder\n"
        "e = TokenEmbedder.load(sys.argv[1])\n"
        "splits = json.loads(sys.argv[2])\n"
        "print(json.dumps({'vectors': {s: e.embed(w).vectors.tobytes().hex() for s, w in splits.items()},\n"
        "                  'gensim': 'gensim' in sys.modules}))\n"
    )
    words = json.dumps({split: [w for w, _ in rows] for split, rows in SPLITS.items()})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for _ in ("changed", "gone"):
        result = subprocess.run([sys.executable, "-c", script, str(project / "features" / "embedder"), words],
                                cwd=elsewhere, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                                text=True, check=True)
        loaded = json.loads(result.stdout)
        assert loaded == {"vectors": expected, "gensim": False}
        (project / "vectors.txt").unlink(missing_ok=True)


def test_cached_vectors_equal_inference_vectors(setup):
    prepared, out, spec = setup
    build_feature_cache(prepared, out, word_source=spec, oov="random")
    embedder = TokenEmbedder.load(out / "embedder")
    for split, rows in SPLITS.items():
        features = load_split(out, split)
        again = embedder.embed([w for w, _ in rows])
        assert again.vectors.tobytes() == np.asarray(features.vectors).tobytes()
        np.testing.assert_array_equal(again.ids, features.ids)


def test_none_source(setup):
    prepared, out, _ = setup
    spec = {"type": "none", "path": None}
    build_feature_cache(prepared, out, word_source=spec, oov="zero")
    train = load_split(out, "train")
    assert train.vectors.shape == (9, 0) and train.vectors.dtype == np.float32
    assert train.ids.tolist()[:3] == [2, 3, 7]
    assert train.labels.tolist() == [LABEL_TO_ID[label] for _, label in SPLITS["train"]]
    embedder = TokenEmbedder.load(out / "embedder")
    assert embedder.dim == 0
    embedded = embedder.embed(["the", "unknown"])
    assert embedded.vectors.shape == (2, 0) and embedded.ids.tolist() == [2, UNK_ID]


def test_load_split_errors(setup, tmp_path):
    prepared, out, spec = setup
    with pytest.raises(FeatureCacheError, match=str(tmp_path / "nowhere" / "manifest.json")):
        load_split(tmp_path / "nowhere", "train")
    build_feature_cache(prepared, out, word_source=spec, oov="zero", splits=("dev",))
    assert (out / "embedder" / "vocab.txt").read_text().split("\n")[2] == "the"  # vocab still from train
    with pytest.raises(FeatureCacheError, match="no split 'train'"):
        load_split(out, "train")
    np.save(out / "dev" / "ids.npy", np.zeros(5, dtype=np.int32))
    with pytest.raises(FeatureCacheError, match="ids.npy"):
        load_split(out, "dev")
    # A damaged cache is rebuilt only when inputs change; `force` rebuilds regardless.
    assert build_feature_cache(prepared, out, word_source=spec, oov="zero", splits=("dev",), force=True).rebuilt
    assert len(load_split(out, "dev")) == 3


def test_bad_arguments(setup):
    prepared, out, spec = setup
    with pytest.raises(ValueError, match="unknown OOV policy 'median'"):
        build_feature_cache(prepared, out, word_source=spec, oov="median")
    with pytest.raises(ValueError, match="unknown type"):
        build_feature_cache(prepared, out, word_source={"type": "bert"}, oov="zero")
    with pytest.raises(FileNotFoundError, match="test.tsv"):
        build_feature_cache(prepared, out, word_source=spec, oov="zero", splits=("train", "test"))


def test_contractions_left_whole_get_the_mean_of_their_parts(tmp_path):
    assert clitic_parts("we've") == ("we", "'ve")
    assert clitic_parts("it\u2019s") == ("it", "'s")
    assert clitic_parts("'ve") is None and clitic_parts("rock'n'") is None
    vectors = tmp_path / "v.txt"
    vectors.write_text("2 3\nwe 1 2 3\n've 3 4 5\n", encoding="utf-8")
    embedder = TokenEmbedder({"type": "word2vec-text", "path": str(vectors)}, "zero", ["<pad>", "<unk>"])
    embedded = embedder.embed(["we've", "you've"])
    assert np.allclose(embedded.vectors[0], [2, 3, 4]) and not embedded.oov[0]
    assert embedded.oov[1] and np.allclose(embedded.vectors[1], 0)


def test_the_names_callers_import_from_embeddings_cache_are_still_there():
    """pipeline/embed.py and punctuate import these from embeddings.cache."""
    import embeddings
    from embeddings import embedder, store

    assert cache_module.TokenEmbedder is embedder.TokenEmbedder is embeddings.TokenEmbedder
    assert cache_module.read_manifest is store.read_manifest is embeddings.read_manifest
    assert cache_module.SPLITS == store.SPLITS and cache_module.SPEECH_JSON == store.SPEECH_JSON
    assert all(hasattr(cache_module, name) for name in cache_module.__all__)
    assert all(hasattr(embeddings, name) for name in embeddings.__all__)


def block_gensim(monkeypatch, source: dict) -> None:
    """Make gensim unimportable (as on a GPU machine without it) until ``monkeypatch`` undoes it; checks it took."""
    for name in ("gensim", "gensim.models"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ModuleNotFoundError, match="gensim"):
        load_word_vectors(source)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path, with its bytes."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_build_from_vectors_in_memory_needs_no_gensim_and_gives_the_bytes_of_a_build_from_the_source(
        setup, tmp_path, monkeypatch):
    pytest.importorskip("gensim", reason="gensim (to build the cache to compare with) is not installed")
    prepared, out, spec = setup
    cues = write_word2vec_text(tmp_path / "cues.txt", {w: [0.5 * i, -0.25] for i, w in enumerate(VECTORS)})
    speech = {"type": "word2vec-text", "path": str(cues)}
    build_feature_cache(prepared, out, word_source=spec, oov="random", speech_source=speech, combine="concat")
    block_gensim(monkeypatch, spec)
    in_memory = tmp_path / "in_memory"
    assert build_feature_cache(prepared, in_memory, word_source=spec, oov="random", speech_source=speech,
                               combine="concat", word_vectors=read_word2vec_text(Path(spec["path"])),
                               speech_vectors=read_word2vec_text(cues)).rebuilt
    assert tree_bytes(in_memory) == tree_bytes(out)
    # the key is the source files', so either build reuses the other's cache
    assert not build_feature_cache(prepared, out, word_source=spec, oov="random", speech_source=speech,
                                   combine="concat", word_vectors=read_word2vec_text(Path(spec["path"])),
                                   speech_vectors=read_word2vec_text(cues)).rebuilt
    float64 = read_word2vec_text(Path(spec["path"]))
    float64.vectors = float64.vectors.astype(np.float64)
    with pytest.raises(ValueError, match="word_vectors must be float32"):
        build_feature_cache(prepared, tmp_path / "float64", word_source=spec, oov="random", word_vectors=float64)


def test_the_cue_caches_of_the_training_tests_build_without_gensim_and_equal_those_gensim_builds(
        tmp_path, monkeypatch):
    """``write_cue_caches`` (tests/test_training_graph.py's and test_training_determinism.py's caches) on a machine
    without gensim: the caches it builds are the ones built from their manifests' sources loaded by gensim."""
    root = tmp_path / "caches"
    root.mkdir()
    block_gensim(monkeypatch, {"type": "word2vec-text", "path": str(write_word2vec_text(tmp_path / "v.txt", VECTORS))})
    write_cue_caches(root, sentences_per_talk=10, train_tokens=360, words_name="vectors", ids_name="ids")
    monkeypatch.undo()
    pytest.importorskip("gensim", reason="gensim (to build the caches to compare with) is not installed")
    for name in ("vectors", "ids", "cues"):
        manifest = json.loads((root / name / "manifest.json").read_text(encoding="utf-8"))
        speech = manifest.get("speech", {})
        again = build_feature_cache(root / "prepared", tmp_path / "gensim" / name, word_source=manifest["word_source"],
                                    oov=manifest["oov"], splits=manifest["split_names"],
                                    vocab_min_count=manifest["vocab_min_count"], speech_source=speech.get("source"),
                                    combine=speech.get("combine", "sum"))
        assert again.rebuilt and tree_bytes(again.root) == tree_bytes(root / name), name
    assert json.loads((root / "cues" / "manifest.json").read_text())["dim"] == 10  # 8 word + 2 cue columns
