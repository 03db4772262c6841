"""Judge-server settings: each role's fields written out, read back as checked settings, and judges built."""

import dataclasses

import pytest

from trl_rankreward.judging.server_settings import (
    EVAL_JUDGE,
    GENRM,
    METARM,
    RUBRIC_GENERATOR,
    SETTINGS,
    TRAINING_JUDGE,
    EvalJudgeFields,
    GeneratorServerFields,
    GenRMFields,
    JudgeRole,
    JudgeServerSettings,
    MetaRMFields,
    TrainingJudgeFields,
    build_judge,
)

ROLES = [(TRAINING_JUDGE, TrainingJudgeFields), (EVAL_JUDGE, EvalJudgeFields), (METARM, MetaRMFields),
         (GENRM, GenRMFields), (RUBRIC_GENERATOR, GeneratorServerFields)]  # fmt: skip
SETTINGS_DEFAULTS = {f.name: f for f in dataclasses.fields(JudgeServerSettings)}


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_a_prefixed_config_round_trips_to_settings():
    settings = JudgeServerSettings(base_urls=["http://a/v1", "http://b/v1"], model="m", api_key_env="KEY",
                                   max_concurrency=5, timeout_s=7.5, max_attempts=2, require_listed_model=False,
                                   max_tokens=99, temperature=0.7, templates="t.yaml", prefix="metarm_")  # fmt: skip
    fields = {f"metarm_{name}": getattr(settings, name) for name in METARM.names}
    assert METARM.settings(MetaRMFields(**fields)) == settings


def test_each_role_writes_out_exactly_its_settings():
    for role, fields_class in ROLES:
        declared = {f.name: f for f in dataclasses.fields(fields_class)}
        assert list(declared) == [role.prefix + name for name in role.names], fields_class.__name__
        for f in declared.values():
            assert f.metadata["help"] and "{" not in f.metadata["help"], f.name


def test_the_roles_own_defaults():
    def default(fields_class, name):
        return _default(next(f for f in dataclasses.fields(fields_class) if f.name == name))

    assert (default(MetaRMFields, "metarm_temperature"), default(MetaRMFields, "metarm_max_tokens")) == (0.4, 16384)
    for fields_class, prefix in ((TrainingJudgeFields, "judge_"), (EvalJudgeFields, "eval_judge_")):
        assert (default(fields_class, prefix + "temperature"), default(fields_class, prefix + "max_tokens")) == (
            _default(SETTINGS_DEFAULTS["temperature"]),
            _default(SETTINGS_DEFAULTS["max_tokens"]),
        )
    assert (default(GenRMFields, "genrm_max_tokens"), default(GenRMFields, "genrm_max_concurrency")) == (4096, 32)
    assert default(GeneratorServerFields, "temperature") is None  # the rubric template decides
    assert set(TRAINING_JUDGE.names) == set(SETTINGS)
    assert "seed" not in METARM.names and "templates" not in GENRM.names
    # structured output: on for the judges, off for R-Align's free-form MetaRM, absent where answers are free text
    assert default(TrainingJudgeFields, "judge_structured_output") is True
    assert default(EvalJudgeFields, "eval_judge_structured_output") is True
    assert default(MetaRMFields, "metarm_structured_output") is False
    assert "structured_output" not in GENRM.names and "structured_output" not in RUBRIC_GENERATOR.names


def test_a_roles_fields_take_the_shared_default_or_the_roles_own_and_its_help():
    role = JudgeRole("x_", "tester", names=("base_urls", "max_concurrency", "max_tokens", "model"),
                     defaults={"max_tokens": 7, "model": dataclasses.MISSING}, notes={"model": "Say which."})  # fmt: skip
    Fields = role.fields("Fields", "A test role's fields.")
    first, second = Fields(x_model="a"), Fields(x_model="b")
    assert (first.x_max_concurrency, first.x_max_tokens) == (JudgeServerSettings.max_concurrency, 7) == (64, 7)
    assert first.x_base_urls == [] and first.x_base_urls is not second.x_base_urls  # a fresh list each
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(Fields)}
    assert helps["x_max_concurrency"] == "Most tester requests in flight at once."  # the template, for this role
    assert helps["x_model"] == "Model name served at x_base_urls (required with them). Say which."
    with pytest.raises(TypeError, match="x_model"):
        Fields()  # MISSING: a required field (a required flag)
    with pytest.raises(ValueError, match="x_max_tokens must be >= 1"):
        Fields(x_model="a", x_max_tokens=0)  # the role's check runs when the fields are built


def test_each_setting_is_declared_once():
    # the roles' fields are made from JudgeServerSettings: no role class declares a field of its own
    for _, fields_class in ROLES:
        assert fields_class.__dataclass_fields__.keys() == {f.name for f in dataclasses.fields(fields_class)}
        assert all(not hasattr(base, "__dataclass_fields__") for base in fields_class.__mro__[1:-1])


def test_a_config_without_a_field_of_its_role_keeps_the_settings_default():
    # The MetaRM has no seed field (its prompt shows A and B as given): its settings keep seed 0.
    assert METARM.settings(MetaRMFields()).seed == 0


def test_required_settings_are_required_flags():
    with pytest.raises(TypeError, match="base_urls"):
        GeneratorServerFields(model="m")
    assert RUBRIC_GENERATOR.settings(GeneratorServerFields(base_urls=["http://a/v1"], model="m")).max_concurrency == 32


def test_comma_separated_urls_are_split():
    config = MetaRMFields(metarm_base_urls="http://a/v1,http://b/v1", metarm_model="m")
    assert METARM.settings(config).base_urls == ["http://a/v1", "http://b/v1"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"metarm_base_urls": ["http://a/v1"]}, r"metarm_base_urls=\['http://a/v1'\] needs metarm_model"),
        ({"metarm_max_tokens": 0}, "metarm_max_tokens must be >= 1, got 0"),
        ({"metarm_max_concurrency": 0}, "metarm_max_concurrency must be >= 1, got 0"),
        ({"metarm_max_attempts": 0}, "metarm_max_attempts must be >= 1, got 0"),
        ({"metarm_timeout_s": 0}, "metarm_timeout_s must be > 0, got 0"),
        ({"metarm_temperature": -0.1}, "metarm_temperature must be >= 0, got -0.1"),
    ],
)
def test_errors_name_the_prefixed_field(fields, message):
    with pytest.raises(ValueError, match=message):
        METARM.settings(MetaRMFields(**fields))


def test_a_judge_needs_urls_unless_the_embedded_judge_may_stand_in():
    with pytest.raises(ValueError, match="metarm_base_urls is empty"):
        build_judge(METARM.settings(MetaRMFields()))
    from trl_rankreward.judging.quality_judge import EmbeddingJudge

    judge = build_judge(JudgeServerSettings(seed=4), embedded_without_urls=True)
    assert isinstance(judge, EmbeddingJudge) and judge.seed == 4


def test_build_judge_passes_every_setting(models_server, tmp_path):
    # The stub server lists model "m" (tests.conftest.models_server).
    templates = tmp_path / "t.yaml"
    templates.write_text("meta: |\n  Custom. {QUERY} {RESPONSE_A} {RESPONSE_B} {GOLDEN_RATIONALE} {RATIONALE}\n")
    settings = JudgeServerSettings(base_urls=[models_server], model="m", max_concurrency=5, timeout_s=7.5,
                                   max_attempts=2, max_tokens=99, temperature=0.7, templates=str(templates),
                                   seed=3, structured_output=False)  # fmt: skip
    judge = build_judge(settings)
    assert (judge.backend.base_urls, judge.backend.model) == ([models_server], "m")
    assert (judge.backend.max_concurrency, judge.backend.timeout_s, judge.retry.max_attempts) == (5, 7.5, 2)
    assert (judge.max_tokens, judge.temperature, judge.seed, judge.retry.seed) == (99, 0.7, 3, 3)
    assert judge.structured_output is False
    assert judge.templates.meta.startswith("Custom.")
