"""MuJoCo locomotion on MJX: thousands of worlds per accelerator, as a torch VecEnv.

- ``env``: ``MJXEnv``, the VecEnv (torch tensors in and out, through DLPack).
- ``step``: the one jitted program: a step with its auto-reset, which also starts worlds.
- ``tasks``: gymnasium's v5 tasks (rewards, terminations, observations) in pure JAX.
- ``physics``: gymnasium's model with the options of the exact or the fast physics.
- ``params``: the keywords a user passes to a task, checked.
- ``setup``: JAX inside a torch process: settings, compilation cache, devices.
- ``memory``: the bytes one world takes on its device, counted from the model.
"""
