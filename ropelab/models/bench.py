"""One Qwen3-8B-like decoder layer on a GPU, with and without ropelab: the real-model timing.

The bench package's own shared parts time, check, write and print it (:mod:`ropelab.measure.bench`:
the Timer, the ``real_model`` schema, the record writer and the method text); the layer lives
here because transformers is imported under :mod:`ropelab.models` only.

Run on a GPU host (transformers installed)::

    python -m ropelab.models.bench            # print the table
    python -m ropelab.models.bench --record   # and save it under data/real_model/

The layer: ``transformers``' ``Qwen3DecoderLayer`` at Qwen3-8B's attention shape (hidden 4096,
32 q heads, 8 kv heads, head_dim 128, MLP 12288, rope_theta 1e6), bfloat16, random weights,
SDPA attention, one sequence of 4096 tokens.  Rows, each timed by
:class:`ropelab.measure.bench.Timer` (cold L2, CUDA events, medians), in one run:

* ``model``: ``transformers`` (the layer as shipped), ``qkv_gemm`` (the control: one qkv GEMM,
  then transformers' own q_norm, k_norm and rotation; ``patch_qwen3(..., qk="transformers")``)
  or ``ropelab`` (the same layer after :func:`ropelab.models.qwen3.patch_qwen3`: one qkv GEMM,
  the fused QK-norm + RoPE op); ropelab against qkv_gemm is the fused op's own share;
  ``ropelab_op`` (eager only): that op alone, ``ropelab.torch_ops.fused_qknorm_rope`` as the
  patched layer calls it, on a qkv of the layer's shape with the layer's norm weights; its
  ``note`` says what share of the patched layer's time of the same pass it is;
* ``mode``: ``eager`` or ``compiled`` (``torch.compile(fullgraph=True)`` of the layer, compiled
  and warmed up before timing);
* ``pass``: ``forward`` (under ``torch.no_grad()``) or ``forward_backward`` (the forward, then
  ``backward`` of a fixed output gradient into the parameters' and the input's gradients).

A row that cannot run says why in ``note`` and has no time (a compiled row whose eager twin
failed repeats that failure's message rather than dynamo's less direct one).
``vs_transformers`` is the row's median over the ``transformers`` row of the same mode and pass.
"""

from __future__ import annotations

import argparse
import copy
import sys

QWEN3_8B_LAYER = dict(hidden_size=4096, intermediate_size=12288, num_attention_heads=32,
                      num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                      rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
TOKENS = 4096


def layer_config(tokens: int = TOKENS, **overrides):
    from transformers import Qwen3Config

    options = dict(QWEN3_8B_LAYER, num_hidden_layers=1, vocab_size=1024,
                   max_position_embeddings=max(tokens, 1))
    options.update(overrides)
    config = Qwen3Config(**options)
    config._attn_implementation = "sdpa"
    return config


def layer_case(config, tokens: int, device: str, dtype, seed: int = 0):
    """({model: layer}, inputs): ``transformers``, ``qkv_gemm`` and ``ropelab`` layers holding
    the same weights."""
    import torch
    from transformers.models.qwen3 import modeling_qwen3

    from .qwen3 import patch_qwen3

    torch.manual_seed(seed)
    original = modeling_qwen3.Qwen3DecoderLayer(config, layer_idx=0).to(device=device, dtype=dtype)
    with torch.no_grad():  # nn.Linear's default init; norms drawn away from ones
        for name, p in original.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    layers = {"transformers": original,
              "qkv_gemm": patch_qwen3(copy.deepcopy(original), qk="transformers"),
              "ropelab": patch_qwen3(copy.deepcopy(original))}
    rotary = modeling_qwen3.Qwen3RotaryEmbedding(config).to(device)
    hidden = torch.randn(1, tokens, config.hidden_size, device=device, dtype=dtype)
    position_ids = torch.arange(tokens, device=device)[None, :]
    inputs = dict(hidden_states=hidden, position_ids=position_ids, attention_mask=None,
                  position_embeddings=rotary(hidden, position_ids))
    return layers, inputs


def launchers(layer, inputs: dict, *, compiled: bool):
    """{pass: launcher} for one layer: ``forward`` under no_grad, ``forward_backward`` with the
    input requiring grad and a fixed output gradient."""
    import torch

    run = torch.compile(layer, fullgraph=True) if compiled else layer
    grad_in = inputs["hidden_states"].detach().clone().requires_grad_(True)
    train_inputs = dict(inputs, hidden_states=grad_in)
    grad_out = torch.randn_like(grad_in)

    def forward():
        with torch.no_grad():
            out = run(**inputs)
        return out[0] if isinstance(out, tuple) else out  # older releases return a tuple

    def forward_backward():
        layer.zero_grad(set_to_none=True)
        grad_in.grad = None
        out = run(**train_inputs)
        (out[0] if isinstance(out, tuple) else out).backward(grad_out)

    return {"forward": forward, "forward_backward": forward_backward}


def op_launchers(layer, tokens: int, device: str, dtype) -> dict:
    """{pass: launcher} of the fused op alone, called as the patched ``layer``'s attention
    calls it (:func:`ropelab.models.qwen3.fused_attention_forward`): ``forward`` in place under
    no_grad, ``forward_backward`` out of place on a qkv that requires grad, then ``backward`` of
    a fixed gradient into it and the two norm weights."""
    import torch

    import ropelab.torch_ops as rt

    attn = layer.self_attn
    hq, hk, d = attn.config.num_attention_heads, attn.config.num_key_value_heads, attn.head_dim
    torch.manual_seed(1)
    qkv = torch.randn(tokens, (hq + 2 * hk) * d, device=device, dtype=dtype)
    x = qkv.clone().requires_grad_(True)
    grad_out = torch.randn_like(qkv)
    kw = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hk, head_dim=d,
              q_weight=attn.q_norm.weight, k_weight=attn.k_norm.weight,
              positions=torch.arange(tokens, device=device, dtype=torch.int32),
              eps=attn.q_norm.variance_epsilon, base=attn.ropelab_theta,
              interleave=attn.ropelab_interleave, **attn.ropelab_cos_sin)

    def forward():
        with torch.no_grad():
            return rt.fused_qknorm_rope(qkv, **kw)

    def forward_backward():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        rt.fused_qknorm_rope(x, **kw).backward(grad_out)

    return {"forward": forward, "forward_backward": forward_backward}


def _op_shares(rows: list[dict]) -> None:
    """Each ``ropelab_op`` row's note: its share of the patched layer's time, same pass."""
    layer = {r["pass"]: r["median_us"] for r in rows
             if r["model"] == "ropelab" and r["mode"] == "eager"}
    for r in rows:
        whole = layer.get(r["pass"])
        if r["model"] == "ropelab_op" and r["median_us"] is not None and whole:
            r["note"] = f"{r['median_us'] / whole:.1%} of the patched layer's {r['pass']}"


NOTES = ("one Qwen3DecoderLayer (transformers, SDPA attention) at Qwen3-8B's shape, bfloat16, "
         "4096 tokens, random weights; ropelab = the same layer after "
         "ropelab.models.qwen3.patch_qwen3; compiled = torch.compile(fullgraph=True), warmed up "
         "before timing; forward under torch.no_grad(); forward_backward = forward + backward of "
         "a fixed output gradient (parameter grads reset to None inside the timed call); bytes "
         "columns are omitted: a layer is not a copy",)


def _untimed_row(model: str, mode: str, pass_name: str, shape: dict) -> dict:
    """A row of the record before :func:`_time_row` fills its timing columns."""
    return dict(model=model, mode=mode, **{"pass": pass_name}, **shape, median_us=None,
                p20_us=None, p80_us=None, repeats=0, vs_transformers=None, host_us=None,
                fill_us=None, host_bound=None, note="")


def _time_row(timer, launch, row: dict, failed: str | None) -> float | None:
    """Fill ``row``'s timing columns from ``timer.time(launch)``, or its note; the median."""
    from ..measure.bench import host_fields, quantiles

    try:
        if failed:  # dynamo would only re-raise the eager failure, less clearly
            raise RuntimeError(failed)
        samples = timer.time(launch)
    except Exception as exc:  # recorded as the row's note, the run goes on
        row["note"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        return None
    med, p20, p80 = quantiles(samples)
    row.update(median_us=round(med, 2), p20_us=round(p20, 2), p80_us=round(p80, 2),
               repeats=len(samples), **host_fields(timer.last_host_us, timer.fill_us))
    return med


def _with_ratios(rows: list[dict]) -> list[dict]:
    from ..measure.bench import REAL_MODEL

    base = {(r["mode"], r["pass"]): r["median_us"] for r in rows if r["model"] == "transformers"}
    out = []
    for row in rows:
        ref = base.get((row["mode"], row["pass"]))
        ratio = round(row["median_us"] / ref, 4) if row["median_us"] is not None and ref else None
        out.append(REAL_MODEL.row(row, vs_transformers=ratio))
    return out


def run(record: bool = False, tokens: int = TOKENS, *, timer=None, device: str = "cuda",
        modes=("eager", "compiled"), out=None, **config_overrides) -> list[dict]:
    """Time every row; with ``record``, save after the eager rows and again after the compiled
    ones (the same file), so a run cut short by a time limit keeps what it measured; ``out``: a
    data root for the record (default the checkout's data/).

    ``timer``, ``device``, ``modes`` and ``config_overrides`` exist for the CPU test of the row
    assembly (a stand-in timer, a tiny layer); a GPU run leaves them alone."""
    import torch

    from ..measure import bench

    if timer is None:
        bench.require_gpu()
        if not torch.cuda.is_available():
            raise bench.BenchError("PyTorch has no CUDA device here: the model bench needs one")
        timer = bench.Timer()
    recording = None
    if record:
        import transformers

        recording = bench.Recording("real_model", method=bench.method_text(timer, *NOTES),
                                    meta=bench.run_meta(torch=torch.__version__,
                                                        transformers=transformers.__version__),
                                    out=out)
    config = layer_config(tokens, **config_overrides)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    layers, inputs = layer_case(config, tokens, device, dtype)
    shape = dict(tokens=tokens, hidden=config.hidden_size, heads_q=config.num_attention_heads,
                 heads_kv=config.num_key_value_heads, head_dim=config.head_dim,
                 dtype=str(dtype).removeprefix("torch."))
    rows, failures = [], {}
    for mode in modes:
        for model_name, layer in layers.items():
            for pass_name, launch in launchers(layer, inputs, compiled=mode == "compiled").items():
                row = _untimed_row(model_name, mode, pass_name, shape)
                if _time_row(timer, launch, row, failures.get((model_name, pass_name))) is None:
                    failures.setdefault((model_name, pass_name), row["note"].split(": ", 1)[-1])
                rows.append(row)
                print(bench.format_rows(_with_ratios([row]), "real_model").splitlines()[-1],
                      flush=True)
        if mode == "eager":  # the op alone, beside the layers (a compiled op is the same op)
            for pass_name, launch in op_launchers(layers["ropelab"], tokens, device,
                                                  dtype).items():
                row = _untimed_row("ropelab_op", mode, pass_name, shape)
                _time_row(timer, launch, row, None)
                rows.append(row)
            _op_shares(rows)
        if recording:  # after each mode, the same file: a time limit keeps what finished
            print(f"recorded {recording.save(_with_ratios(rows))} ({len(rows)} rows)")
    rows = _with_ratios(rows)
    print(bench.format_rows(rows, "real_model"))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.models.bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="save the rows under data/real_model/")
    parser.add_argument("--tokens", type=int, default=TOKENS)
    parser.add_argument("--out", default=None, help="data root (default the repo's data/)")
    args = parser.parse_args(argv)
    from ..measure.bench import BenchError

    try:
        run(record=args.record, tokens=args.tokens, out=args.out)
    except BenchError as exc:
        print(f"ropelab.models.bench: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
