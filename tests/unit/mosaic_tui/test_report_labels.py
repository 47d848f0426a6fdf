"""mosaic_tui/report.py's short_labels: a group labelled by a continuous swept value is shown at
the fewest significant digits that keep the groups apart, its own label left whole."""
from __future__ import annotations

from mosaic_tui import report as R


def test_long_floats_are_shortened_while_the_labels_stay_apart():
    labels = ["episode_every=4,return_offset=43.59949021420037", "episode_every=4,return_offset=50.524609012170394",
              "episode_every=7,return_offset=85.39752926394888"]
    assert list(R.short_labels(labels).values()) == ["episode_every=4,return_offset=43.6",
                                                     "episode_every=4,return_offset=50.52",
                                                     "episode_every=7,return_offset=85.4"]


def test_close_values_keep_the_digits_that_tell_them_apart():
    labels = ["0.000123456789", "0.000123457789", "12.5"]
    short = R.short_labels(labels)
    assert short == {"0.000123456789": "0.000123457", "0.000123457789": "0.000123458", "12.5": "12.5"}   # 6 digits


def test_short_numbers_and_words_are_left_as_they_are():
    labels = ["lr=0.0003", "gamma=0.99", "ppo-v1.2", "(untagged)"]
    assert R.short_labels(labels) == {label: label for label in labels}


def test_the_table_shows_the_short_label_and_the_json_keeps_the_whole_one():
    runs = []
    for i, offset in enumerate((43.59949021420037, 85.39752926394888)):
        runs.append({"id": f"r{i}", "name": f"t{i}", "state": "succeeded", "env": "none", "worker": "synthetic",
                     "algo": "emit", "created_at": i, "config": {"env": "none", "seed": 7,
                                                                  "params": {"return_offset": offset}},
                     "summary": {"returns": [offset, offset + 1.0], "episodes": 2, "steps": 40}})
    report = R.build_report(runs, R.Options(by=["return_offset"], reps=0))
    assert [g["group"] for g in report["groups"]] == ["43.59949021420037", "85.39752926394888"]
    text = "\n".join(R.text_lines(report))
    assert "\n43.6  " in text and "\n85.4  " in text and "43.599" not in text
