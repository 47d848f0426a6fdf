"""Import-time fixes of XuanCe 1.4.4 bugs that keep algorithms from starting; XuanCe's files stay as installed.

Each fix is a post-import hook (workers/sdk/postimport.py): it patches one class
right after XuanCe's module defining it has run, whoever imports it, and
nothing is imported early. ``install()`` is called in the worker's process
(run_setup.prepare_process) and, through sitedir/sitecustomize.py, in every
process XuanCe spawns. Each fix does what the XuanCe code evidently means, and
is a no-op wherever XuanCe already works.
"""
from __future__ import annotations

IAC_LEARNER = "xuance.torch.learners.multi_agent_rl.iac_learner"
MEMORY_TOOLS = "xuance.common.memory_tools"
NPG_LEARNER = "xuance.torch.learners.policy_gradient.npg_learner"
FIXED = "_mosaic_fixed"   # marks a patched method: a second install() leaves it as it is


def _fix_unused_huber_delta(module) -> None:
    """COMA: ``COMA_Learner.__init__`` sets ``config.use_huber_loss, config.huber_delta = False, None``
    (COMA's critic is trained with its own squared TD error) and then calls ``IAC_Learner.__init__``,
    which builds ``nn.HuberLoss(delta=config.huber_delta)`` unconditionally; torch >= 2.x refuses
    ``delta=None`` (TypeError), so COMA never starts. With ``use_huber_loss`` false that loss module
    is never called, so building it with torch's default delta (1.0) changes nothing the learner
    computes; ``config.huber_delta`` and the learner's ``huber_delta`` are put back to None after."""
    learner = module.IAC_Learner
    init = learner.__init__
    if getattr(init, FIXED, False):   # install() ran twice in this process (sitecustomize, then the worker)
        return

    def __init__(self, config, *args, **kwargs):
        if getattr(config, "huber_delta", 1.0) is not None or getattr(config, "use_huber_loss", False):
            return init(self, config, *args, **kwargs)
        config.huber_delta = 1.0   # torch's default, for a loss module that is never used
        try:
            init(self, config, *args, **kwargs)
        finally:
            config.huber_delta = None
        self.huber_delta = None

    setattr(__init__, FIXED, True)
    learner.__init__ = __init__


def _fix_sequential_buffer(module) -> None:
    """DreamerV2/V3: ``SequentialReplayBuffer.__init__`` calls ``Buffer.__init__(observation_space,
    action_space, auxiliary_shape)``, but ``Buffer.__init__`` also takes ``num_envs`` and ``buffer_size``
    (the other buffers pass them; this one does not), so the buffer fails to construct
    (TypeError) and so does every Dreamer agent. Here ``Buffer.__init__`` gets all five; it sets
    ``n_envs``, ``buffer_size``, ``n_size = buffer_size // n_envs``, ``ptr`` and ``size`` -- what the
    rest of XuanCe's ``__init__`` reads, with the same divisibility assert -- and ``clear()`` makes the
    same arrays the rest of XuanCe's ``__init__`` makes (obs, acts, rews, terms, truncs, is_first)."""
    buffer = module.SequentialReplayBuffer
    if getattr(buffer.__init__, FIXED, False):
        return

    def __init__(self, observation_space, action_space, auxiliary_shape, n_envs: int, buffer_size: int,
                 batch_size: int):
        module.Buffer.__init__(self, observation_space, action_space, auxiliary_shape, n_envs, buffer_size)
        self.batch_size = batch_size
        self.clear()

    setattr(__init__, FIXED, True)
    buffer.__init__ = __init__


def _fix_npg_optimizers(module) -> None:
    """NPG: ``NPG_Learner.__init__`` keeps its two optimizers as ``actor_optimizer`` and ``critic_optimizer``
    and leaves the base learner's ``optimizer`` None, so ``Learner.save_model`` (``self.optimizer.state_dict()``)
    fails with AttributeError at NPG's first checkpoint, the final one included. Here ``optimizer`` is both,
    by name, the form ``save_model`` and ``load_model`` already take (a dict: one state each); the learner's
    update still steps them by their own names."""
    learner = module.NPG_Learner
    init = learner.__init__
    if getattr(init, FIXED, False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.optimizer is None:
            self.optimizer = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    setattr(__init__, FIXED, True)
    learner.__init__ = __init__


def install() -> None:
    """The fixes, when (or if already) XuanCe loads the modules they patch."""
    from workers.sdk.postimport import when_imported

    when_imported(IAC_LEARNER, _fix_unused_huber_delta)
    when_imported(MEMORY_TOOLS, _fix_sequential_buffer)
    when_imported(NPG_LEARNER, _fix_npg_optimizers)
