"""`N`: a new sweep, next to `n` (a new run): the sweep spec as YAML, checked by the daemon on ctrl+s.

The spec starts from the highlighted run (its worker, algorithm, env, steps,
seed and params as the base) with an example search space over one of its
numeric params; every field is the one `mosaic sweep SPEC.yaml` reads
(daemon/sweeps.py). A refusal (an unknown param, a value the worker's schema
refuses) is shown under the editor, naming its field, and nothing starts.

Above the editor, the sampler: as the spec says, grid, random, tpe, or pbt (population-based
training): then the population, the interval in env steps, the quantile exploited, and per swept
param its mutation (factors or neighbours, and a resample probability). The form's choices go into
the spec sent (mosaic_tui/sweep_form.py), the same spec the CLI takes.
"""
from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Input, Label, Select, Static, TextArea

from daemon import protocol as P
from mosaic_tui import sweep_form as F
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
            "# pruner: none | median | successive_halving.  ctrl+s: start, esc: back\n"
            "# the sampler above, unless 'as the spec': pbt puts its pbt: block in place of\n"
            "# trials, seeds, parallel, sampler and pruner (the population is the trials)\n" + text)


class MutationRow(Horizontal):
    """One swept param's perturbation in a PBT sweep: factors or neighbours, their values, a resample
    probability."""

    DEFAULT_CSS = """
    MutationRow {
        height: 1;
    }
    MutationRow .mutation-name {
        width: 22;
        text-style: bold;
    }
    MutationRow Select {
        width: 16;
    }
    MutationRow .mutation-values {
        width: 1fr;
    }
    MutationRow .mutation-resample {
        width: 8;
    }
    """

    def __init__(self, param: str, kind: str = "factors", values: str = F.DEFAULT_FACTORS, resample: str = "") -> None:
        super().__init__(classes="mutation-row")
        self.param = param
        self.kind = kind   # kept here: a Select's value reads blank until it is mounted
        self._initial = (values, resample)

    def compose(self) -> ComposeResult:
        values, resample = self._initial
        yield Label(self.param[:21], classes="mutation-name")
        yield Select([(k, k) for k in F.MUTATION_KINDS], value=self.kind, allow_blank=False, compact=True,
                     classes="mutation-kind")
        yield Input(values, placeholder="e.g. 0.8 1.2", compact=True, classes="mutation-values")
        yield Label(" resample ")
        yield Input(resample, placeholder="0", compact=True, classes="mutation-resample")

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()   # the screen's handler is the sampler's
        if event.value in F.MUTATION_KINDS:
            self.kind = str(event.value)

    def fields(self) -> dict[str, str]:
        return {"kind": self.kind,
                "values": self.query_one(".mutation-values", Input).value,
                "resample_probability": self.query_one(".mutation-resample", Input).value}


class NewSweepScreen(Screen):
    DEFAULT_CSS = """
    NewSweepScreen TextArea {
        height: 1fr;
    }
    NewSweepScreen #sweep-method {
        height: 1;
        padding: 0 1;
    }
    NewSweepScreen #sweep-method Label {
        padding: 0 1 0 0;
    }
    NewSweepScreen #sweep-sampler {
        width: 14;
        margin-right: 1;
    }
    NewSweepScreen #sweep-method Input {
        width: 8;
    }
    NewSweepScreen .pbt-only {
        display: none;
    }
    NewSweepScreen.-pbt .pbt-only {
        display: block;
    }
    NewSweepScreen #sweep-mutations {
        height: auto;
        max-height: 8;
        padding: 0 1;
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
        self.sent: dict[str, Any] | None = None   # the spec last sent, as the CLI would send it

    def compose(self) -> ComposeResult:
        yield TitleBar("new sweep: a base run config, a search space, seeds, an objective", id="title")
        steps = ((self.run or {}).get("config") or {}).get("steps") or 20000
        with Horizontal(id="sweep-method"):
            yield Label("sampler")
            yield Select([(s if s != F.FROM_SPEC else "as the spec", s) for s in F.SAMPLERS], value=F.FROM_SPEC,
                         allow_blank=False, compact=True, id="sweep-sampler")
            yield Label("population", classes="pbt-only")
            yield Input(str(F.DEFAULT_POPULATION), compact=True, id="pbt-population", classes="pbt-only")
            yield Label("interval", classes="pbt-only")
            yield Input(str(F.default_interval(steps)), compact=True, id="pbt-interval", classes="pbt-only")
            yield Label("quantile", classes="pbt-only")
            yield Input(str(F.DEFAULT_QUANTILE), compact=True, id="pbt-quantile", classes="pbt-only")
        yield Vertical(id="sweep-mutations", classes="pbt-only")
        yield TextArea(template(self.run), language=None, id="sweep-spec")
        yield Static("", id="sweep-error", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    @property
    def sampler(self) -> str:
        return str(self.query_one("#sweep-sampler", Select).value)

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "sweep-sampler":
            self.set_class(self.sampler == "pbt", "-pbt")
            self.sync_mutations()

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self.sampler == "pbt":
            self.sync_mutations()

    def sync_mutations(self) -> None:
        """A mutation row per swept param of the spec's text; a row's entries kept while its param stays."""
        if self.sampler != "pbt":
            return
        names = F.swept_params(self.query_one(TextArea).text)
        if not names:
            return   # the YAML mid-edit: the rows wait for it to parse
        box = self.query_one("#sweep-mutations", Vertical)
        rows = {row.param: row for row in box.query(MutationRow)}
        if list(rows) == names:
            return
        kept = {name: row.fields() for name, row in rows.items()}
        box.remove_children()
        box.mount_all([MutationRow(n, kept[n]["kind"], kept[n]["values"], kept[n]["resample_probability"])
                       if n in kept else MutationRow(n) for n in names])
        # rows mounted into a box just shown are laid out only at the next layout of the screen
        self.call_after_refresh(self.refresh, layout=True)

    def pbt_fields(self) -> tuple[dict[str, Any], list[str]]:
        """The form's ``pbt:`` block and its mistakes, one line each."""
        mutations = {row.param: row.fields() for row in self.query(MutationRow)}
        return F.pbt_block(self.query_one("#pbt-population", Input).value, self.query_one("#pbt-interval", Input).value,
                           self.query_one("#pbt-quantile", Input).value, mutations)

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
        block = None
        if self.sampler == "pbt":
            block, mistakes = self.pbt_fields()
            if mistakes:
                error.update("\n".join(mistakes))
                return
        spec = F.apply_method(spec, self.sampler, block)
        self.sent = spec

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
            if "pbt" in sweep["spec"]:
                self.app.notify(f"PBT sweep {sweep['name']} started ({sweep['spec']['pbt']['population']} members)",
                                timeout=5)
            else:
                self.app.notify(f"sweep {sweep['name']} started ({sweep['spec']['trials']} trials × "
                                f"{sweep['spec']['seeds']} seeds)", timeout=5)
            self.app.pop_screen()
        self.run_worker(send(), group="new-sweep", exclusive=True)

    def action_back(self) -> None:
        self.app.pop_screen()

    def ui_place(self) -> dict:
        return {"screen": "runs"}
