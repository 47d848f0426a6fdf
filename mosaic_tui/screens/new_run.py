"""New run: worker → algorithm → environment → a form generated from the algorithm's schema.

Nothing is submitted until every field is valid; the daemon's own verdict (a
field it refuses) lands under that field too. "Clone and edit" opens this
screen filled from an existing run's config.
"""
from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Static

from daemon import protocol as P
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.schema_form import SchemaField
from workers.sdk.config import NAME_RE, ConfigError

COMMON = {
    "worker": {"type": "string", "enum": [], "description": "the training backend"},
    "algo": {"type": "string", "enum": [], "description": "the algorithm"},
    "env": {"type": "string", "description": "the environment id"},
    "name": {"type": ["string", "null"], "pattern": NAME_RE.pattern,
             "description": "unique run name (empty: <algo>-<env>-N)"},
    "steps": {"type": ["integer", "null"], "exclusiveMinimum": 0,
              "description": "total environment steps (empty: the algorithm's default)"},
    "seed": {"type": "integer", "minimum": 0, "default": 1, "description": "random seed"},
    "device": {"type": "string", "enum": ["cpu", "auto", "cuda", "cuda:0", "cuda:1"], "default": "cpu",
               "description": "where the model trains"},
}


def envs_for(caps: dict[str, Any], algo: str | None) -> list[str]:
    """The environments a worker offers for an algorithm (a list, or a dict by algorithm)."""
    envs = caps.get("envs") or []
    if isinstance(envs, dict):
        return list(envs.get(algo) or [])
    return list(envs)


class NewRunScreen(Screen):
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
    ]

    def __init__(self, clone: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.clone = clone
        cfg = (clone or {}).get("config") or {}
        self.initial: dict[str, Any] = {k: cfg.get(k) for k in ("worker", "algo", "env", "steps", "seed", "device")}
        self.initial_params: dict[str, Any] = dict(cfg.get("params") or {})
        self.worker_list: list[dict[str, Any]] = []
        self.schema: dict[str, Any] | None = None
        self._schema_key: tuple | None = None
        self.param_values: dict[str, Any] = dict(self.initial_params)
        self.submitting = False
        self._seen: dict[str, Any] = {}   # worker/algo/env as last acted on

    # -- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        title = f"New run: clone of {self.clone['name']}" if self.clone else "New run"
        yield TitleBar(title, id="title")
        yield ConnectionBanner()
        with VerticalScroll(id="form"):
            yield Static("Run", classes="section")
            yield Static("loading workers...", id="common-fields")
            yield Static("Parameters", classes="section", id="params-title")
            yield Static("", id="schema-desc")
            yield VerticalScroll(id="params")
        with Horizontal(id="form-bar"):
            yield Static("", id="form-status")
            yield Button("Submit (ctrl+s)", variant="primary", id="submit", disabled=True)
            yield Button("Back (esc)", id="back")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one("#params").styles.height = "auto"
        self.load_workers()

    @work(exclusive=True, group="workers")
    async def load_workers(self) -> None:
        try:
            workers = await self.app.link.call(P.WORKERS)
        except (ConnectionError, P.RPCError) as exc:
            self.query_one("#common-fields", Static).update(f"cannot list workers: {exc}")
            return
        self.worker_list = [w for w in workers if w.get("available") and (self.app.all_workers or not w.get("hidden"))
                            and (w.get("capabilities") or {}).get("algorithms")]
        if not self.worker_list:
            self.query_one("#common-fields", Static).update("no worker is available; see `mosaic workers`")
            return
        await self.build_common()

    def worker_info(self, name: str | None) -> dict[str, Any]:
        for w in self.worker_list:
            if w["name"] == name:
                return w
        return self.worker_list[0]

    async def build_common(self) -> None:
        placeholder = self.query_one("#common-fields")
        names = [w["name"] for w in self.worker_list]
        worker = self.initial.get("worker") if self.initial.get("worker") in names else names[0]
        caps = self.worker_info(worker).get("capabilities") or {}
        algos = list(caps.get("algorithms") or [])
        algo = self.initial.get("algo") if self.initial.get("algo") in algos else (algos[0] if algos else "")
        if self.initial.get("algo") and self.initial["algo"] not in algos and caps.get("user_scripts"):
            algos.append(self.initial["algo"])
            algo = self.initial["algo"]
        envs = envs_for(caps, algo)
        env = self.initial.get("env") or self._default_env(envs, caps)
        fields = [
            SchemaField("worker", {**COMMON["worker"], "enum": names}, worker, field_id="f-worker"),
            SchemaField("algo", {**COMMON["algo"], "enum": algos}, algo, field_id="f-algo"),
            SchemaField("env", COMMON["env"], env, required=True, suggestions=envs, field_id="f-env",
                        validator=self._check_env),
            SchemaField("name", COMMON["name"], None, field_id="f-name", validator=self._check_name),
            SchemaField("steps", COMMON["steps"], self.initial.get("steps"), field_id="f-steps"),
            SchemaField("seed", COMMON["seed"], self.initial.get("seed"), field_id="f-seed"),
            SchemaField("device", COMMON["device"], self.initial.get("device") or "cpu", field_id="f-device"),
        ]
        await placeholder.remove()
        form = self.query_one("#form", VerticalScroll)
        await form.mount_all(fields, before=self.query_one("#params-title"))
        self._seen = {"worker": worker, "algo": algo, "env": env}
        self.query_one("#f-worker", SchemaField).editor.focus()
        self._schema_key = (worker, algo, env)
        self.load_schema(worker, algo, env)

    @staticmethod
    def _default_env(envs: list[str], caps: dict[str, Any]) -> str:
        if "CartPole-v1" in envs:
            return "CartPole-v1"
        if envs:
            return envs[0]
        families = caps.get("env_families") or []
        return families[0] if families == ["none"] else ""

    def _check_env(self, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError("env", "is required")

    def _check_name(self, value: Any) -> None:
        if value and any(r.get("name") == value for r in self.app.link.runs.values()):
            raise ConfigError("name", f"a run named {value!r} exists already")

    def field(self, name: str) -> SchemaField:
        return self.query_one(f"#f-{name}", SchemaField)

    def common_value(self, name: str) -> Any:
        try:
            return self.field(name).value()
        except (ConfigError, Exception):
            return None

    # -- schema ------------------------------------------------------------------
    def on_schema_field_changed(self, message: SchemaField.Changed) -> None:
        name = message.field.field_name
        if message.field.id and message.field.id.startswith("p-"):
            try:
                self.param_values[name] = message.field.value()
            except ConfigError:
                pass
        if name in ("worker", "algo", "env"):
            value = self.common_value(name)
            if name not in self._seen or self._seen.get(name) == value:
                self.update_status()
                return  # not built yet, or a change event without a change
            self._seen[name] = value
            if name == "worker":
                self.call_later(self._worker_changed)
                return
            if name == "algo":
                self._algo_changed(value)
            self.refresh_schema()
        self.update_status()

    def _algo_changed(self, algo: str | None) -> None:
        """Offer the new algorithm's environments; keep the env if it still fits."""
        from textual.suggester import SuggestFromList
        caps = self.worker_info(self.common_value("worker")).get("capabilities") or {}
        envs = envs_for(caps, algo)
        env_field = self.field("env")
        if not env_field.ready:
            return
        env_field.suggestions = envs
        env_field.editor.suggester = SuggestFromList(envs, case_sensitive=False) if envs else None
        current = self.common_value("env")
        if envs and current not in envs:
            new_env = self._default_env(envs, caps)
            self._seen["env"] = new_env
            env_field.set_value(new_env)

    async def _worker_changed(self) -> None:
        worker = self.common_value("worker")
        caps = self.worker_info(worker).get("capabilities") or {}
        algos = list(caps.get("algorithms") or [])
        envs = envs_for(caps, algos[0] if algos else None)
        algo_field = self.field("algo")
        new_algo = SchemaField("algo", {**COMMON["algo"], "enum": algos}, algos[0] if algos else "",
                               field_id="f-algo")
        env_field = self.field("env")
        new_env = SchemaField("env", COMMON["env"], self._default_env(envs, caps), required=True,
                              suggestions=envs, field_id="f-env", validator=self._check_env)
        form = self.query_one("#form", VerticalScroll)
        await algo_field.remove()
        await env_field.remove()
        await form.mount(new_algo, after=self.field("worker"))
        await form.mount(new_env, after=new_algo)
        key = (worker, algos[0] if algos else "", self._default_env(envs, caps))
        self._seen.update(algo=key[1], env=key[2])
        self.param_values = {}
        self._schema_key = key
        self.load_schema(*key)

    def refresh_schema(self) -> None:
        key = (self.common_value("worker"), self.common_value("algo"), self.common_value("env"))
        if None in key[:2] or key == self._schema_key:
            self.update_status()
            return
        self._schema_key = key
        self.load_schema(*key)

    @work(exclusive=True, group="schema")
    async def load_schema(self, worker: str, algo: str, env: str | None) -> None:
        try:
            schema = await self.app.link.call(P.SCHEMA, worker=worker, algo=algo, env=env or None)
        except (ConnectionError, P.RPCError) as exc:
            self.schema = None
            self.query_one("#schema-desc", Static).update(f"cannot load the schema: {exc}")
            self.update_status()
            return
        self.schema = schema
        params = self.query_one("#params", VerticalScroll)
        await params.remove_children()
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        self.query_one("#params-title", Static).update(f"Parameters of {worker} {algo} ({len(props)})")
        self.query_one("#schema-desc", Static).update(schema.get("description") or "")
        fields = [SchemaField(name, spec, self.param_values.get(name), required=name in required,
                              field_id=f"p-{i}") for i, (name, spec) in enumerate(props.items())]
        await params.mount_all(fields)
        for f in fields:
            f.validate()
        self.update_status()

    # -- validation and submit ---------------------------------------------------
    def collect(self) -> tuple[dict[str, Any] | None, list[str]]:
        """(config, errors): the config only when every field is valid."""
        errors: list[str] = []
        config: dict[str, Any] = {}
        for name in ("worker", "algo", "env", "name", "steps", "seed", "device"):
            try:
                f = self.field(name)
            except Exception:
                errors.append(f"{name}: not loaded")
                continue
            if not f.validate():
                errors.append(f"{name}: {f.error}")
                continue
            value = f.value()
            if value is not None:
                config[name] = value
        if self.schema is None:
            errors.append("params: the schema is not loaded")
        else:
            params = {}
            for f in self.query_one("#params").query(SchemaField):
                if not f.validate():
                    errors.append(f"{f.field_name}: {f.error}")
                    continue
                params[f.field_name] = f.value()
            config["params"] = params
        return (None if errors else config), errors

    def all_fields(self) -> list[SchemaField]:
        return list(self.query(SchemaField))

    def update_status(self) -> None:
        """Cheap: reads each field's last verdict (a field validates itself as it changes)."""
        statuses = self.query("#form-status")
        if not statuses or not self.is_attached:
            return  # leaving: nothing to show
        errors = [f"{f.field_name}: {f.error}" for f in self.all_fields() if f.error]
        if self.schema is None:
            errors.append("params: the schema is not loaded")
        status = statuses.first(Static)
        status.set_class(bool(errors), "-invalid")
        if errors:
            status.update(f"{len(errors)} field(s) to fix: {errors[0]}")
        else:
            status.update("ready: ctrl+s submits")
        self.query_one("#submit", Button).disabled = bool(errors) or self.submitting

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        elif event.button.id == "back":
            self.action_back()

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
        self.app.open_run(run["id"])

    def show_daemon_error(self, field: str, message: str) -> None:
        """The daemon refused the config: show its message under the field it names."""
        top, _, rest = field.partition(".")
        target = None
        if top == "params" and rest:
            for f in self.query_one("#params").query(SchemaField):
                if f.field_name == rest:
                    target = f
        elif top:
            try:
                target = self.field(top)
            except Exception:
                target = None
        text = message.split(": ", 1)[1] if message.startswith(f"{field}: ") else message
        if target is not None:
            target.refuse(text)
            target.scroll_visible()
        self.notify(f"the daemon refused the run: {message}", severity="error")
