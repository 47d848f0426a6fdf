"""A PBT sweep's lineage drawn as a tree: one lane per member over the steps, its background banded
by the value in force of one param (`next_param`: the sweep screen's `p`), a copy marked in the recipient's lane by
its donor's number (● in the donor's lane, │ between), a tick at each boundary, and each copy in a
line under the lanes. The model is mosaic_tui/pbt_lineage.py; the sweep screen feeds it each reply.
"""
from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from mosaic_tui import pbt_lineage as L

# dark (low value) to light (high value): viridis' ends, readable on dark and light terminals
RAMP = ("#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725")
NO_LINEAGE = "no lineage: this daemon's sweep reply has none (an older daemon)"


class LineageView(Widget, can_focus=True):
    DEFAULT_CSS = """
    LineageView {
        height: auto;
        max-height: 50%;
        padding: 0 1;
        overflow-y: auto;
        background: $panel;
    }
    LineageView:focus {
        background: $boost;
    }
    """

    LABEL_WIDTH = 5    # "m12 "
    VALUE_WIDTH = 8    # the value in force now, right of the lane

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.sweep: dict[str, Any] | None = None
        self.param: str | None = None

    def show(self, sweep: dict[str, Any]) -> None:
        self.sweep = sweep
        params = L.mutated_params(sweep) if L.is_pbt(sweep) else []
        if self.param not in params:
            self.param = params[0] if params else None
        self.refresh(layout=True)

    def action_next_param(self) -> None:
        if self.sweep is None or not L.is_pbt(self.sweep):
            return
        params = L.mutated_params(self.sweep)
        self.param = params[(params.index(self.param) + 1) % len(params)] if self.param in params else params[0]
        self.refresh(layout=True)

    def lines(self, width: int) -> list[Text]:
        sweep = self.sweep
        if sweep is None:
            return [Text("lineage: loading...", style="dim")]
        if not L.has_lineage(sweep):
            return [Text(NO_LINEAGE, style="dim")]
        lane_width = max(8, width - self.LABEL_WIDTH - self.VALUE_WIDTH)
        out = [self._heading(sweep)]
        for row in L.lanes(sweep, self.param, lane_width):
            line = Text(f"m{row['member']}".ljust(self.LABEL_WIDTH - 1)[: self.LABEL_WIDTH - 1] + " ", style="bold")
            for cell in row["cells"]:
                line.append(cell["char"], style=self._cell_style(cell))
            line.append(" " + L.short(row["value"]).rjust(self.VALUE_WIDTH - 1))
            out.append(line)
        ruler = Text(" " * self.LABEL_WIDTH + L.axis(sweep, lane_width), style="dim")
        ruler.append(" " + L.short(L.total_steps(sweep)).rjust(self.VALUE_WIDTH - 1), style="dim")
        out.append(ruler)
        copy_lines = L.copy_lines(sweep)
        out.extend(Text(line) for line in copy_lines)
        interval = (sweep["spec"].get("pbt") or {}).get("interval")
        if not copy_lines:
            out.append(Text(f"no copy yet: the first comes after step {L.short(interval)}" if interval
                            else f"a replayed schedule: {L.REPLAY_MARK} each change taken", style="dim"))
        return out

    def _heading(self, sweep: dict[str, Any]) -> Text:
        text = Text("lineage ", style="bold")
        text.append(f"{self.param or '-'} low ")
        for color in RAMP:
            text.append(" ", style=Style(bgcolor=color))
        text.append(" high  ")
        n = len(L.copies(sweep))
        text.append(f"generation {sweep.get('generation', 0)}, {n} cop{'y' if n == 1 else 'ies'} "
                    f"(digit: the donor)", style="dim")
        return text

    @staticmethod
    def _cell_style(cell: dict[str, Any]) -> Style:
        shade = cell["level"]
        if shade is None:
            return Style(dim=True)
        fg = "#000000" if shade >= L.LEVELS // 2 else "#ffffff"
        return Style(bgcolor=RAMP[shade], color=fg, bold=bool(cell.get("copy")) or cell["char"] in (L.DONOR_MARK,))

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines(width))

    def render(self) -> Text:
        width = self.content_size.width or 78
        lines = self.lines(width)
        for line in lines:   # one row each: get_content_height counted rows, not wrapped lines
            line.truncate(width, overflow="ellipsis")
        return Text("\n").join(lines)
