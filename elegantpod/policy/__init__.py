"""Deployment: a trained actor as a :class:`~elegantpod.policy.policy.Policy`.

- ``policy``: ``Policy`` (``predict``), loaded from a checkpoint, a run folder or a store.
- ``export``: the policy as a file that runs without elegantpod (ONNX, ``torch.export``,
  TorchScript).
- ``recording``: deterministic episodes rendered to a video that shows in Jupyter.
"""
