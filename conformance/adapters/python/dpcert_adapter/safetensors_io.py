"""A minimal safetensors reader/writer in numpy + json (docs/formats.md).

File = 8-byte little-endian u64 N, N bytes of UTF-8 JSON header, then the data buffer.
Header: {"NAME": {"dtype": "F64", "shape": [..], "data_offsets": [b, e]}, ...,
"__metadata__": {"key": "string"}}; offsets relative to the buffer, row-major little-endian.
Writes what `safetensors.numpy.load_file` reads (checked by `make test-peers`)."""
import json
import os
import struct
import tempfile

import numpy as np

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}
_NAMES = {np.dtype(v).str: k for k, v in _DTYPES.items()}
MAX_HEADER = 100_000_000


def load_file(path):
    """Returns (tensors: dict name -> np.ndarray, metadata: dict str -> str)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > MAX_HEADER or 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} out of range")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    buf = memoryview(raw)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        dt = _DTYPES.get(info["dtype"])
        if dt is None:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if e - b != count * np.dtype(dt).itemsize or e > len(buf):
            raise ValueError(f"{path}: tensor {name}: data_offsets disagree with the shape")
        out[name] = np.frombuffer(buf[b:e], dtype=dt, count=count).reshape(shape).copy()
    return out, dict(meta)


def read_metadata(path):
    """The __metadata__ of a file, reading only its header."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: shorter than 8 bytes")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise ValueError(f"{path}: header length {n} out of range")
        raw = f.read(n)
    if len(raw) != n:
        raise ValueError(f"{path}: header beyond the file")
    return dict(json.loads(raw.decode("utf-8")).get("__metadata__", {}) or {})


def save_file(path, tensors, metadata=None):
    """Writes atomically (temporary file in the same directory, then rename)."""
    header, chunks, off = {}, [], 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        key = _NAMES.get(a.dtype.str)
        if key is None:
            raise ValueError(f"tensor {name}: unsupported dtype {a.dtype}")
        data = a.tobytes()
        header[name] = {"dtype": key, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        chunks.append(data)
        off += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".st.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
