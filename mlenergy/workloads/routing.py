"""Count which experts a Mixture-of-Experts model routes tokens to (expert utilisation).

Forward hooks on the router modules of transformers 5.x MoE blocks (``MixtralTopKRouter``,
``Qwen3MoeTopKRouter``, ``DeepseekV3TopkRouter``...) read the selected expert indices, the
last element of the router's output tuple. Hooks are only attached during unmeasured work
(the warm-up), so they never add overhead to a measured window. Routers of other shapes are
ignored, and the result is then ``None``.
"""

from __future__ import annotations

from typing import Any

import torch


class ExpertCounter:
    """Context manager that counts routed tokens per expert over every MoE layer.

    Args:
        model: The model to observe.
        num_experts: Routed experts per MoE layer (``None``: count nothing).
    """

    def __init__(self, model: torch.nn.Module, num_experts: int | None) -> None:
        self.num_experts = num_experts
        self.counts: dict[str, torch.Tensor] = {}
        self._handles: list[Any] = []
        self._routers = (
            [
                (name, module)
                for name, module in model.named_modules()
                if type(module).__name__.lower().endswith(("router", "topkrouter"))
            ]
            if num_experts
            else []
        )

    def __enter__(self) -> ExpertCounter:
        for name, module in self._routers:
            self._handles.append(module.register_forward_hook(self._hook(name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, name: str) -> Any:
        def hook(module: torch.nn.Module, args: Any, output: Any) -> None:
            if not isinstance(output, tuple) or not output:
                return
            indices = output[-1]
            if not (
                isinstance(indices, torch.Tensor) and indices.dtype in (torch.int64, torch.int32)
            ):
                return
            flat = indices.detach().reshape(-1).to("cpu", torch.int64)
            n = self.num_experts
            if n is None or flat.numel() == 0 or int(flat.max()) >= n:
                return
            counts = torch.bincount(flat, minlength=n)
            self.counts[name] = self.counts.get(name, torch.zeros_like(counts)) + counts

        return hook

    def utilisation(self) -> tuple[float, ...] | None:
        """Fraction of routed tokens per expert, averaged over layers (sums to 1), or ``None``."""
        shares = [c.double() / c.sum() for c in self.counts.values() if int(c.sum()) > 0]
        if not shares:
            return None
        mean = torch.stack(shares).mean(dim=0)
        return tuple(float(x) for x in mean)
