"""Population-based training: a sweep whose spec has a ``pbt:`` block (docs/sweeps.md).

The population trains in generations of ``interval`` env steps. When a member passes the
generation's boundary the controller stops it (``mosaic stop``'s machinery: a checkpoint, state
"stopped"). Once every live member has stopped there, each is scored at the boundary (the
objective's last values logged at steps up to it: no member judged on steps another has not
trained), the bottom quantile copies the top (daemon/pbt_decisions.py), and every member continues
as the same run: an exploited one from a copy of its donor's checkpoint, with perturbed values
(its ``restarted`` event carries the exploit), the others from their own checkpoint.

Crash safety: the controller's state is a JSON file beside the sweep's (``<home>/sweeps/<id>.pbt.json``)
written atomically. The decision is written before anything acts on it, with each recipient's
restart count at that moment; an exploit is applied only while its recipient still has that count,
so a daemon killed anywhere in between decides nothing new and applies nothing twice. A donor is
continued (and so may save, and prune, new checkpoints) only after every copy from it was taken, and
its checkpoint is pinned (workers/sdk/rundir.py ``PIN_SUFFIX``) from the decision until the last copy
is taken: retention never deletes it, even when the donor was continued by hand or ended meanwhile.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any

from daemon import pbt_decisions as D
from daemon import protocol as P
from daemon.home import CHECKPOINTS_DIR, EVENTS_FILE, Home
from daemon.ingest import read_range
from daemon.shim import write_json_atomic
from daemon.store import Store, StoreError
from workers.sdk.config import ConfigError
from workers.sdk.rundir import PIN_SUFFIX
from workers.sdk.telemetry import EPISODE, SCALAR, episode_scalars

log = logging.getLogger("mosaic.daemon.pbt")

EXPLOIT_TAG = "pbt"   # the key of the exploit in a member's restarted event


def read_json(path: str) -> dict[str, Any] | None:
    import json
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def objective_values(path: str, end: int, tag: str, until: int) -> list[float]:
    """The objective's values in a member's events file, in file order, logged at steps up to ``until``."""
    out: list[float] = []
    offset = 0
    while offset < end:
        nxt, _raws, events = read_range(path, offset, end, 4 * 1024 * 1024)
        if nxt <= offset:
            break
        offset = nxt
        for ev in events:
            step = ev.get("step")
            if not isinstance(step, int) or step > until:
                continue
            if ev.get("type") == SCALAR and ev.get("tag") == tag:
                out.append(ev.get("value"))
            elif ev.get("type") == EPISODE and tag.startswith("episode/"):
                out.extend(v for t, v in episode_scalars(ev) if t == tag)
    return out


class PBTController:
    """Drives every PBT sweep; ``advance`` is called by SweepController's tick."""

    def __init__(self, home: Home, store: Store, runs):
        self.home = home
        self.store = store
        self.runs = runs

    def state_path(self, sweep_id: str) -> str:
        return str(self.home.root / "sweeps" / f"{sweep_id}.pbt.json")

    def load(self, sweep_id: str) -> dict[str, Any]:
        return read_json(self.state_path(sweep_id)) or {"generation": 0, "decided": None, "exploits": [],
                                                        "lineage": []}

    def save(self, sweep_id: str, state: dict[str, Any]) -> None:
        os.makedirs(os.path.dirname(self.state_path(sweep_id)), exist_ok=True)
        write_json_atomic(self.state_path(sweep_id), state)

    # -- the tick --------------------------------------------------------------
    def advance(self, sweep: dict[str, Any]) -> None:
        spec, pbt = sweep["spec"], sweep["spec"]["pbt"]
        state = self.load(sweep["id"])
        members = {r["trial"]: r for r in self.store.sweep_runs(sweep["id"])}
        for index in range(pbt["population"]):
            # the store is the truth: a restart never submits a member twice
            if index not in members and str(index) not in state.get("refused", {}):
                members[index], refusal = self._submit_member(sweep, index)
                if refusal is not None:   # its drawn values refused together: one try, the reason kept
                    state.setdefault("refused", {})[str(index)] = refusal
                    self.save(sweep["id"], state)
        if "replay" in pbt:
            self._advance_replay(sweep, state, members.get(0))
            return
        total = int(spec["base"].get("steps") or 0)
        boundary = (state["generation"] + 1) * pbt["interval"]
        if state["decided"] == state["generation"]:
            self._apply(sweep, state, members)
            return
        live = [r for r in members.values() if r is not None and not self._ended(r)
                and r["id"] not in state.get("left", {})]
        if not live:
            self.store.update_sweep(sweep["id"], state="finished", ended_at=time.time())
            log.info("pbt sweep %s finished", sweep["name"])
            return
        if boundary >= total:
            return   # the last generation runs to the end of the budget
        for run in live:
            if run["state"] == P.RUNNING and not run["stop_requested"] and self._step(run) >= boundary:
                try:
                    self.runs.stop(run)
                except P.RPCError as exc:
                    log.warning("pbt sweep %s: cannot stop %s: %s", sweep["name"], run["name"], exc.message)
        if D.ready_to_decide([{"state": r["state"], "step": self._step(r)} for r in live], boundary):
            self._decide(sweep, state, live, boundary)   # applied from the next tick on

    def _advance_replay(self, sweep: dict[str, Any], state: dict[str, Any], run: dict[str, Any] | None) -> None:
        """A fixed schedule on one run (``pbt: {replay: ...}``): at each change's step the run is stopped,
        then continued from its own checkpoint with the change's values. The continue is written down
        (``decided``, with the run's restart count) before it is made: made once, whatever the moment
        the daemon died."""
        changes = sweep["spec"]["pbt"]["replay"]
        k = state["generation"]
        run = self.store.get(run["id"]) if run is not None else None
        if run is not None and state["decided"] == k:
            if run["state"] == P.STOPPED and (run.get("restarts") or 0) <= state["restarts_before"]:
                change = changes[k]
                old = run["config"].get("params") or {}
                try:
                    self.runs.continue_run(run, params=change["params"], seam_fields={EXPLOIT_TAG: {
                        "replay": k, "step": change["step"],
                        "changed": {n: {"old": old.get(n), "new": v} for n, v in sorted(change["params"].items())
                                    if old.get(n) != v}}})
                except (P.RPCError, StoreError) as exc:
                    log.warning("pbt replay %s: %s not continued: %s", sweep["name"], run["name"], exc)
                    return   # tried again next tick
            state.setdefault("replayed", []).append({"change": k, "step": self._step(run), "at": time.time()})
            state.update(generation=k + 1, decided=None)
            self.save(sweep["id"], state)
            return
        if run is None or self._ended(run):
            self.store.update_sweep(sweep["id"], state="finished", ended_at=time.time())
            log.info("pbt replay %s finished", sweep["name"])
            return
        if k >= len(changes):
            return   # the last values, to the end of the budget
        reached = self._step(run) >= changes[k]["step"]
        if run["state"] == P.RUNNING and not run["stop_requested"] and reached:
            try:
                self.runs.stop(run)
            except P.RPCError as exc:
                log.warning("pbt replay %s: cannot stop %s: %s", sweep["name"], run["name"], exc.message)
        elif run["state"] == P.STOPPED and reached:
            state.update(decided=k, restarts_before=run.get("restarts") or 0)
            self.save(sweep["id"], state)

    # -- the whole population stopped and continued (mosaic stop/continue SWEEP) -------------
    def stop(self, sweep: dict[str, Any]) -> list[str]:
        """Every live member stopped with a checkpoint and the controller paused (the sweep's state
        "stopped": the tick passes it by); its state file stays as it is, a decision written and not
        yet applied included. What could not be stopped, in words (one line a member)."""
        self.store.update_sweep(sweep["id"], state="stopped")
        problems = []
        for run in self.store.sweep_runs(sweep["id"]):
            if run["state"] in P.ACTIVE_STATES:
                try:
                    self.runs.stop(run)
                except P.RPCError as exc:
                    problems.append(f"{run['name']}: {exc.message}")
            elif run["state"] == P.QUEUED and not run["stop_requested"]:
                # stopped as soon as it starts, at its first safe point (daemon/runs.py's ingest)
                self.runs.update_record(run["id"], stop_requested=True)
        log.info("pbt sweep %s stopped%s", sweep["name"], f" ({'; '.join(problems)})" if problems else "")
        return problems

    def resume(self, sweep: dict[str, Any]) -> list[str]:
        """The population goes on where it was: the members stopped short of the generation's
        boundary continue from their own checkpoints (D.members_to_continue); the others are the
        controller's, which decides (or applies the decision already written) once the tick runs."""
        state = self.load(sweep["id"])
        pbt = sweep["spec"]["pbt"]
        total = int(sweep["spec"]["base"].get("steps") or 0)
        boundary = (state["generation"] + 1) * pbt["interval"]
        if "replay" in pbt:   # a replay's "boundary": its next change's step
            k = state["generation"]
            boundary = pbt["replay"][k]["step"] if k < len(pbt["replay"]) else total
        left = state.get("left", {})
        live = [r for r in self.store.sweep_runs(sweep["id"]) if not self._ended(r) and r["id"] not in left]
        ids = D.members_to_continue([{"id": r["id"], "state": r["state"], "step": self._step(r)} for r in live],
                                    boundary, total, state["decided"] == state["generation"])
        problems = []
        for run_id in ids:
            run = self.store.get(run_id)
            try:
                self.runs.continue_run(run)
            except (P.RPCError, StoreError) as exc:
                problems.append(f"{run['name']}: {getattr(exc, 'message', exc)}")
        for run in live:   # a queued member's stop, asked by the population's stop, is withdrawn
            if run["state"] == P.QUEUED and run["stop_requested"]:
                self.runs.update_record(run["id"], stop_requested=False)
        self.store.update_sweep(sweep["id"], state="running")
        log.info("pbt sweep %s continued: %s member(s) started again", sweep["name"], len(ids) - len(problems))
        return problems

    @staticmethod
    def _ended(run: dict[str, Any]) -> bool:
        """Out of the population: finished its budget, or failed (a failure ends only that member)."""
        return run["state"] in P.FINAL_STATES and run["state"] != P.STOPPED

    def _step(self, run: dict[str, Any]) -> int:
        return int((run.get("summary") or {}).get("steps") or 0)

    def _submit_member(self, sweep: dict[str, Any], index: int) -> tuple[dict[str, Any] | None, str | None]:
        spec = sweep["spec"]
        base = spec["base"]
        params = D.initial_params(spec["params"], spec["seed"], index)
        config = {**base, "params": {**(base.get("params") or {}), **params},
                  "seed": (base.get("seed") or 0) + index, "name": f"{sweep['name']}-m{index}"}
        try:
            return self.runs.submit(config, sweep=sweep["id"], trial=index, checked=True), None
        except ConfigError as exc:   # a refused member is left out; the others train
            log.warning("pbt sweep %s member %s: %s", sweep["name"], index, exc)
            return None, str(exc)

    def _member(self, sweep: dict[str, Any], run: dict[str, Any], boundary: int) -> dict[str, Any]:
        objective = sweep["spec"]["objective"]
        values = objective_values(str(self.home.run_dir(run["id"]) / EVENTS_FILE), self.runs.ingested_offset(run),
                                  objective["tag"], boundary)
        from daemon.sweeps import aggregate
        stopped = (run.get("summary") or {}).get("stopped") or {}
        names = sweep["spec"]["params"]
        return {"id": run["id"], "name": run["name"], "step": boundary, "stop_step": int(stopped.get("step") or 0),
                "checkpoint": stopped.get("checkpoint"), "restarts": run.get("restarts") or 0,
                "score": aggregate(values[-objective["last"]:], objective["agg"]),
                "params": {n: run["config"]["params"].get(n) for n in names}}

    def _decide(self, sweep: dict[str, Any], state: dict[str, Any], live: list[dict[str, Any]], boundary: int) -> None:
        spec, pbt = sweep["spec"], sweep["spec"]["pbt"]
        members = {m["id"]: m for m in (self._member(sweep, r, boundary) for r in live)}
        rng = D.generation_rng(spec["seed"], state["generation"])
        pairs = D.exploit_pairs([m for m in members.values() if m["checkpoint"]], pbt["quantile"],
                                spec["objective"]["direction"] == "maximize", rng)
        exploits = []
        for recipient_id, donor_id in pairs:
            recipient, donor = members[recipient_id], members[donor_id]
            new = D.perturb(donor["params"], pbt["mutations"], spec["params"], rng)
            record = D.exploit_record(state["generation"], recipient, donor, new)
            record.update(recipient_name=recipient["name"], donor_name=donor["name"],
                          restarts_before=recipient["restarts"], applied=False)
            exploits.append(record)
        # the intent, before anything acts on it
        state.update(decided=state["generation"], exploits=exploits, boundary=boundary,
                     scores={m["id"]: m["score"] for m in members.values()})
        self.save(sweep["id"], state)
        self.pin(exploits)
        log.info("pbt sweep %s generation %s: %s exploit(s)", sweep["name"], state["generation"], len(exploits))

    def _apply(self, sweep: dict[str, Any], state: dict[str, Any], members: dict[int, Any]) -> None:
        """Each step idempotent: a copy taken once, a continue made only while the recipient still has the
        restart count it had at the decision."""
        self.pin(state["exploits"])   # (again: a daemon may have died between the decision and its pins)
        for record in state["exploits"]:
            if record["applied"]:
                continue
            run = self.store.get(record["recipient"])
            if run is None or self._ended(run):
                record["applied"] = "skipped: the member ended before it"   # cancelled meanwhile
            elif (run.get("restarts") or 0) > record["restarts_before"]:
                record["applied"] = True        # continued before the daemon could write it down
            else:
                copy = self._take_copy(record)
                if copy is None:
                    record["applied"] = "skipped: the donor's checkpoint was gone"
                    log.warning("pbt sweep %s: %s's checkpoint %s is gone; %s continues from its own",
                                sweep["name"], record["donor_name"], record["donor_checkpoint"], run["name"])
                else:
                    try:
                        self.runs.continue_run(run, point={"path": copy, "step": record["donor_step"]},
                                               params=record["params"],
                                               seam_fields={EXPLOIT_TAG: {k: record[k] for k in (
                                                   "generation", "donor", "donor_name", "donor_step", "changed",
                                                   "recipient_score", "donor_score")}})
                    except (P.RPCError, StoreError) as exc:
                        log.warning("pbt sweep %s: %s not continued: %s", sweep["name"], run["name"], exc)
                        return   # tried again next tick
                    record["applied"] = True
            state["lineage"].append({**{k: v for k, v in record.items() if k != "applied"},
                                     **({} if record["applied"] is True else {"skipped": record["applied"]})})
            self.save(sweep["id"], state)
        self.unpin(state["exploits"])   # every copy taken
        # every copy taken: the others go on from their own checkpoints
        for run in members.values():
            if run is None:
                continue
            run = self.store.get(run["id"])
            if run is not None and run["state"] == P.STOPPED and run["id"] not in state.get("left", {}):
                try:
                    self.runs.continue_run(run)
                except StoreError as exc:   # the home's trouble (a full disk): tried again next tick
                    log.warning("pbt sweep %s: %s not continued: %s", sweep["name"], run["name"], exc)
                    return
                except P.RPCError as exc:   # this member cannot go on (its checkpoint torn): it alone leaves
                    reason = f"left PBT sweep {sweep['name']}: {exc.message}"
                    log.warning("pbt sweep %s: %s", sweep["name"], reason)
                    state.setdefault("left", {})[run["id"]] = reason
                    self.save(sweep["id"], state)
                    self.runs.update_record(run["id"], reason=reason)
        state.update(generation=state["generation"] + 1, decided=None, exploits=[])
        self.save(sweep["id"], state)

    @staticmethod
    def pin(exploits: list[dict[str, Any]]) -> None:
        """Each donor checkpoint with a copy still to take pinned: retention leaves it alone."""
        for record in exploits:
            source = (record.get("donor_checkpoint") or "").rstrip(os.sep)
            if record["applied"] or not source or not os.path.exists(source):
                continue
            try:
                write_json_atomic(source + PIN_SUFFIX, {"sweep_generation": record["generation"],
                                                        "recipient": record["recipient"]})
            except OSError as exc:   # the copy may still be taken; only retention is no longer held off
                log.warning("cannot pin %s: %s", source, exc)

    @staticmethod
    def unpin(exploits: list[dict[str, Any]]) -> None:
        for record in exploits:
            source = (record.get("donor_checkpoint") or "").rstrip(os.sep)
            if source:
                try:
                    os.unlink(source + PIN_SUFFIX)
                except OSError:
                    pass

    def _take_copy(self, record: dict[str, Any]) -> str | None:
        """The donor's checkpoint copied into the recipient's checkpoints (the copy is the recipient's from
        then on: the donor's retention can no longer touch it). The same path on a second try."""
        source = record["donor_checkpoint"]
        folder = self.home.run_dir(record["recipient"]) / CHECKPOINTS_DIR
        target = str(folder / f"pbt_g{record['generation']}_{os.path.basename(source.rstrip(os.sep))}")
        if os.path.exists(target):
            return target
        if not source or not os.path.exists(source):
            return None
        os.makedirs(folder, exist_ok=True)
        partial = target + ".partial"
        if os.path.isdir(source):
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(source, partial)
        else:
            shutil.copyfile(source, partial)
        os.replace(partial, target)
        return target

    # -- reading -----------------------------------------------------------------
    def describe(self, sweep: dict[str, Any]) -> dict[str, Any]:
        """The population: each member's state, current values and step, and the lineage (every exploit)."""
        state = self.load(sweep["id"])
        names = sweep["spec"]["params"]
        members = [{"member": r["trial"], "id": r["id"], "name": r["name"], "state": r["state"],
                    "step": self._step(r), "params": {n: r["config"]["params"].get(n) for n in names}}
                   for r in sorted(self.store.sweep_runs(sweep["id"]), key=lambda r: r["trial"])]
        # each member's schedule over its steps (D.member_schedule): what `mosaic sweeps NAME --schedule`
        # exports and --replay turns into a fixed schedule on a new run
        spec = sweep["spec"]
        for m in members:
            initial = D.initial_params(spec["params"], spec["seed"], m["member"])
            m["schedule"] = D.member_schedule(initial, state["lineage"], m["id"])
            if len(m["schedule"]) > 1:   # the spec replaying it on a new run (`--replay MEMBER`)
                m["replay_spec"] = D.replay_spec(spec, m["member"], m["schedule"], f"{m['name']}-replay")
        return {"generation": state["generation"], "members": members, "lineage": state["lineage"],
                "refused": state.get("refused", {}), "left": state.get("left", {}),
                "replay": spec["pbt"].get("replay"), "replayed": state.get("replayed", [])}
