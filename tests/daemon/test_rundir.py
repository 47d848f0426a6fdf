from workers.sdk.rundir import CheckpointSchedule


def saves(every: int, total: int, start: int = 0) -> list:
    """What a worker saves training units start+1..total: unit numbers on the way, 'final' at the end."""
    schedule, saved = CheckpointSchedule(every, start), []
    for done in range(start + 1, total + 1):
        if schedule.due(done, finished=done == total):
            saved.append(done)
            schedule.saved(done)
    return saved + (["final"] if schedule.final_due(total) else [])


def test_a_run_saves_every_nth_unit_on_the_way_and_always_ends_with_one():
    assert saves(3, 7) == [3, 6, "final"]
    assert saves(3, 6) == [3, "final"]          # the last unit is the final checkpoint, not both
    assert saves(0, 5) == ["final"]             # 0: only at the end
    assert saves(1, 3) == [1, 2, "final"]


def test_a_resumed_run_counts_from_its_checkpoint_and_saves_nothing_when_nothing_was_left():
    assert saves(2, 7, start=4) == [6, "final"]
    assert saves(2, 4, start=4) == []
