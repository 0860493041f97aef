"""The pieces a user runs that tests cannot start here: docker-compose, the Makefile, CI."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_the_production_services():
    services = _compose()["services"]
    assert {"db", "redis", "web", "worker", "beat"} <= set(services)
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert services["redis"]["image"].startswith("redis:")
    assert services["web"]["command"][0] == "gunicorn"
    assert services["worker"]["command"][:4] == ["celery", "-A", "console", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "console", "beat"]


def test_compose_points_every_app_service_at_the_same_database_and_broker():
    services = _compose()["services"]
    for name in ("web", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://") and "@db:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert "SECRET_KEY" in env


def test_compose_builds_from_a_dockerfile_that_exists():
    assert (ROOT / "Dockerfile").exists()
    assert _compose()["services"]["web"]["build"] == "."


def test_ci_installs_chromium_and_calls_make_test():
    script = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install" in script and "chromium" in script
    assert "make test" in script


def test_the_makefile_has_the_two_commands():
    makefile = (ROOT / "Makefile").read_text()
    assert "\nrun:" in makefile and "\ntest:" in makefile and "\nbench:" in makefile


def test_compose_gives_the_app_services_the_app_role_and_only_migrate_the_owner():
    services = _compose()["services"]
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://console_app:")
        assert "DATABASE_OWNER_URL" not in env
        assert "consoledata:/data" in services[name]["volumes"]  # one signing key and checkpoint log
    migrate = services["migrate"]["environment"]
    assert migrate["DATABASE_URL"].startswith("postgresql://console_app:")
    assert migrate["DATABASE_OWNER_URL"].startswith("postgresql://console_owner:")
    assert "./docker/initdb:/docker-entrypoint-initdb.d:ro" in services["db"]["volumes"]
    assert (ROOT / "docker" / "initdb" / "10-console-roles.sh").stat().st_mode & 0o111


def test_compose_runs_workers_per_queue_that_scale_and_together_consume_every_queue():
    from console.core.queues import QUEUES

    services = _compose()["services"]
    consumed: list[str] = []
    for name, service in services.items():
        command = service.get("command") or []
        if command[:4] == ["celery", "-A", "console", "worker"]:
            assert "container_name" not in service and "ports" not in service, f"{name} could not be scaled"
            consumed += command[command.index("-Q") + 1].split(",")
            # as under `make run`: no gossip, mingle or event heartbeat while the console idles
            assert {"--without-gossip", "--without-mingle", "--without-heartbeat"} <= set(command), name
    assert sorted(consumed) == sorted(QUEUES)  # each queue has exactly one worker service
    shadow = services["worker-shadow"]["command"]
    assert shadow[shadow.index("-Q") + 1] == "shadow"
