"""The Artifacts tab: what a run left on disk, each with its full path.

Checkpoints (the ones the run reported, ``summary.checkpoints``, and anything
else under ``checkpoints/``), videos (CleanRL's ``--capture-video`` writes
``videos/<run name>/*.mp4`` in the run directory) and TensorBoard logs (the
directories holding ``events.out.tfevents.*`` files: ``tensorboard/<run
name>`` for CleanRL) and a recorded offline dataset (``dataset.hdf5``,
workers/sdk/dataset.py). ``c`` copies the highlighted path (OSC 52, which
works over SSH and in tmux with ``set-clipboard on``); on a checkpoint, ``E``
starts an evaluation run of it with frames on and opens it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from daemon import protocol as P
from workers.sdk.config import eval_config
from workers.sdk.rundir import DATASET_FILE

CHECKPOINT, VIDEO, TENSORBOARD, DATASET = "checkpoint", "video", "tensorboard", "dataset"
SCAN_SECONDS = 2.0          # a shown tab rescans this often (new checkpoints, videos)
MAX_DEPTH = 4               # how deep under the run directory videos and event files are looked for
SKIP_DIRS = {"checkpoints"}  # walked on their own; never into a checkpoint's own files


@dataclass
class Artifact:
    kind: str
    path: Path
    reported: bool = False   # a checkpoint the run announced (checkpoint_saved)

    def size(self) -> int:
        try:
            if self.path.is_dir():
                return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
            return self.path.stat().st_size
        except OSError:
            return 0

    def mtime(self) -> float | None:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return None


def collect(run: dict[str, Any] | None, run_dir: Path) -> list[Artifact]:
    """Every artifact of a run: checkpoints first (the reported ones in order), then its
    recorded dataset, videos, then logs."""
    found: list[Artifact] = []
    seen: set[Path] = set()
    reported = ((run or {}).get("summary") or {}).get("checkpoints") or []
    for ref in reported:
        path = Path(ref) if os.path.isabs(ref) else run_dir / ref
        path = Path(os.path.normpath(path))
        if path not in seen and path.exists():
            seen.add(path)
            found.append(Artifact(CHECKPOINT, path, reported=True))
    ckpt_dir = run_dir / "checkpoints"
    if ckpt_dir.is_dir():
        for entry in sorted(ckpt_dir.iterdir(), key=lambda p: p.name):
            path = Path(os.path.normpath(entry))
            if path not in seen:
                seen.add(path)
                found.append(Artifact(CHECKPOINT, path))
    videos: list[Artifact] = []
    boards: list[Artifact] = []
    root_depth = len(run_dir.parts)
    for dirpath, dirnames, filenames in os.walk(run_dir):
        here = Path(dirpath)
        if len(here.parts) - root_depth >= MAX_DEPTH:
            dirnames[:] = []
        if here == run_dir:
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        dirnames.sort()
        if any(f.startswith("events.out.tfevents") for f in filenames):
            boards.append(Artifact(TENSORBOARD, here))
        videos.extend(Artifact(VIDEO, here / f) for f in sorted(filenames) if f.endswith(".mp4"))
    # a recorded offline dataset (workers/sdk/dataset.py): what an offline run can name
    datasets = [Artifact(DATASET, run_dir / DATASET_FILE)] if (run_dir / DATASET_FILE).is_file() else []
    return found + datasets + videos + boards


def size_text(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return "-"


def unique_name(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def evaluation(run: dict[str, Any], checkpoint: Path, taken: set[str]) -> dict[str, Any]:
    """The run turned into an evaluation of one of its checkpoints, with frames, named after it."""
    config = eval_config(run.get("config") or {}, str(checkpoint))
    config["name"] = unique_name(f"{run.get('name') or 'run'}-eval", taken)
    config["frames"] = {**((run.get("config") or {}).get("frames") or {}), "enabled": True}
    return config


class ArtifactsView(Vertical, can_focus=False):
    DEFAULT_CSS = """
    ArtifactsView {
        height: 1fr;
    }
    ArtifactsView #artifacts-help {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    ArtifactsView DataTable {
        height: 1fr;
    }
    ArtifactsView #artifact-path {
        height: auto;
        max-height: 4;
        padding: 0 1;
        background: $panel;
    }
    ArtifactsView #artifacts-none {
        padding: 1 2;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("c,y", "copy", "Copy path", id="artifacts.copy"),
        Binding("E", "evaluate", "Evaluate", id="artifacts.eval"),
        Binding("j", "move(1)", "Down", show=False, id="artifacts.down"),
        Binding("k", "move(-1)", "Up", show=False, id="artifacts.up"),
    ]

    def __init__(self, run_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.artifacts: list[Artifact] = []
        self._timer = None

    def compose(self) -> ComposeResult:
        yield Static(Text("c copy the path   E evaluate a checkpoint with frames", style="dim"),
                     id="artifacts-help")
        # the highlighted path in full, wrapped: the table's column may be cut at the edge
        yield Static("", id="artifact-path")
        yield Static("", id="artifacts-none")

    @property
    def table(self) -> DataTable | None:
        """The listing, built when the tab is first shown (opening a run stays quick)."""
        tables = self.query(DataTable)
        return tables.first() if tables else None

    async def on_show(self) -> None:
        if self.table is None:
            table = DataTable(cursor_type="row", zebra_stripes=True, id="artifacts-table")
            table.add_columns("kind", "size", "modified", "path")
            await self.mount(table, after="#artifacts-help")
            table.focus()       # shown means its tab was chosen: the tab's focus went nowhere before
            self._timer = self.set_interval(SCAN_SECONDS, self.scan, name="artifacts")
        elif self._timer is not None:
            self._timer.resume()
        self.scan()

    def on_hide(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def focus(self, scroll_visible: bool = True):
        table = self.table
        return table.focus(scroll_visible) if table is not None else self

    @property
    def run(self) -> dict[str, Any] | None:
        return self.app.link.runs.get(self.run_id)

    def scan(self) -> None:
        table = self.table
        if table is None:
            return
        found = collect(self.run, self.app.home.run_dir(self.run_id))
        if [(a.kind, a.path) for a in found] == [(a.kind, a.path) for a in self.artifacts]:
            return
        self.artifacts = found
        row = table.cursor_row
        table.clear()
        for i, a in enumerate(found):
            mtime = a.mtime()
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime)) if mtime else "-"
            kind = Text(a.kind + (" *" if a.reported else ""), style="bold" if a.kind == CHECKPOINT else "")
            table.add_row(kind, size_text(a.size()), when, str(a.path), key=str(i))
        if found:
            table.move_cursor(row=min(row, len(found) - 1))
        self.show_path()
        none = self.query_one("#artifacts-none", Static)
        none.display = not found
        none.update("no checkpoints, videos or TensorBoard logs in "
                    f"{self.app.home.run_dir(self.run_id)} yet")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_path()

    def show_path(self) -> None:
        artifact = self.selected
        line = self.query_one("#artifact-path", Static)
        line.display = artifact is not None
        if artifact is not None:
            line.update(Text(str(artifact.path)))

    @property
    def selected(self) -> Artifact | None:
        table = self.table
        if table is None or not self.artifacts or not 0 <= table.cursor_row < len(self.artifacts):
            return None
        return self.artifacts[table.cursor_row]

    def action_move(self, rows: int) -> None:
        table = self.table
        if table is not None:
            table.move_cursor(row=max(0, table.cursor_row + rows))

    def action_copy(self) -> None:
        artifact = self.selected
        if artifact is None:
            self.notify("nothing to copy", timeout=2)
            return
        self.app.copy_to_clipboard(str(artifact.path))
        self.notify(f"copied {artifact.path}", timeout=3)

    async def action_evaluate(self) -> None:
        artifact, run = self.selected, self.run
        if artifact is None or artifact.kind != CHECKPOINT:
            self.notify("select a checkpoint to evaluate", timeout=3)
            return
        if run is None:
            return
        link = self.app.link
        config = evaluation(run, artifact.path, {r.get("name") for r in link.runs.values()})
        try:
            new = await link.call(P.SUBMIT, config=config)
        except P.RPCError as exc:
            self.notify(f"the daemon refused the evaluation: {exc.message}", severity="error")
            return
        except ConnectionError as exc:
            self.notify(f"not submitted: {exc}", severity="error")
            return
        if new["id"] not in link.runs:
            link.feed(P.NOTIFY_RUN, {"rev": new.get("rev", 0), "run": new})
        self.notify(f"evaluating {artifact.path.name}: {new['name']}", timeout=3)
        self.app.open_run(new["id"], tab="frames")

