"""`N`: a new sweep, next to `n` (a new run): the sweep spec as YAML, checked by the daemon on ctrl+s.

The spec starts from the highlighted run (its worker, algorithm, env, steps,
seed and params as the base) with an example search space over one of its
numeric params; every field is the one `mosaic sweep SPEC.yaml` reads
(daemon/sweeps.py). A refusal (an unknown param, a value the worker's schema
refuses) is shown under the editor, naming its field, and nothing starts.
"""
from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static, TextArea

from daemon import protocol as P
from mosaic_tui.widgets.banner import TitleBar
from mosaic_tui.widgets.key_bar import KeyBar

BASE_KEYS = ("worker", "algo", "env", "steps", "seed", "device", "params")


def template(run: dict[str, Any] | None) -> str:
    """A spec to edit: the run's config as the base, a grid over its first numeric param."""
    import yaml
    config = (run or {}).get("config") or {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1",
                                              "steps": 20000, "seed": 1, "params": {}}
    base = {k: config[k] for k in BASE_KEYS if config.get(k) is not None}
    numeric = [k for k, v in (base.get("params") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    space: dict[str, Any] = {}
    if numeric:
        value = base["params"][numeric[0]]
        space[numeric[0]] = [value, value * 2] if value else [0, 1]
    spec = {"name": f"{base.get('algo', 'sweep')}-sweep", "base": base, "params": space or {"PARAM": [1, 2]},
            "trials": None, "seeds": 3, "parallel": 2, "sampler": None,
            "objective": {"tag": "episode/return", "last": 20, "agg": "mean", "direction": "maximize"},
            "pruner": {"type": "none"}}
    text = yaml.safe_dump(spec, sort_keys=False)
    return ("# a grid, a list, or {uniform|loguniform|int|categorical: ...} per param;\n"
            "# trials: null = the grid's size; sampler: null = grid for grids, else tpe;\n"
            "# pruner: none | median | successive_halving.  ctrl+s: start, esc: back\n" + text)


class NewSweepScreen(Screen):
    DEFAULT_CSS = """
    NewSweepScreen TextArea {
        height: 1fr;
    }
    NewSweepScreen #sweep-error {
        height: auto;
        padding: 0 1;
        color: $error;
    }
    """

    BINDINGS = [
        Binding("ctrl+s", "submit", "Start sweep", id="new_sweep.submit", priority=True),
        Binding("escape", "back", "Back", id="new_sweep.back"),
    ]

    def __init__(self, run: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.run = run
        self.started: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar("new sweep: a base run config, a search space, seeds, an objective", id="title")
        yield TextArea(template(self.run), language=None, id="sweep-spec")
        yield Static("", id="sweep-error", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_submit(self) -> None:
        import yaml
        error = self.query_one("#sweep-error", Static)
        try:
            spec = yaml.safe_load(self.query_one(TextArea).text)
        except yaml.YAMLError as exc:
            error.update(f"not valid YAML: {str(exc).splitlines()[0]}")
            return
        if not isinstance(spec, dict):
            error.update("the spec must be a mapping (base, params, ...)")
            return
        spec = {k: v for k, v in spec.items() if v is not None}   # null: the default

        async def send() -> None:
            try:
                sweep = await self.app.link.call(P.SWEEP, spec=spec)
            except P.RPCError as exc:
                error.update(exc.message)
                return
            except ConnectionError as exc:
                error.update(str(exc))
                return
            self.started = sweep
            self.app.notify(f"sweep {sweep['name']} started ({sweep['spec']['trials']} trials × "
                            f"{sweep['spec']['seeds']} seeds)", timeout=5)
            self.app.pop_screen()
        self.run_worker(send(), group="new-sweep", exclusive=True)

    def action_back(self) -> None:
        self.app.pop_screen()

    def ui_place(self) -> dict:
        return {"screen": "runs"}
