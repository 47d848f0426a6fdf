"""The runs query language (mosaic_tui/query.py): precedence, types, unknown keys, quoting, and the
one-line errors that point at a column."""
from __future__ import annotations

import time
from datetime import datetime

import pytest

from mosaic_tui.query import Keys, MatchCache, QueryError, TableFilter, compile_query, is_query, parse, ulid_time

NOW = datetime(2026, 11, 28, 12, 0).timestamp()


def _run(name, algo, env, state, params, returns, steps, tags=(), note="", sweep=None, trial=None, created=NOW,
         seed=1):
    return {"id": name.upper().ljust(26, "0"), "name": name, "worker": "cleanrl", "algo": algo, "env": env,
            "state": state, "tags": list(tags), "note": note, "sweep": sweep, "trial": trial, "created_at": created,
            "started_at": created, "ended_at": created + 3600 if state == "succeeded" else None,
            "config": {"seed": seed, "steps": 1_000_000, "params": params, "device": "cpu"},
            "summary": {"steps": steps, "returns": returns, "best_return": max(returns) if returns else None}}


RUNS = [
    _run("ppo-a", "ppo", "CartPole-v1", "succeeded", {"learning-rate": 1e-4, "gamma": 0.99, "net": {"hidden": 64}},
         [400, 500], 1_000_000, tags=["baseline"], note="lr too high?", sweep="lr", trial=0),
    _run("ppo-b", "ppo", "CartPole-v1", "succeeded", {"learning-rate": 3e-4, "gamma": 0.95, "net": {"hidden": 128}},
         [450, 470], 2_000_000, sweep="lr", trial=1, created=NOW - 5 * 86400),
    _run("dqn-c", "dqn", "Acrobot-v1", "running", {"learning-rate": 5e-4, "gamma": 0.99, "activation": "tanh"},
         [-100], 30_000, tags=["ablation", "baseline-2"]),
    _run("sac-d", "sac_continuous_action", "Pendulum-v1", "failed", {"learning_rate": 1e-3, "anneal": True}, [], 0),
]
KEYS = Keys(RUNS)


def names(text, runs=RUNS, keys=KEYS, window=20):
    """The runs a query keeps, the same run by run and through the bit masks of a MatchCache."""
    query = compile_query(text, keys, now=NOW, window=window)
    kept = [r["name"] for r in query.filter(runs)]
    assert [r["name"] for r in query.filter(list(runs), MatchCache())] == kept, text
    return kept


def error(text, keys=KEYS) -> QueryError:
    with pytest.raises(QueryError) as info:
        compile_query(text, keys, now=NOW)
    return info.value


def test_config_values_summary_figures_and_fields():
    assert names("lr < 3e-4") == ["ppo-a"]                       # lr: the workers' learning-rate
    assert names("learning_rate <= 3e-4") == ["ppo-a", "ppo-b"]  # - and _ are one
    assert names("params.gamma == 0.99") == ["ppo-a", "dqn-c"]
    assert names("gamma != 0.99") == ["ppo-b"]
    assert names("algo in (ppo, dqn)") == ["ppo-a", "ppo-b", "dqn-c"]
    assert names("algo not in (ppo, dqn)") == ["sac-d"]
    assert names("mean_return > 400") == ["ppo-a", "ppo-b"]
    assert names("mean_return > 400", window=1) == ["ppo-a", "ppo-b"]
    assert names("return >= 475", window=1) == ["ppo-a"]         # the window: the last episode only
    assert names("steps >= 1e6") == ["ppo-a", "ppo-b"]
    assert names("steps >= 1.5M") == ["ppo-b"]
    assert names("state = succeeded") == ["ppo-a", "ppo-b"]
    assert names("net.hidden > 100") == ["ppo-b"]                # nested params, dotted
    assert names("params.net.hidden = 64") == ["ppo-a"]
    assert names("anneal = true") == ["sac-d"]
    assert names("activation = TANH") == ["dqn-c"]               # text compares in any case
    assert names("config.device = cpu") == ["ppo-a", "ppo-b", "dqn-c", "sac-d"]
    assert names("seed = 1 and env ~ cart") == ["ppo-a", "ppo-b"]
    assert names("sweep = lr and trial = 1") == ["ppo-b"]
    assert names("group = lr-t0") == ["ppo-a"]
    # a sweep's run (named <sweep>-t<trial>-s<seed> by the sweep, its id in the record): its sweep's name
    swept = _run("grid-t3-s2", "ppo", "CartPole-v1", "succeeded", {}, [1], 1, sweep="01SWEEPID", trial=3)
    assert names("sweep = grid and group = grid-t3", [swept], Keys([swept])) == ["grid-t3-s2"]
    assert names("sweep_id = 01sweepid", [swept], Keys([swept])) == ["grid-t3-s2"]
    assert names("env = *-v1 and not env = cart*") == ["dqn-c", "sac-d"]


def test_tags_notes_and_dates():
    assert names("tag = baseline") == ["ppo-a"]                  # a tag, exactly
    assert names("tag ~ baseline") == ["ppo-a", "dqn-c"]
    assert names("tags in (ablation, nope)") == ["dqn-c"]
    assert names("tag:baseline") == ["ppo-a"] == names("#baseline")
    assert names("note ~ 'too high'") == ["ppo-a"]
    assert names("created < 3d") == ["ppo-b"]                    # 3d: three days ago
    assert names("created > 3d") == ["ppo-a", "dqn-c", "sac-d"]
    assert names("created = 2026-11-23") == ["ppo-b"]            # the whole day
    assert names("created >= 2026-11-28T12:00") == ["ppo-a", "dqn-c", "sac-d"]
    assert names("created = today") == ["ppo-a", "dqn-c", "sac-d"]
    assert names("elapsed >= 1h") == ["ppo-a", "ppo-b"]


def test_precedence_not_and_or():
    # not > and > or: "a or b and c" is "a or (b and c)"
    assert names("algo = sac_continuous_action or algo = ppo and gamma = 0.95") == ["ppo-b", "sac-d"]
    assert names("(algo = sac_continuous_action or algo = ppo) and gamma = 0.95") == ["ppo-b"]
    assert names("not algo = ppo and gamma = 0.99") == ["dqn-c"]       # (not a) and b
    assert names("not (algo = ppo and gamma = 0.99)") == ["ppo-b", "dqn-c", "sac-d"]
    assert names("not not algo = dqn") == ["dqn-c"]
    tree = parse("a or b and not c")
    assert tree.kind == "or" and tree.children[1].kind == "and" and tree.children[1].children[1].kind == "not"


def test_a_run_without_the_key_matches_no_comparison():
    assert names("activation != relu") == ["dqn-c"]       # only dqn-c has an activation
    assert names("not activation = relu") == ["ppo-a", "ppo-b", "dqn-c", "sac-d"]
    assert names("mean_return < 0") == ["dqn-c"]          # sac-d has no episode


def test_quoting():
    runs = [_run("with space", "ppo", "CartPole-v1", "succeeded", {"tag": "a b", "q": 'say "hi"'}, [1], 1,
                 note="a (b) = c")]
    keys = Keys(runs)
    assert names("name = 'with space'", runs, keys) == ["with space"]
    assert names('params.tag = "a b"', runs, keys) == ["with space"]
    assert names(r'q = "say \"hi\""', runs, keys) == ["with space"]
    assert names("note ~ '(b) = c'", runs, keys) == ["with space"]   # operators inside quotes are text
    assert names('"(b) ="', runs, keys) == ["with space"]            # a quoted phrase, as plain words
    assert names("'q' ~ hi and name ~ space", runs, keys) == ["with space"]   # a quoted key


def test_numbers_are_typed():
    assert names("lr = 0.0003") == ["ppo-b"]
    assert names("lr = 3e-4") == ["ppo-b"]
    assert names("steps > 2e4 and steps < 1e5") == ["dqn-c"]
    assert names("steps = 30k") == ["dqn-c"]
    # a number in quotes is text: no param holds the text "3e-4"
    assert names("lr = '3e-4'") == []


@pytest.mark.parametrize("text, column, words", [
    ("lrr < 3e-4", 1, "unknown key lrr (did you mean lr?)"),
    ("algo = ppo and gamma < 0.9 and learningrate > 1", 32, "unknown key learningrate"),
    ("params.nope = 1", 1, "unknown key params.nope"),
    ("config.nope = 1", 1, "unknown key config.nope"),
    ("steps > abc", 9, "steps is a number: abc is not one"),
    ("gamma < high", 9, "gamma holds numbers: high is not one"),
    ("elapsed > soon", 11, "elapsed is a duration"),
    ("created > last-week", 11, "created is a date"),
    ("state = runing", 9, "no state is called runing (did you mean running?)"),
    ("tag < a", 7, "tags are words"),
    ("steps ~ 1", 9, "~ finds text"),
    ("(algo = ppo", 1, "this ( is not closed"),
    ("algo = ppo)", 11, "this ) closes no ("),
    ("algo in ppo", 9, "in takes a list in parentheses"),
    ("algo in (ppo", 9, "this list's ( is not closed"),
    ("algo in ()", 10, "the list is empty"),
    ("lr <", 4, "lr < needs a value, found the end"),
    ("lr < and", 6, "needs a value, found 'and'"),
    ("algo = ppo and", 12, "a term is missing"),
    ("< 3", 1, "< needs a key before it"),
    ("name = 'open", 8, "the quote ' opened here is not closed"),
    ("steps ! 3", 7, "not an operator"),
    ("or algo = ppo", 1, "or needs a term before it"),
    ("()", 2, "empty parentheses"),
    ("algo = ppo gamma = 0.9", 12, "and or or is missing before 'gamma'"),   # no "and" implied
    ("algo = ppo a", 12, "and or or is missing before 'a'"),
    ("", 1, "the query is empty"),
])
def test_errors_name_the_problem_and_its_column(text, column, words):
    err = error(text)
    assert err.column == column, (text, str(err))
    assert words in err.message, (text, err.message)
    line = err.line("--where")
    assert "\n" not in line and line.startswith(f"--where {text!r}: column {column}: ")


def test_unknown_keys_are_only_checked_against_runs():
    # no runs known (None, or an empty list): any param key is taken as it is
    assert compile_query("lrr < 1", None, now=NOW).filter(RUNS) == []
    assert compile_query("lrr < 1", Keys([]), now=NOW).filter(RUNS) == []


def test_plain_words_are_no_query():
    assert not is_query("ppo cartpole")
    assert not is_query("tag:baseline ppo-a")
    assert not is_query("CartPole-v1 #x")
    for text in ("lr<3e-4", "a or b", "not a", "(a)", "algo in (x)", "x ~ y", "'open"):
        assert is_query(text), text
    # plain words through the query language mean what the plain filter means
    assert names("ppo and high") == ["ppo-a"]


def test_ulid_time_reads_the_run_id():
    from daemon.store import new_ulid
    now = time.time()
    assert abs(ulid_time(new_ulid(now)) - now) < 0.002
    assert ulid_time("short") is None


def test_ten_thousand_runs_compile_and_filter():
    runs = [_run(f"r{i}", "ppo" if i % 2 else "dqn", "CartPole-v1", "succeeded",
                 {"learning-rate": i * 1e-6, "gamma": 0.99}, [i % 500], i) for i in range(10_000)]
    keys = Keys(runs)
    query = compile_query("lr < 3e-3 and algo in (ppo) and mean_return > 100 or tag = x", keys, now=NOW)
    kept = query.filter(runs)
    assert len(kept) == sum(1 for i in range(3000) if i % 2 and i % 500 > 100)


def test_a_term_typed_again_is_not_tested_again():
    """The table's filter at each key typed: a term kept from the last query is not tested over
    the runs again, a key's values are read once, and the mean return was worked out ahead."""
    runs = [_run(f"r{i:02d}", "ppo", "CartPole-v1", "succeeded", {"learning-rate": i * 1e-4}, [i], i)
            for i in range(50)]
    reads = []

    def hay(run):
        reads.append(run["id"])
        return run["name"], set()
    cache = MatchCache()
    keys = Keys(runs)
    first = compile_query("lr < 3e-3 and r1", keys, now=NOW, hay=hay)
    assert [r["name"] for r in first.filter(runs, cache)] == [f"r{i}" for i in range(10, 20)]
    assert len(reads) == 50
    second = compile_query("lr < 3e-3 and r2", keys, now=NOW, hay=hay)
    assert [r["name"] for r in second.filter(runs, cache)] == [f"r{i}" for i in range(20, 30)]
    assert len(reads) == 50                      # the haystacks read once, lr < 3e-3's matches kept
    cache.use(list(runs))                        # another list (a new sort): all forgotten
    assert cache.masks == {} and cache.columns == {}

    table_filter = TableFilter()
    by_id = {r["id"]: r for r in runs}
    table_filter.warm(by_id, runs, 20)
    import mosaic_tui.query as q
    seen = q.FIELDS["mean_return"]
    q.FIELDS["mean_return"] = ("num", lambda r, now, w: pytest.fail("mean return worked out again"))
    try:
        query = table_filter.resolve("mean_return >= 48", by_id, 20, hay)
        assert [r["name"] for r in query.filter(runs, table_filter.matches)] == ["r48", "r49"]
    finally:
        q.FIELDS["mean_return"] = seen


def test_sort_by_any_key_and_column_values():
    from mosaic_tui.query import key_reader, sort_runs, value_text
    assert [r["name"] for r in sort_runs(RUNS, "lr", KEYS)] == ["ppo-a", "ppo-b", "dqn-c", "sac-d"]
    assert [r["name"] for r in sort_runs(RUNS, "-mean_return", KEYS)] == ["ppo-b", "ppo-a", "dqn-c", "sac-d"]
    # runs without the key go last, either way
    assert [r["name"] for r in sort_runs(RUNS, "-activation", KEYS)][0] == "dqn-c"
    assert [r["name"] for r in sort_runs(RUNS, "net.hidden", KEYS)][-2:] == ["dqn-c", "sac-d"]
    read = key_reader("params.net", KEYS)
    assert value_text(read(RUNS[0])) == '{"hidden":64}' and value_text(read(RUNS[3])) == "-"
    assert value_text(key_reader("lr", KEYS)(RUNS[1])) == "0.0003"
    with pytest.raises(QueryError, match="unknown key nope"):
        sort_runs(RUNS, "nope", KEYS)
