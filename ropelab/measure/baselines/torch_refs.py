"""Reference formulas in PyTorch (also run on CPU tensors by the tests when torch is installed)."""

from __future__ import annotations

from ...freqs import DEFAULT_BASE


def torch_complex_seed(x, positions_cpu, base: float = DEFAULT_BASE):
    """The seed's recipe: complex multiply by ``polar(1, pos * base**(-2i/hidden))``.

    ``x`` is ``[tokens, hidden]`` float32 on the GPU; ``positions_cpu`` a CPU int tensor.  The
    angle table is computed on the CPU and copied to x's device on every call, as in the seed.
    """
    import torch

    hidden = x.shape[-1]
    exponents = torch.arange(0, hidden, 2).float() / hidden
    inv_freq = 1.0 / (base ** exponents)
    angles = torch.outer(positions_cpu.float(), inv_freq).to(x.device)
    unit = torch.polar(torch.ones_like(angles), angles)
    pairs = torch.view_as_complex(x.float().reshape(x.shape[0], -1, 2))
    return torch.view_as_real(pairs * unit).reshape(x.shape).type_as(x)


def torch_tables(positions, hidden: int, base: float = DEFAULT_BASE):
    """cos and sin ``[tokens, hidden/2]`` float32, computed in float64 once."""
    import torch

    exponents = torch.arange(0, hidden, 2, dtype=torch.float64, device=positions.device) / hidden
    angles = positions.double()[:, None] * base ** (-exponents)[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def torch_rotate(x, cos, sin):
    """Interleaved-pair rotation with cached tables: ``[tokens, hidden]`` in, same out."""
    import torch

    even, odd = x[:, 0::2], x[:, 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).reshape(x.shape)
