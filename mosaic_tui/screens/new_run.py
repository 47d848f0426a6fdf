"""New run: worker → algorithm → environment → a form generated from the algorithm's schema.

Nothing is submitted until every field is valid; the daemon's own verdict (a
field it refuses) lands under that field too. "Clone and edit" opens this
screen filled from an existing run's config.
"""
from __future__ import annotations

import asyncio
import shlex
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Static

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.new_run_model import (
    COMMON_FIELDS,
    NO_DATASET,
    SECTIONS,
    algo_choice,
    check_placement,
    common_specs,
    env_after,
    envs_for,
    file_text,
    first_worker,
    frames_extra,
    home_placement,
    initial_values,
    kept_from,
    offered_workers,
    param_value,
    placement_fields,
    placement_names,
    placement_specs,
    placement_text,
    refusal_text,
    refused_field,
    remember_typed,
    run_config,
    shown_fields,
    status_line,
)
from mosaic_tui.screens.env_picker import EnvPickerScreen
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.schema_form import SchemaField
from workers.sdk.config import ConfigError


class NewRunScreen(Screen):
    """Everything on the form is derived from three inputs: worker, algorithm and
    environment. ``sync`` re-derives it whenever one of them changes (algorithm
    choices, env suggestions, the schema and its fields), so nothing from a
    previous choice can stay behind. Parameter values carry over only when the
    user chose them (they differ from the old schema's default) and the new
    schema has a field of the same name; such fields are marked."""

    DEFAULT_CSS = """
    NewRunScreen #form {
        height: 1fr;
        padding: 0 1;
    }
    NewRunScreen .section {
        text-style: bold underline;
        margin: 1 0;
    }
    NewRunScreen #schema-desc {
        color: $text-muted;
        margin-bottom: 1;
    }
    NewRunScreen #form-bar {
        height: 3;
        padding: 0 1;
        background: $panel;
    }
    NewRunScreen #form-status {
        width: 1fr;
        padding: 1 0;
    }
    NewRunScreen #form-status.-invalid {
        color: $error;
    }
    NewRunScreen Button {
        margin-left: 1;
    }
    """

    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit", priority=True, id="form.submit"),
        Binding("escape", "back", "Back", id="form.back"),
        # the env picker: ctrl+f anywhere on the form, / where no text box takes it as a character
        Binding("ctrl+f", "pick_env", "Find env", priority=True, id="form.envs"),
        Binding("slash", "pick_env", "Find env", show=False, id="form.envs_slash"),
    ]

    def __init__(self, clone: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.clone = clone
        cfg = (clone or {}).get("config") or {}
        self.initial: dict[str, Any] = initial_values(cfg)
        self.frames_extra = frames_extra(cfg)
        self.clone_params: dict[str, Any] | None = dict(cfg.get("params") or {}) if clone else None
        # a clone's placement; a new run's comes from the home's default when the form is built
        self.clone_placement: dict[str, Any] | None = cfg.get("placement") if clone else None
        self.default_placement: dict[str, Any] | None = None   # the home's, when known
        self.worker_list: list[dict[str, Any]] = []
        self.schema: dict[str, Any] | None = None
        self.schema_error: str | None = None
        self._schema_key: tuple | None = None   # (worker, algo, env) the form asks for
        self.shown_key: tuple | None = None     # (worker, algo, env) of the parameter fields shown
        self.env_problem: tuple[str | None, str | None] = (None, None)   # (env, what the worker said of it)
        self._caps_key: tuple | None = None     # (worker, algo) the algorithm and env choices are for
        self.typed: dict[str, tuple[Any, str]] = {}   # parameter values the user chose: name -> (value, where)
        self.carried: list[str] = []
        self.submitting = False
        # Typing must never wait on the parameters: a key's work reads these lists, not the DOM (a
        # query of the form's ~1000 widgets per key, then a relayout, was 0.4 s of CPU a key: 20 s
        # for 12 characters at load 6-9), and the parameter fields are rebuilt by a worker, never
        # by a handler of the screen's queue, which every key passes through.
        self._fixed_fields: list[SchemaField] = []   # the common and placement fields, made once
        self._param_list: list[SchemaField] = []     # the parameter fields of the schema shown
        self._by_id: dict[str, SchemaField] = {}
        self._status: Static | None = None
        self._submit: Button | None = None
        self._status_shown: tuple[str, bool] | None = None
        self._rebuilding = asyncio.Lock()

    MOUNT_BATCH = 4     # parameter fields mounted at once

    def chosen_key(self) -> tuple:
        """(worker, algo, env) as the fields show them now."""
        return self.common_value("worker"), self.common_value("algo"), self.common_value("env")

    @property
    def loading_schema(self) -> bool:
        """The parameter fields on screen are not (yet) those of the chosen worker, algorithm and env
        (read from the fields themselves: a change not yet handled counts too)."""
        return self.shown_key != self.chosen_key()

    # -- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Every field exists from the start, so keys typed right after `n` or `e`
        # land in the field they were typed at; choices arrive with the workers.
        title = f"New run: clone of {self.clone['name']}" if self.clone else "New run"
        specs = common_specs()
        yield TitleBar(title, id="title")
        yield ConnectionBanner()
        with VerticalScroll(id="form"):
            for section, names in SECTIONS:
                yield Static(section, classes="section", id=f"section-{section.lower()}")
                for name in names:
                    yield self._common_field(name, specs[name])
                if section == "Run":   # the algorithm's own parameters right under what chose them
                    yield Static("Parameters", classes="section", id="params-title")
                    yield Static("", id="schema-desc")
                    yield VerticalScroll(id="params")
            yield Static("Placement", classes="section", id="section-placement")
            yield from self._placement_fields()
        with Horizontal(id="form-bar"):
            self._status = Static("loading workers...", id="form-status")
            self._submit = Button("Submit (ctrl+s)", variant="primary", id="submit", disabled=True)
            yield self._status
            yield self._submit
            yield Button("Back (esc)", id="back")
        yield KeyBar()

    def _common_field(self, name: str, spec: dict[str, Any]) -> SchemaField:
        value = self.initial.get(name)
        extra: dict[str, Any] = {}
        if name in ("worker", "algo"):
            spec = {**spec, "enum": [value] if value else ["..."]}
        elif name == "env":
            extra = {"required": True, "validator": self._check_env}
        elif name == "name":
            extra = {"validator": self._check_name}
        elif name == "checkpoint":
            extra = {"validator": self._check_checkpoint}
        elif name == "dataset":
            spec = {**spec, "enum": [value] if value else [NO_DATASET]}
            extra = {"validator": self._check_dataset}
        return self._fixed(SchemaField(name, spec, value, field_id=f"f-{name}", **extra))

    def _fixed(self, field: SchemaField) -> SchemaField:
        self._fixed_fields.append(field)
        self._by_id[field.id] = field
        return field

    def _placement_fields(self) -> list[SchemaField]:
        """backend and every field of any backend; those of the backend chosen are shown."""
        link = self.app.link
        said = (getattr(getattr(link, "client", None), "info", None) or {}).get("placement")
        # the daemon says its home's default (hello); an older daemon's home is read here
        try:
            self.default_placement = check_placement(said) if isinstance(said, dict) else \
                home_placement(getattr(link, "home", None))
        except ConfigError:   # the daemon checked its settings; a newer daemon's field: start local
            self.default_placement = None
        start = self.clone_placement or self.default_placement or {}
        backend = start.get("backend") or "local"
        fields = []
        for name, spec in placement_specs().items():
            field = SchemaField(f"placement.{name}", spec, placement_text(name, start.get(name)), label=name,
                                field_id=f"f-placement-{name}",
                                validator=None if name == "backend" else self._placement_check(name))
            field.display = name == "backend" or name in placement_fields().get(backend, [])
            fields.append(self._fixed(field))
        return fields

    def placement_field(self, name: str) -> SchemaField:
        return self._by_id.get(f"f-placement-{name}") or self.query_one(f"#f-placement-{name}", SchemaField)

    def _placement_check(self, name: str):
        """A placement field's check: the model's, for this value under the backend chosen."""
        def check(value: Any) -> None:
            if value is None or value == "" or not self.is_mounted:
                return
            try:
                value = shlex.split(value) if name == "extra_args" else value
            except ValueError as exc:   # an unclosed quote
                raise ConfigError(f"placement.{name}", str(exc).lower()) from None
            check_placement({"backend": self.placement_field("backend").raw(), name: value})
        return check

    def show_placement(self) -> None:
        """Show the fields of the backend chosen (the others keep what was typed in them)."""
        backend = self.placement_field("backend").raw()
        shown = []
        for name in placement_names()[1:]:
            field = self.placement_field(name)
            field.display = name in placement_fields().get(backend, [])
            if field.display:
                field.validate()
                shown.append(field)
            else:
                field.show_error(None)
        if shown:   # the fields that came, in view (they open below the last field of the form)
            self.call_after_refresh(shown[-1].scroll_visible, animate=False)

    def collect_placement(self) -> tuple[dict[str, Any] | None, list[str]]:
        """(placement, errors): the placement the config carries, checked by the model; None for a
        local run (as before there was a choice), unless the home's default is another backend."""
        backend = self.placement_field("backend").raw()
        placement: dict[str, Any] = {"backend": backend}
        errors = []
        for name in placement_fields().get(backend, []):
            field = self.placement_field(name)
            if not field.validate():
                errors.append(f"{field.field_name}: {field.error}")
                continue
            value = field.value()
            if name == "extra_args":
                value = shlex.split(value or "")
            if value not in (None, "", []):
                placement[name] = value
        if errors:
            return None, errors
        try:
            placement = check_placement(placement)
        except ConfigError as exc:
            return None, [f"{exc.field}: {exc.message}"]
        if backend == "local" and (self.default_placement or {}).get("backend", "local") == "local":
            return None, []
        return placement, []

    def on_mount(self) -> None:
        self.query_one("#params").styles.height = "auto"
        self.set_focus(self.field("worker").editor)   # now, not later: keys may be waiting (app.on_event)
        self.load_workers()

    @work(exclusive=True, group="workers")
    async def load_workers(self) -> None:
        workers = getattr(self.app, "workers_cache", None)
        if workers is None:
            try:
                workers = await self.app.link.call(P.WORKERS)
            except (ConnectionError, P.RPCError) as exc:
                self._set_status(f"cannot list workers: {exc}", False)
                return
            self.app.workers_cache = workers
        self.worker_list = offered_workers(workers, self.app.all_workers, self.initial.get("worker"))
        if not self.worker_list:
            self._set_status("no worker is available; see `mosaic workers`", False)
            return
        names = [w["name"] for w in self.worker_list]
        self.field("worker").set_choices(names, first_worker(names, self.initial.get("worker")))
        self.sync()

    def worker_info(self, name: str | None) -> dict[str, Any]:
        for w in self.worker_list:
            if w["name"] == name:
                return w
        return self.worker_list[0]

    def _check_env(self, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError("env", "is required")
        # what the daemon's worker said of this env with the schema (unknown, with the closest
        # ids; the wrong action space): submit would refuse it, so the form does as it is typed
        env, problem = self.env_problem
        if problem and env == value:
            raise ConfigError("env", problem)

    def _check_name(self, value: Any) -> None:
        if value and any(r.get("name") == value for r in self.app.link.runs.values()):
            raise ConfigError("name", f"a run named {value!r} exists already")

    def _check_checkpoint(self, value: Any) -> None:
        if self.is_mounted and self.common_value("mode") == "eval" and not value:
            raise ConfigError("checkpoint", "is required when mode is 'eval'")

    def _check_dataset(self, value: Any) -> None:
        if self.is_mounted and self.field("dataset").display and value in (None, "", NO_DATASET):
            raise ConfigError("dataset", f"no run recorded a dataset on {self.common_value('env')}: record one "
                                         f"with an online algorithm first (Data: record)")

    @work(exclusive=True, group="datasets")
    async def load_datasets(self, env: str) -> None:
        """The runs that recorded a dataset on ``env`` (the daemon's ``datasets``), as the dataset's choices."""
        try:
            found = await self.app.link.call(P.DATASETS, env=env)
        except (ConnectionError, P.RPCError):
            found = []
        names = [d["name"] for d in found] or [NO_DATASET]
        wanted = self.initial.get("dataset")
        self.field("dataset").set_choices(names, wanted if wanted in names else names[0])
        self.field("dataset").validate()
        self.update_status()

    def field(self, name: str) -> SchemaField:
        return self._by_id.get(f"f-{name}") or self.query_one(f"#f-{name}", SchemaField)

    def common_value(self, name: str) -> Any:
        try:
            return self.field(name).value()
        except Exception:
            return None

    def param_fields(self) -> list[SchemaField]:
        return list(self._param_list)

    # -- inputs -> everything derived from them ------------------------------------
    def on_schema_field_changed(self, message: SchemaField.Changed) -> None:
        name = message.field.field_name
        if message.field.id and message.field.id.startswith("f-"):
            if name in ("worker", "algo", "env"):
                self.sync()
            elif name == "mode":
                self.field("checkpoint").validate()
            elif name == "placement.backend":
                self.show_placement()
        if name == "steps" or name in self.steps_per_update():
            self.update_steps_hint()
        self.update_status()

    def steps_per_update(self) -> list[str]:
        """The parameters whose product is one update's steps, for an algorithm that trains whole
        updates only (CleanRL's PPO: num-envs × num-steps); [] for the others."""
        return list((self.schema or {}).get("x-steps-per-update") or []) if not self.loading_schema else []

    def update_steps_hint(self) -> None:
        """Under the steps: where the run will end when it trains whole updates (3000 -> 2560)."""
        try:
            steps = self.field("steps").value()
        except ConfigError:
            steps = None
        names = self.steps_per_update()
        params = {}
        for f in self._param_list:
            if f.field_name in names:
                try:
                    params[f.field_name] = f.value()
                except ConfigError:
                    return self.field("steps").set_hint(None)
        hint = fmt.steps_short(self.schema, params, steps) if names else None
        self.field("steps").set_hint(hint)

    def sync(self) -> None:
        """Make the algorithm choices, env suggestions and parameters follow worker, algorithm and env."""
        if not self.worker_list:
            return
        worker = self.common_value("worker")
        caps = self.worker_info(worker).get("capabilities") or {}
        algo = self.common_value("algo")
        if self._caps_key is None or self._caps_key[0] != worker:
            algos, algo = algo_choice(caps, algo, self.initial.get("algo") if self._caps_key is None else None)
            self.field("algo").set_choices(algos, algo)
        if (worker, algo) != self._caps_key:
            first = self._caps_key is None
            self._caps_key = (worker, algo)
            envs = envs_for(caps, algo)
            env_field = self.field("env")
            env_field.suggestions = envs
            if env_field.ready:
                env_field.editor.suggester = SuggestFromList(envs, case_sensitive=False) if envs else None
            # a clone keeps its env; else the env follows to one the algorithm offers
            env = None if first and self.initial.get("env") else env_after(envs, caps, self.common_value("env"))
            if env is not None:
                env_field.set_value(env)
            shown = shown_fields(caps, algo)
            for name, display in shown.items():
                self.field(name).display = display
            self.query_one("#section-data").display = shown["record"] or shown["dataset"]
        key = self.chosen_key()
        if key != self._schema_key and self.field("dataset").display and key[2]:
            self.load_datasets(key[2])
        if key != self._schema_key and worker and algo:
            self._schema_key = key
            self.load_schema(*key)
        self.update_status()

    @work(exclusive=True, group="schema")
    async def load_schema(self, worker: str, algo: str, env: str | None) -> None:
        try:
            schema = await self.app.link.call(P.SCHEMA, worker=worker, algo=algo, env=env or None)
            error = None
        except (ConnectionError, P.RPCError) as exc:
            schema, error = None, str(exc)
        if (worker, algo, env) != self._schema_key:
            return   # the user chose something else meanwhile
        # The fields are rebuilt by a worker of their own, one rebuild at a time and never cut
        # short: this worker is cancelled whenever the user types on (exclusive), and cancelling
        # it inside remove/mount wedged the screen. Not by the screen itself (call_later): its
        # queue waited out the whole remove and mount, seconds under load, and every key with it.
        self.show_schema((worker, algo, env), schema, error)

    @work(group="fields")
    async def show_schema(self, key: tuple, schema: dict[str, Any] | None, error: str | None) -> None:
        async with self._rebuilding:
            await self._show_schema(key, schema, error)

    async def _show_schema(self, key: tuple, schema: dict[str, Any] | None, error: str | None) -> None:
        if key != self._schema_key:
            return   # superseded while it waited
        worker, algo, env = key
        self._remember_typed()
        params = self.query_one("#params", VerticalScroll)
        self._param_list = []
        await params.remove_children()
        if not self.is_attached:
            return   # the form closed (or the app quit) while the old fields went: nothing to show
        self.schema, self.schema_error, self.carried = schema, error, []
        # the worker's word on the env came with the schema: the env field says it (at once)
        self.env_problem = (env, (schema or {}).get("env_problem"))
        self.field("env").validate()
        if schema is None:
            self.shown_key = None
            self.update_steps_hint()
            self.query_one("#params-title", Static).update(f"Parameters of {worker} {algo}")
            self.query_one("#schema-desc", Static).update(f"cannot load the schema: {error}")
            self.update_status()
            return
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        self.query_one("#params-title", Static).update(f"Parameters of {worker} {algo} ({len(props)})")
        self.query_one("#schema-desc", Static).update(schema.get("description") or "")
        # a clone's own values fill the first form of its worker and algorithm, once
        clone = self.clone_params if (worker, algo) == (self.initial["worker"], self.initial["algo"]) else None
        self.clone_params = None
        fields = []
        for i, (name, spec) in enumerate(props.items()):
            value, note = param_value(name, spec, clone, self.typed)
            field = SchemaField(name, spec, value, required=name in required, field_id=f"p-{i}", note=note)
            if note:
                self.carried.append(name)
            fields.append(field)
        # a few at a time: the keys typed meanwhile take turns with a few widgets' mounts, not all
        for at in range(0, len(fields), self.MOUNT_BATCH):
            if not self.is_attached:
                return
            await params.mount_all(fields[at:at + self.MOUNT_BATCH])
        self._param_list = fields
        for f in fields:
            f.validate()
        self.shown_key = (worker, algo, env)
        self.update_steps_hint()
        self.update_status()

    def _remember_typed(self) -> None:
        """Values the user chose in the fields shown now (not their schema's default)."""
        if self.shown_key is None:
            return
        worker, algo, _ = self.shown_key
        self.typed = remember_typed(self.typed, [(f.field_name, f.raw(), f.is_default()) for f in self.param_fields()],
                                    kept_from((worker, algo), self._schema_key[0]))

    # -- validation and submit ---------------------------------------------------
    def collect(self) -> tuple[dict[str, Any] | None, list[str]]:
        """(config, errors): the config only when every field is valid and the
        parameters shown are those of the chosen worker, algorithm and env."""
        errors: list[str] = []
        values: dict[str, Any] = {}
        for name in COMMON_FIELDS:
            f = self.field(name)
            if not f.display:
                continue
            if not f.validate():
                errors.append(f"{name}: {f.error}")
            else:
                values[name] = f.value()
        placement, placement_errors = self.collect_placement()
        errors += placement_errors
        errors += self._params_problem()
        if errors:
            return None, errors
        params = {}
        for f in self.param_fields():
            if not f.validate():
                errors.append(f"{f.field_name}: {f.error}")
            else:
                try:
                    params[f.field_name] = file_text(f.spec, f.value())
                except ConfigError as exc:
                    errors.append(f"{f.field_name}: {exc.message}")
        if errors:
            return None, errors
        caps = self.worker_info(values.get("worker")).get("capabilities") or {}
        return run_config(values, self.field("seed").display, self.frames_extra, placement, params, caps), []

    def _params_problem(self) -> list[str]:
        if not self.worker_list:
            return ["worker: loading the workers"]
        if self.schema_error is not None and self._schema_key == self.chosen_key():
            return [f"params: cannot load the schema: {self.schema_error}"]
        if self.loading_schema or self.schema is None:
            worker, algo, _ = self.chosen_key()
            return [f"params: loading the parameters of {worker} {algo}"]
        return []

    def all_fields(self) -> list[SchemaField]:
        """The fields shown, in the form's order: the Run section's, the parameters, the rest."""
        run = len(SECTIONS[0][1])
        fields = (*self._fixed_fields[:run], *self._param_list, *self._fixed_fields[run:])
        return [f for f in fields if f.display]

    def _set_status(self, text: str, invalid: bool) -> None:
        """The status line; left alone when it already says this (an update lays the form out again)."""
        if self._status is None or (text, invalid) == self._status_shown:
            return
        self._status_shown = (text, invalid)
        self._status.set_class(invalid, "-invalid")
        self._status.update(text)

    def update_status(self) -> None:
        """Cheap, as it runs at every key: reads each field's last verdict (a field validates itself
        as it changes) and touches the status line and the button only when they change."""
        if self._status is None or not self.is_attached:
            return  # leaving: nothing to show
        errors = [f"{f.field_name}: {f.error}" for f in self.all_fields() if f.error] + self._params_problem()
        self._set_status(*status_line(errors, self.carried, self.typed))
        if self._submit is not None:
            self._submit.disabled = bool(errors) or self.submitting

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        elif event.button.id == "back":
            self.action_back()

    def action_pick_env(self) -> None:
        """Choose the env from every id the worker offers for the algorithm, filtered as you type."""
        if not self.worker_list:
            return
        caps = self.worker_info(self.common_value("worker")).get("capabilities") or {}
        envs = envs_for(caps, self.common_value("algo"))
        if not envs:
            self.notify("this worker lists no environments for the algorithm: type one")
            return

        def chosen(value: str | None) -> None:
            if value:
                field = self.field("env")
                field.set_value(value)
                field.editor.focus()

        self.app.push_screen(EnvPickerScreen(envs, self.common_value("env") or ""), chosen)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_submit(self) -> None:
        config, errors = self.collect()
        if config is None:
            self.update_status()
            self.notify(f"not submitted: {errors[0]}", severity="error")
            return
        self.submit(config)

    @work(exclusive=True, group="submit")
    async def submit(self, config: dict[str, Any]) -> None:
        self.submitting = True
        self.update_status()
        try:
            run = await self.app.link.call(P.SUBMIT, config=config)
        except P.RPCError as exc:
            field = (exc.data or {}).get("field", "") if isinstance(exc.data, dict) else ""
            self.show_daemon_error(field, exc.message)
            return
        except ConnectionError as exc:
            self.notify(f"not submitted: {exc}", severity="error")
            return
        finally:
            self.submitting = False
            self.update_status()
        link = self.app.link
        if run["id"] not in link.runs:
            link.feed(P.NOTIFY_RUN, {"rev": run.get("rev", 0), "run": run})
        self.notify(f"submitted {run['name']}", timeout=3)
        self.app.pop_screen()
        if run.get("worker") == "human":
            self.app.open_play(run["id"])      # a human play: you at the keyboard (docs/play.md)
        else:
            self.app.open_run(run["id"])

    def show_daemon_error(self, field: str, message: str) -> None:
        """The daemon refused the config: show its message under the field it names."""
        where = refused_field(field)
        target = None
        if where is not None and where[0] == "param":
            target = next((f for f in self.param_fields() if f.field_name == where[1]), None)
        elif where is not None:
            target = next((f for f in self.query(SchemaField) if f.id == where[1]), None)
        if target is not None:
            target.refuse(refusal_text(field, message))
            target.scroll_visible()
        self.notify(f"the daemon refused the run: {message}", severity="error")
