"""dpcert adapter: read certification vectors, write candidate outputs (docs/certification.md).

    from dpcert_adapter import Vector, write_output
    v = Vector.load(IN)                 # kind, meta, params (canonical order), batch
    write_output(OUT, {"step.private_grad.layers.0.weight": g, ...}, {"dtype": "f64", "clip_fn": "abadi"})

PyTorch modules of dpcert's models: dpcert_adapter.torch_models (imports torch lazily).
"""
from .safetensors_io import load_file, save_file
from .vector import Vector, write_output
from .protocol import run

__all__ = ["load_file", "save_file", "Vector", "write_output", "run"]
