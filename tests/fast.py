"""`make test-fast`: the unit layer and the quick integration tests, an answer in minutes.

The unit layer is tests/unit/ (marked ``unit``): pure pieces, named after the module each tests,
no process, no socket. The quick integration tests (marked ``quick``) are listed in QUICK, whole
modules or single tests, chosen by measuring (``--durations=0``): each took under ~2 s with a
real daemon and real workers, and none needs Ray, Slurm or a terminal. ``make test`` runs them all
with everything else; ``MOSAIC_FAST=1`` (what ``make test-fast`` sets) collects only these, so the
other modules are not even imported. An entry that names nothing is an error, not a silent gap.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNIT_DIR = "tests/unit/"

# Measured with --durations on 2 cores shared with other suites (load average 8 to 14), 2026-11-28:
# every test here took at most 4 s there (its slowest, after the entry), well under 2 s on a quiet
# machine. A module listed whole has no slower test; a parametrized test is listed by its name.
QUICK = {
    "tests/app/test_away_keys.py",  # 1.2 s, 3 tests
    "tests/app/test_data.py::test_a_series_decimation_for_log_y_keeps_positive_extremes_and_follows_new_points",  # 1.4 s
    "tests/app/test_data.py::test_buckets_draw_their_min_and_max_at_any_width",  # 0.0 s
    "tests/app/test_data.py::test_decimate_keeps_every_column_extreme",  # 0.1 s
    "tests/app/test_data.py::test_decimating_a_million_points_makes_as_many_python_calls_as_a_thousand",  # 0.4 s
    "tests/app/test_data.py::test_ema_matches_tensorboard",  # 0.1 s
    "tests/app/test_data.py::test_envs_offered_per_algorithm_or_for_all",  # 1.8 s
    "tests/app/test_data.py::test_episodes_become_series",  # 0.0 s
    "tests/app/test_data.py::test_events_are_absorbed_once_in_cursor_order",  # 0.0 s
    "tests/app/test_data.py::test_formatting",  # 0.0 s
    "tests/app/test_data.py::test_one_number_format_for_the_app_and_the_cli",  # 0.0 s
    "tests/app/test_data.py::test_run_records_keep_the_newest_revision_and_tombstones",  # 0.1 s
    "tests/app/test_data.py::test_smoothing_buckets_moves_as_their_points_would",  # 0.1 s
    "tests/app/test_data.py::test_steps_per_second_read_alike_everywhere",  # 0.3 s
    "tests/app/test_lineage_view.py",  # 3.1 s, 3 tests (a fake sweep reply, no daemon)
    "tests/app/test_link_hold.py",  # 0.0 s
    "tests/app/test_plots.py::test_plot_steps_grow_like_a_full_pass",  # 3.8 s
    "tests/app/test_plots.py::test_ticks_that_would_share_a_row_are_thinned_top_down",  # 0.0 s
    "tests/app/test_reading.py::test_workers_capabilities_are_a_table",  # 3.4 s
    "tests/app/test_run_screen_removed.py::test_a_run_screen_removed_while_it_is_built_does_not_end_the_app",  # 2.7 s
    "tests/app/test_runs_table_scale.py::test_the_run_list_is_kept_out_of_full_collections_while_the_app_runs",  # 2.8 s
    "tests/app/test_screens.py::test_a_run_screens_keys_are_not_taken_by_its_panes",  # 0.0 s
    "tests/app/test_screens.py::test_command_palette_offers_run_actions",  # 0.8 s
    "tests/app/test_screens.py::test_config_tab_shows_the_config",  # 2.3 s
    "tests/app/test_screens.py::test_deleted_and_changed_runs_update_the_table",  # 1.0 s
    "tests/app/test_screens.py::test_key_bar_renders_in_every_theme",  # 3.7 s
    "tests/app/test_screens.py::test_q_detaches",  # 0.9 s
    "tests/app/test_screens.py::test_runs_table_shows_every_run_newest_first",  # 0.6 s
    "tests/app/test_screens.py::test_space_selects_several_runs",  # 2.0 s
    "tests/app/test_screens.py::test_theme_cycles_and_is_remembered",  # 2.2 s
    "tests/app/test_screens.py::test_vim_keys_sort_reverse_and_filter",  # 2.3 s
    "tests/app/test_screens.py::test_workers_screen_lists_capabilities",  # 3.9 s
    "tests/app/test_snapshots.py::test_compare",  # 3.1 s
    "tests/app/test_snapshots.py::test_help",  # 3.7 s
    "tests/app/test_snapshots.py::test_runs_screen",  # 1.6 s
    "tests/app/test_snapshots.py::test_runs_screen_high_contrast",  # 2.4 s
    "tests/app/test_snapshots.py::test_watch_60x8",  # 2.0 s
    "tests/app/test_snapshots.py::test_watch_80x12",  # 2.3 s
    "tests/app/test_snapshots.py::test_workers",  # 2.6 s
    "tests/app/test_sweep_app.py::test_group_band_is_the_mean_min_and_max_of_the_seeds_within_their_steps",  # 0.0 s
    "tests/app/test_transcript.py::test_no_text_under_the_scrollbar_when_it_appears_as_the_transcript_grows",  # 0.5 s
    "tests/app/test_transcript.py::test_rows_fold_at_the_width_under_their_indent",  # 0.0 s
    "tests/app/test_watch.py::test_follows_the_newest_run_and_switches",  # 1.2 s
    "tests/app/test_watch.py::test_named_run_fits_80x12_with_two_plots_and_log_lines",  # 1.2 s
    "tests/app/test_watch.py::test_smaller_panes_drop_the_logs_then_a_plot",  # 0.9 s
    "tests/app/test_watch.py::test_the_second_plot_is_a_loss_not_a_timing",  # 1.8 s
    "tests/app/test_watch.py::test_unknown_run_says_so",  # 0.9 s
    "tests/test_ci_checks.py",  # 0.2 s, 2 tests
    "tests/cli/test_cli.py::test_daemon_stop_counts_an_unreaped_daemon_as_stopped",  # 0.4 s
    "tests/cli/test_cli.py::test_metrics_csv_rows_are_what_csv_writer_writes",  # 0.1 s
    "tests/cli/test_cli.py::test_the_app_without_a_terminal_says_so_and_exits",  # 2.9 s
    "tests/cli/test_cli.py::test_the_csv_fast_path_cuts_what_the_emitter_really_writes",  # 0.0 s
    "tests/workers/sdk/test_dataset.py::test_artifacts_tab_lists_the_recorded_dataset",  # 0.3 s
    "tests/workers/sdk/test_dataset.py::test_record_config",  # 0.1 s
    "tests/workers/sdk/test_dataset.py::test_same_step_autoreset_takes_the_final_observation",  # 0.6 s
    "tests/workers/sdk/test_dataset.py::test_single_env_episodes_load_in_tianshou",  # 0.7 s
    "tests/workers/sdk/test_dataset.py::test_vector_env_keeps_episodes_apart_and_skips_autoreset_steps",  # 1.0 s
    "tests/daemon/test_discovery.py::test_daemon_and_cli_import_nothing_heavy",  # 3.7 s
    "tests/test_doc_references.py::test_what_is_in_the_tree_or_upstream_passes",  # 0.0 s
    "tests/test_docs.py",  # 1.6 s, 6 tests
    "tests/daemon/test_experiments.py::test_a_run_whose_worker_has_exited_but_is_not_reaped_gets_no_sample",  # 0.5 s
    "tests/workers/fastlane/test_fastlane.py::test_a_frame_size_change_starts_a_generation_that_readers_follow",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_a_restarted_writer_takes_over_and_keeps_counting",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_a_writer_dead_mid_write_leaves_an_odd_slot_that_is_never_accepted",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_bytes_changed_after_the_commit_fail_the_checksum",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_cleanup_after_sigkill_leaves_nothing_in_dev_shm",  # 3.4 s
    "tests/workers/fastlane/test_fastlane.py::test_close_unlink_leaves_a_newer_writers_segment_alone",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_demo_writer_closes_its_segment_on_sigterm_and_attach_follows_it",  # 1.7 s
    "tests/workers/fastlane/test_fastlane.py::test_fps_limit_drops_early_frames_but_not_a_producer_at_the_limit",  # 0.1 s
    "tests/workers/fastlane/test_fastlane.py::test_frames_are_converted_to_rgb8",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_header_fields_sit_at_the_documented_offsets",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_max_dim_downscales_by_area_average",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_reader_gets_the_published_frame_exactly",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_reader_survives_the_segment_disappearing",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_run_ids_that_could_escape_or_collide_are_refused",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_the_check_used_by_the_stress_test_does_catch_a_torn_frame",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_the_checksum_binds_bytes_to_their_frame_number",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_tile_lays_out_the_first_n_envs_in_a_grid",  # 0.0 s
    "tests/workers/fastlane/test_fastlane.py::test_wrap_around_keeps_the_last_capacity_frames",  # 0.0 s
    "tests/daemon/test_history.py::test_a_history_caught_up_from_the_file_in_pieces_is_the_one_the_ingest_makes",  # 0.1 s
    "tests/daemon/test_history.py::test_a_saved_history_loads_as_it_was_and_a_torn_one_is_rebuilt",  # 0.1 s
    "tests/daemon/test_history.py::test_a_short_tag_is_its_points_exactly_as_the_app_reads_them",  # 0.1 s
    "tests/daemon/test_history.py::test_buckets_hold_their_points_count_mean_min_max_and_last",  # 0.3 s
    "tests/daemon/test_history.py::test_one_tag_chunks_from_the_ingest_go_straight_to_numpy_with_the_same_result",  # 0.2 s
    "tests/daemon/test_history.py::test_the_same_points_in_other_chunks_make_the_same_history",  # 0.5 s
    "tests/daemon/test_limits.py::test_bad_settings_are_refused_with_the_key_named",  # 1.1 s
    "tests/test_lint.py",  # 0.0 s, 3 tests
    "tests/workers/sdk/test_llm_client.py::test_a_fault_that_persists_ends_in_reply_error_after_bounded_retries",  # 1.5 s
    "tests/workers/sdk/test_llm_client.py::test_a_refused_request_is_not_retried",  # 0.8 s
    "tests/workers/sdk/test_llm_client.py::test_balrog_extraction_and_choice_matching",  # 0.0 s
    "tests/workers/sdk/test_llm_client.py::test_cost_from_configured_prices",  # 2.1 s
    "tests/workers/sdk/test_llm_client.py::test_endpoint_down_and_too_slow",  # 3.6 s
    "tests/workers/sdk/test_llm_client.py::test_history_prompt_builder_as_balrog_builds_it",  # 0.0 s
    "tests/workers/sdk/test_llm_client.py::test_ingest_counts_final_llm_steps_only",  # 0.0 s
    "tests/workers/sdk/test_llm_client.py::test_keys_come_from_env_or_a_private_file_never_from_the_spec",  # 0.0 s
    "tests/workers/sdk/test_llm_client.py::test_llm_step_event_on_the_wire",  # 0.0 s
    "tests/daemon/test_native_crash.py::test_a_segfault_names_the_innermost_installed_package",  # 0.3 s
    "tests/daemon/test_native_crash.py::test_flags_name_each_instruction_set_and_never_amx",  # 0.0 s
    "tests/daemon/test_native_crash.py::test_llama_cpp_crashes_read_as_the_local_model_with_the_fix",  # 0.0 s
    "tests/daemon/test_pbt.py::test_a_spec_asking_to_mutate_what_a_checkpoint_cannot_take_is_refused_in_one_line",  # 0.0 s
    "tests/daemon/test_pbt_replay.py::test_a_replay_spec_with_a_search_space_is_refused_in_one_line",  # 0.0 s
    "tests/daemon/test_protocol.py::test_a_raw_events_page_splits_back_into_its_head_and_its_lines_as_bytes",  # 0.0 s
    "tests/daemon/test_protocol.py::test_hello_and_status",  # 3.5 s
    "tests/daemon/test_protocol.py::test_the_app_reaches_no_daemon_internals",  # 1.2 s
    "tests/daemon/test_rundir.py",  # 0.0 s, 2 tests
    "tests/workers/sdk/test_sdk_envs.py::test_two_post_import_patches_of_one_module_both_run",  # 0.8 s
    "tests/daemon/test_seeds.py::test_only_a_missing_seed_is_drawn",  # 0.0 s
    "tests/daemon/test_store.py",  # 0.1 s, 7 tests
    "tests/daemon/test_telemetry.py::test_a_paced_heartbeat_goes_out_once_per_interval_and_a_plain_one_always",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_a_run_killed_between_two_lines_of_a_step_gets_the_missing_ones_when_continued",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_a_type_that_is_no_string_is_an_invalid_line_not_a_crash",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_backlog_is_taken_verbatim_only_before_the_first_irregular_line",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_backlog_reads_page_to_the_end_including_a_final_partial_line",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_buffering_writes_whole_lines_only",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_check_event_names_the_problem",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_child_process_writes_through_inherited_fd",  # 0.5 s
    "tests/daemon/test_telemetry.py::test_every_event_type_round_trips",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_final_drain_of_a_large_backlog_keeps_lines_whole",  # 0.2 s
    "tests/daemon/test_telemetry.py::test_ingest_counts_bad_lines_and_keeps_going",  # 0.0 s
    "tests/daemon/test_telemetry.py::test_split_events_fast_path_agrees_with_the_careful_path",  # 0.2 s
    "tests/daemon/test_telemetry.py::test_summary_of_a_scalar_chunk_is_what_the_event_loop_makes",  # 0.0 s
    "tests/workers/test_worker_guard.py::test_a_cleanrl_script_that_cannot_be_patched_does_not_run",  # 3.6 s
    "tests/workers/test_worker_guard.py::test_every_worker_has_a_thin_cli_that_hands_over_to_the_shared_guard",  # 0.2 s
    "tests/workers/test_worker_guard.py::test_the_example_worker_has_the_same_shape",  # 0.0 s
}


def fast_run(config) -> bool:
    return os.environ.get("MOSAIC_FAST") == "1"


def _entries() -> tuple[set[str], set[str]]:
    """QUICK split into whole modules and single tests (node ids)."""
    modules = {entry for entry in QUICK if "::" not in entry}
    tests = {entry for entry in QUICK if "::" in entry}
    return modules, tests


def _relative(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def pytest_configure(config):
    config.addinivalue_line("markers", "unit: tests/unit, a pure piece in milliseconds (make test-fast)")
    config.addinivalue_line("markers", "quick: an integration test make test-fast runs (tests/fast.py)")
    if fast_run(config):
        missing = sorted(entry for entry in QUICK if not (ROOT / entry.split("::")[0]).is_file())
        if missing:
            raise pytest.UsageError(f"tests/fast.py names test files that do not exist: {', '.join(missing)}")


def pytest_ignore_collect(collection_path, config):
    """With MOSAIC_FAST=1, test files that hold nothing of the fast set are not collected (nor imported)."""
    if not fast_run(config) or collection_path.is_dir() or collection_path.suffix != ".py" \
            or not collection_path.name.startswith("test_"):
        return None
    rel = _relative(collection_path)
    files = {entry.split("::")[0] for entry in QUICK}
    if rel.startswith(UNIT_DIR) or rel in files:
        return None
    return True


def _plain_nodeid(item) -> str:
    """The node id without pytest-xdist's ``@group`` suffix (--dist loadgroup adds it to grouped tests)."""
    group = item.get_closest_marker("xdist_group")
    name = (group.args[0] if group.args else group.kwargs.get("name")) if group else None
    suffix = f"@{name}"
    return item.nodeid[:-len(suffix)] if name and item.nodeid.endswith(suffix) else item.nodeid


def pytest_collection_modifyitems(config, items):
    modules, tests = _entries()
    found: set[str] = set()
    for item in items:
        nodeid = _plain_nodeid(item).split("[")[0]
        path = nodeid.split("::")[0]
        if path.startswith(UNIT_DIR):
            item.add_marker(pytest.mark.unit)
        elif path in modules or nodeid in tests:
            item.add_marker(pytest.mark.quick)
            found.add(nodeid if nodeid in tests else path)
    if not fast_run(config):
        return
    selected_paths = {_plain_nodeid(item).split("::")[0] for item in items}
    stale = sorted(entry for entry in tests - found if entry.split("::")[0] in selected_paths)
    if stale:
        raise pytest.UsageError(f"tests/fast.py names tests that do not exist: {', '.join(stale)}")
    keep = [item for item in items if item.get_closest_marker("unit") or item.get_closest_marker("quick")]
    dropped = [item for item in items if not (item.get_closest_marker("unit") or item.get_closest_marker("quick"))]
    if dropped:
        items[:] = keep
        config.hook.pytest_deselected(items=dropped)
