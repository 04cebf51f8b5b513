"""Write tests/data/old_heads_checkpoint.pt: a small network with the three auxiliary heads as the
code before the head table built it (heads as attributes ``ownership_out``, ``opponent_policy_out``,
``soft_policy_out``; config flags ``*_head``), for tests/test_heads.py.

Run it with the code of a commit before the head table (2ebc8b9) on the path::

    git worktree add /tmp/old 2ebc8b9
    PYTHONPATH=/tmp/old python tests/data/make_old_heads_checkpoint.py tests/data/old_heads_checkpoint.pt

The file holds ``model_config`` (the old dict), ``init_state`` (the state dict of the network as
built after ``torch.manual_seed(1)``), ``model_state`` (those weights and BN statistics moved by
seeded noise, standing in for training), ``planes`` (4, C, 3, 3) and ``outputs``: ``forward_all``
of ``model_state`` on ``planes`` in eval mode.
"""

from __future__ import annotations

import sys

import torch

from takzero.nn.model import ModelConfig, TakNet


def main(path: str) -> None:
    cfg = ModelConfig(size=3, channels=8, blocks=2, gpool_every=2, policy_channels=8, value_channels=8,
                      value_hidden=16, ownership_head=True, opponent_policy_head=True, soft_policy_head=True)
    torch.manual_seed(1)
    net = TakNet(cfg)
    init = {k: v.clone() for k, v in net.state_dict().items()}
    gen = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, v in net.state_dict().items():
            if v.is_floating_point():
                noise = 0.1 * torch.randn(v.shape, generator=gen)
                v.add_(noise.abs() if "running_var" in name else noise)
    planes = torch.rand(4, cfg.in_channels, 3, 3, generator=gen)
    with torch.no_grad():
        outputs = net.eval().forward_all(planes)
    torch.save({"model_config": cfg.to_dict(), "init_state": init, "model_state": net.state_dict(),
                "planes": planes, "outputs": outputs}, path)


if __name__ == "__main__":
    main(sys.argv[1])
