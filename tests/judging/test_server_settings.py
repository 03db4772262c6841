"""Judge-server settings: roles turn them into prefixed fields and back, check them once, and build judges."""

import dataclasses

import pytest

from trl_rankreward.judging.server_settings import (
    EVAL_JUDGE,
    GENRM,
    METARM,
    RUBRIC_GENERATOR,
    SETTINGS,
    TRAINING_JUDGE,
    JudgeServerSettings,
    build_judge,
)

ROLES = [TRAINING_JUDGE, EVAL_JUDGE, METARM, GENRM, RUBRIC_GENERATOR]


@dataclasses.dataclass
class MetaRMConfig(METARM.fields()):
    """A config with the MetaRM's fields, as `RAlignGenRMConfig` and eval-genrm's arguments have them."""


def test_a_prefixed_config_round_trips_to_settings():
    settings = JudgeServerSettings(base_urls=["http://a/v1", "http://b/v1"], model="m", api_key_env="KEY",
                                   max_concurrency=5, timeout_s=7.5, max_attempts=2, require_listed_model=False,
                                   max_tokens=99, temperature=0.7, templates="t.yaml", prefix="metarm_")  # fmt: skip
    fields = {f"metarm_{name}": getattr(settings, name) for name in METARM.names}
    assert METARM.settings(MetaRMConfig(**fields)) == settings


def test_each_role_declares_its_defaults_once():
    # The fields' defaults are the role's: JudgeServerSettings' own, except where the role overrides them.
    for role in ROLES:
        declared = {f.name: f for f in dataclasses.fields(role.fields())}
        assert list(declared) == [role.prefix + name for name in role.names]
        for name in role.names:
            f = declared[role.prefix + name]
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            assert default == role.default(name), (role.prefix, name)
            assert "{" not in f.metadata["help"], (role.prefix, name)  # placeholders filled in
    assert (METARM.default("temperature"), METARM.default("max_tokens")) == (0.4, 16384)  # R-Align authors'
    assert (TRAINING_JUDGE.default("temperature"), TRAINING_JUDGE.default("max_tokens")) == (0.0, 1024)
    assert (GENRM.default("max_tokens"), GENRM.default("max_concurrency")) == (4096, 32)
    assert RUBRIC_GENERATOR.default("temperature") is None  # the rubric template decides
    assert set(TRAINING_JUDGE.names) == set(SETTINGS)
    assert "seed" not in METARM.names and "templates" not in GENRM.names


def test_a_config_without_a_field_of_its_role_keeps_the_settings_default():
    # The MetaRM has no seed field (its prompt shows A and B as given): its settings keep seed 0.
    assert METARM.settings(MetaRMConfig()).seed == 0


def test_required_settings_are_required_flags():
    rubric_fields = RUBRIC_GENERATOR.fields()
    with pytest.raises(TypeError, match="base_urls"):
        rubric_fields(model="m")
    assert RUBRIC_GENERATOR.settings(rubric_fields(base_urls=["http://a/v1"], model="m")).max_concurrency == 32


def test_comma_separated_urls_are_split_into_the_config_field():
    config = MetaRMConfig(metarm_base_urls="http://a/v1,http://b/v1", metarm_model="m")
    assert config.metarm_base_urls == ["http://a/v1", "http://b/v1"]


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
        MetaRMConfig(**fields)


def test_a_judge_needs_urls_unless_the_embedded_judge_may_stand_in():
    with pytest.raises(ValueError, match="metarm_base_urls is empty"):
        build_judge(METARM.settings(MetaRMConfig()))
    from trl_rankreward.judging.embedding_judge import EmbeddingJudge

    judge = build_judge(JudgeServerSettings(seed=4), embedded_without_urls=True)
    assert isinstance(judge, EmbeddingJudge) and judge.seed == 4


def test_build_judge_passes_every_setting(models_server, tmp_path):
    # The stub server lists model "m" (tests.conftest.models_server).
    templates = tmp_path / "t.yaml"
    templates.write_text("meta: |\n  Custom. {QUERY} {RESPONSE_A} {RESPONSE_B} {GOLDEN_RATIONALE} {RATIONALE}\n")
    settings = JudgeServerSettings(base_urls=[models_server], model="m", max_concurrency=5, timeout_s=7.5,
                                   max_attempts=2, max_tokens=99, temperature=0.7, templates=str(templates),
                                   seed=3)  # fmt: skip
    judge = build_judge(settings)
    assert (judge.backend.base_urls, judge.backend.model) == ([models_server], "m")
    assert (judge.backend.max_concurrency, judge.backend.timeout_s, judge.retry.max_attempts) == (5, 7.5, 2)
    assert (judge.max_tokens, judge.temperature, judge.seed) == (99, 0.7, 3)
    assert judge.templates.meta.startswith("Custom.")
