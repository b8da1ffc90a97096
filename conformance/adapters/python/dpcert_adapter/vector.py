"""dpcert certification vectors (docs/certification.md "Vectors")."""
from .safetensors_io import load_file, save_file


class Vector:
    """A vector file: kind ("step" or "sampling"), meta (str -> str), params (name -> array,
    in the file's order = dpcert's canonical order), batch (name -> array: x, y or tokens)."""

    def __init__(self, tensors, meta):
        self.meta = meta
        self.kind = meta.get("kind")
        self.tensors = tensors
        self.params = {k[len("params."):]: v for k, v in tensors.items() if k.startswith("params.")}
        self.batch = {k[len("batch."):]: v for k, v in tensors.items() if k.startswith("batch.")}

    @classmethod
    def load(cls, path):
        t, m = load_file(path)
        if m.get("format") != "dpcert-vector/1":
            raise ValueError(f"{path}: not a dpcert vector (format {m.get('format')!r})")
        return cls(t, m)

    def num(self, key):
        return float(self.meta[key])

    # DP parameters of a step vector
    @property
    def clip(self):
        return self.num("clip")

    @property
    def sigma(self):
        return self.num("sigma")

    @property
    def c_total(self):
        return self.num("c_total")

    @property
    def expected_batch_size(self):
        return self.num("expected_batch_size")

    def groups(self):
        """(param -> group name, group name -> threshold R) from param_groups / group_thresholds."""
        pg = dict(kv.split(":", 1) for kv in self.meta["param_groups"].split(";"))
        th = {k: float(v) for k, v in (kv.rsplit(":", 1) for kv in self.meta["group_thresholds"].split(";"))}
        return pg, th

    def mlp_sizes(self):
        hidden = [int(h) for h in self.meta.get("hidden", "").split(",") if h]
        return int(self.meta["in"]), hidden, int(self.meta["classes"])


def write_output(path, tensors, meta=None):
    """The candidate's OUT file (atomic)."""
    save_file(path, tensors, meta or {})
