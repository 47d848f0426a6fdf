"""workers/sdk/config.py's checks of what users type: values against a property schema, names folded."""
from __future__ import annotations

import pytest

from workers.sdk.config import (
    ConfigError,
    canonical_params,
    check_params,
    check_value,
    coerce_text,
    did_you_mean,
    integral,
    must_be,
    param_name,
)


@pytest.mark.parametrize("raw, value", [("10000", 10000), ("10_000", 10000), ("1e4", 10000), ("1.0e4", 10000),
                                        ("50000.0", 50000), ("-3", -3)])
def test_an_integer_as_users_type_it(raw, value):
    assert integral(raw) == value


@pytest.mark.parametrize("raw", ["1.5", "1e-3", "abc", "inf", "nan", ""])
def test_what_is_no_integer(raw):
    assert integral(raw) is None


def test_typed_text_becomes_the_value_its_schema_asks_for():
    assert coerce_text({"type": "integer"}, " 1e4 ") == 10000
    assert coerce_text({"type": "number"}, "3e-4") == 3e-4
    assert coerce_text({"type": "boolean"}, "Yes") is True and coerce_text({"type": "boolean"}, "off") is False
    assert coerce_text({"type": ["integer", "null"]}, "none") is None
    assert coerce_text({"type": ["integer", "null"], "x-null-words": ["random"]}, "random") is None
    assert coerce_text({"type": "array"}, "[16, 16]") == [16, 16]
    assert coerce_text({"type": "string"}, " keep spaces ") == " keep spaces "
    assert coerce_text({}, "anything") == "anything"
    with pytest.raises(ConfigError, match="must be an integer, not '1.5'"):
        coerce_text({"type": ["integer", "null"]}, "1.5")


def test_a_value_is_checked_against_its_bounds_enum_and_pattern():
    spec = {"type": "number", "minimum": 0, "exclusiveMaximum": 1.0}
    assert check_value("p.lr", spec, 0) == 0.0 and isinstance(check_value("p.lr", spec, 0), float)
    with pytest.raises(ConfigError, match="must be < 1"):
        check_value("p.lr", spec, 1.0)
    with pytest.raises(ConfigError, match="must be >= 0"):
        check_value("p.lr", spec, -0.5)
    with pytest.raises(ConfigError, match="finite"):
        check_value("p.lr", spec, float("nan"))
    with pytest.raises(ConfigError, match="must be a number, not bool True"):
        check_value("p.lr", spec, True)
    with pytest.raises(ConfigError, match="one of 'a', 'b'"):
        check_value("p.x", {"enum": ["a", "b"]}, "c")
    with pytest.raises(ConfigError, match="must match"):
        check_value("p.s", {"type": "string", "pattern": "^[a-z]+$"}, "A1")
    with pytest.raises(ConfigError, match="must be > 0"):
        check_value("p.n", {"type": "integer", "exclusiveMinimum": 0}, 0)
    assert check_value("p.n", {"type": "integer", "maximum": 4}, 4) == 4


def test_a_type_mistake_is_said_one_way():
    assert must_be(["integer"]) == "must be an integer"
    assert must_be(["number", "null"]) == "must be a number or null"


def test_a_parameter_is_found_by_its_folded_name_when_only_one_fits():
    props = {"learning-rate": {}, "num_envs": {}, "gamma": {}, "Both": {}, "both": {}}
    assert param_name(props, "learning_rate") == "learning-rate"
    assert param_name(props, "NUM-ENVS") == "num_envs"
    assert param_name(props, "both") == "both"          # exact wins
    assert param_name(props, "BOTH") is None             # two fit
    assert param_name(props, "lr") is None


def test_params_get_the_schemas_spelling_and_two_spellings_of_one_are_refused():
    schema = {"properties": {"learning-rate": {}, "gamma": {}}}
    assert canonical_params(schema, {"learning_rate": 1, "other": 2}) == {"learning-rate": 1, "other": 2}
    with pytest.raises(ConfigError, match="given twice"):
        canonical_params(schema, {"learning_rate": 1, "learning-rate": 2})
    assert canonical_params(schema, [1]) == [1]


def test_params_are_checked_with_defaults_filled_and_the_required_ones_asked_for():
    schema = {"properties": {"gamma": {"type": "number", "default": 0.99}, "steps": {"type": "integer"}},
              "required": ["steps"]}
    assert check_params(schema, {"steps": 5}) == {"steps": 5, "gamma": 0.99}
    with pytest.raises(ConfigError, match="is required"):
        check_params(schema, {})
    with pytest.raises(ConfigError) as exc:
        check_params(schema, {"steps": 1, "gama": 0.9})
    assert exc.value.field == "params.gama" and "did you mean 'gamma'" in str(exc.value)
    with pytest.raises(ConfigError, match="must be an object"):
        check_params(schema, [1])


def test_did_you_mean_names_the_closest_names_by_their_first_word_too():
    names = ["sac_continuous_action", "ppo", "dqn"]
    assert did_you_mean("sax", names) == "; did you mean 'sac_continuous_action'?"
    assert did_you_mean("PPO2", names) == "; did you mean 'ppo'?"
    assert did_you_mean("zzzzzz", names) == ""
