"""infra/: compose file, Helm values, image and environment, checked without a container engine.

`docker compose config` is used when the compose CLI can run here; otherwise (no engine, no plugin)
the same properties are checked structurally: every `${VAR}` is listed in .env.example, images are
pinned, ports agree and are published on loopback only by default, every setting the code reads reaches
the services that run pipeline code, the Prefect auth string reaches the server and every client, the
Prefect server settings and those the exposing guide names are real, and nothing secret is committed.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

INFRA = REPO / "infra"
VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?][^}]*)?\}")
# services that import and run pipeline code (flows, Dask items) and the settings they must get
PIPELINE_SERVICES = ("prefect-worker", "dask-worker", "dask-worker-gpu")
REQUIRED_ENV = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "PAPERFLOWS_ROOT", "PAPERFLOWS_TASK_RUNNER",
                "PAPERFLOWS_DASK_ADDRESS", "PAPERFLOWS_GPU_LIMIT", "PAPERFLOWS_TORCH_THREADS")
# settings deliberately left at their defaults on a cluster, and why
NOT_SET_ON_A_CLUSTER = {
    "PAPERFLOWS_MLFLOW_ARTIFACTS": "used only with a local SQLite tracking store",
    "PAPERFLOWS_DASK_WORKERS": "sizes a LocalCluster; the compose stack has its own scheduler",
}
SECRET_NAME = re.compile(r"PASSWORD|SECRET|ACCESS_KEY|TOKEN|AUTH", re.I)
# the only services with published ports, and the variable of the host address each one listens on
PUBLISHED = {"prefect-server": "PAPERFLOWS_BIND_ADDRESS", "mlflow": "PAPERFLOWS_BIND_ADDRESS",
             "minio": "PAPERFLOWS_BIND_ADDRESS", "dask-scheduler": "DASK_SCHEDULER_BIND_ADDRESS"}
LOOPBACK = "127.0.0.1"
PREFECT_AUTH = "${PREFECT_API_AUTH_STRING:-}"
INTERPOLATION = re.compile(r"(?<!\$)\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def _compose() -> dict[str, Any]:
    return yaml.safe_load((INFRA / "compose.yaml").read_text())


def _env_example() -> dict[str, str]:
    pairs = {}
    for line in (INFRA / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            pairs[name.strip()] = value.strip()
    return pairs


def _settings_names() -> set[str]:
    """The PAPERFLOWS_* variables paperflows/settings.py and flows.py read."""
    text = (REPO / "paperflows/settings.py").read_text() + (REPO / "paperflows/flows.py").read_text()
    return set(re.findall(r"[\"'](PAPERFLOWS_[A-Z_]+)[\"']", text))


def _port(value: str) -> str:
    return str(value).rsplit(":", 1)[-1]


def _interpolate(text: str, env: dict[str, str]) -> str:
    """`text` with compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `${VAR:?}` resolved from `env`."""
    def value(match: re.Match[str]) -> str:
        name, operator, default = match.groups()
        if operator == ":-":
            return env.get(name) or default
        if operator == "-":
            return env.get(name, default)
        if (operator == ":?" and not env.get(name)) or (operator == "?" and name not in env):
            raise KeyError(f"${{{name}}} is required")
        return env.get(name, "")

    return INTERPOLATION.sub(value, text)


def _exposing_guide() -> str:
    text = (INFRA / "README.md").read_text()
    return text[text.index("## 5. Exposing the services"):]


# --------------------------------------------------------------------------------------------------
def test_compose_parses_and_every_reference_resolves() -> None:
    compose = _compose()
    services = compose["services"]
    assert {"postgres", "redis", "prefect-server", "prefect-services", "prefect-worker", "dask-scheduler",
            "dask-worker", "mlflow", "minio"} <= set(services)
    volumes = set(compose.get("volumes", {}))
    for name, service in services.items():
        for dep in service.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            assert source.startswith(("./", "${")) or source in volumes, f"{name}: volume {source} not declared"
    assert (INFRA / "postgres" / "create-databases.sh").is_file()


def test_every_compose_variable_is_listed_in_env_example_and_used() -> None:
    text = "\n".join(line for line in (INFRA / "compose.yaml").read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    used = set(VAR.findall(text))
    listed = _env_example()
    assert used - set(listed) == set(), f"not in .env.example: {sorted(used - set(listed))}"
    assert set(listed) - used == set(), f"listed but unused: {sorted(set(listed) - used)}"


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    """Only where the compose CLI runs (here it does not: no engine, no plugin)."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("the docker compose CLI is not available here; checked structurally instead")
    env = tmp_path / ".env"
    env.write_text("\n".join(f"{k}={v or 'x'}" for k, v in _env_example().items()) + "\n")
    result = subprocess.run([docker, "compose", "-f", str(INFRA / "compose.yaml"), "--env-file", str(env),
                             "config", "--quiet"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_published_port_listens_on_loopback_unless_configured_otherwise() -> None:
    services = _compose()["services"]
    assert {name for name, s in services.items() if s.get("ports")} == set(PUBLISHED)
    assert not [name for name, s in services.items() if s.get("network_mode") == "host"]
    example = _env_example()
    unset = {k: v for k, v in example.items() if k not in set(PUBLISHED.values())}
    for name, variable in PUBLISHED.items():
        for entry in services[name]["ports"]:
            assert isinstance(entry, str), f"{name}: {entry} (use the short HOST:PORT:CONTAINER syntax)"
            # the default (variable unset) and the documented value are loopback; the variable moves it
            for env in (unset, example):
                parts = _interpolate(entry, env).split(":")  # HOST:PORT:CONTAINER; PORT:CONTAINER is every interface
                assert len(parts) == 3 and parts[0] == LOOPBACK, f"{name}: {entry} listens on {':'.join(parts)}"
            moved = _interpolate(entry, {**example, variable: "10.0.0.5"})
            assert moved.startswith("10.0.0.5:"), f"{name}: {entry} ignores {variable}"


def test_postgres_and_redis_are_not_published_and_the_scheduler_has_its_own_address() -> None:
    services = _compose()["services"]
    for name in ("postgres", "redis"):
        assert not services[name].get("ports") and not services[name].get("network_mode"), name
    # exposing the UIs on every interface leaves the scheduler (which runs what clients submit) on loopback
    example = {**_env_example(), "PAPERFLOWS_BIND_ADDRESS": "0.0.0.0"}
    assert _interpolate(services["dask-scheduler"]["ports"][0], example).startswith(f"{LOOPBACK}:")
    assert _interpolate(services["mlflow"]["ports"][0], example).startswith("0.0.0.0:")


def test_prefect_auth_string_reaches_the_server_and_every_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings.models.root import Settings

    services = _compose()["services"]
    assert _env_example()["PREFECT_API_AUTH_STRING"] == ""
    for name in ("prefect-server", "prefect-services"):
        assert services[name]["environment"]["PREFECT_SERVER_API_AUTH_STRING"] == PREFECT_AUTH, name
    clients = {name for name, s in services.items() if "PREFECT_API_URL" in s.get("environment", {})}
    assert {"prefect-init", *PIPELINE_SERVICES} <= clients
    for name in clients:
        assert services[name]["environment"]["PREFECT_API_AUTH_STRING"] == PREFECT_AUTH, name
    for name in PIPELINE_SERVICES:
        env = services[name]["environment"]
        assert env["MLFLOW_TRACKING_USERNAME"] == "${MLFLOW_TRACKING_USERNAME:-}", name
        assert env["MLFLOW_TRACKING_PASSWORD"] == "${MLFLOW_TRACKING_PASSWORD:-}", name
    # both names are Prefect's own (a misspelt one is silently ignored)
    monkeypatch.setenv("PREFECT_SERVER_API_AUTH_STRING", "admin:server")
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "admin:client")
    loaded = Settings()
    assert loaded.server.api.auth_string.get_secret_value() == "admin:server"
    assert loaded.api.auth_string.get_secret_value() == "admin:client"


@pytest.mark.parametrize("value", ["", "admin:s3cret"])
def test_server_commands_drop_an_empty_auth_string_and_keep_a_set_one(value: str) -> None:
    """Prefect requires an (empty) credential when the server setting is set but empty: it must be unset."""
    services = _compose()["services"]
    for name in ("prefect-server", "prefect-services"):
        command = services[name]["command"]
        start = command.index("prefect")
        assert command[start:start + 2] == ["prefect", "server"] and command[0] == "sh", command
        wrapper = [part.replace("$$", "$") for part in command[:start]]  # compose's escape of `$`
        env = {"PATH": os.environ["PATH"], "PREFECT_SERVER_API_AUTH_STRING": value}
        seen = subprocess.run([*wrapper, "env"], env=env, capture_output=True, text=True, check=True).stdout
        names = dict(line.split("=", 1) for line in seen.splitlines() if "=" in line)
        if value:
            assert names["PREFECT_SERVER_API_AUTH_STRING"] == value, name
        else:
            assert "PREFECT_SERVER_API_AUTH_STRING" not in names, name


def test_the_exposing_guide_names_real_settings_and_options() -> None:
    import dask.config
    import mlflow.environment_variables
    import prefect.settings
    from distributed.cli import dask_scheduler, dask_worker

    guide = _exposing_guide()
    compose_names = set(_env_example())
    for name in set(re.findall(r"\bPREFECT_[A-Z_]+\b", guide)):
        assert hasattr(prefect.settings, name), f"{name} is no Prefect setting"
    for name in set(re.findall(r"\bMLFLOW_[A-Z_]+\b", guide)) - compose_names:
        assert hasattr(mlflow.environment_variables, name), f"{name} is no MLflow environment variable"
    for name in set(re.findall(r"\bDASK_DISTRIBUTED__[A-Z_]+\b", guide)):
        key = name.removeprefix("DASK_").lower().replace("__", ".").replace("_", "-")
        dask.config.get(key)  # KeyError for a key Dask does not know
    stack = (REPO / "scripts/stack.sh").read_text()
    for name in set(re.findall(r"\bPAPERFLOWS_[A-Z_]+\b", guide)):
        assert name in compose_names or name in _settings_names() or f"${{{name}:-" in stack, name
    assert "--app-name basic-auth" in guide
    assert "basic-auth" in {e.name for e in importlib.metadata.entry_points(group="mlflow.app")}
    ini = (Path(mlflow.environment_variables.__file__).parent / "server/auth/basic_auth.ini").read_text()
    assert all(re.search(rf"^{key} =", ini, re.M) for key in ("database_uri", "admin_username", "default_permission"))
    options = {o for cli in (dask_scheduler.main, dask_worker.main) for p in cli.params for o in p.opts}
    for option in re.findall(r"(--(?:tls|protocol|listen|contact)[a-z-]*)", guide):
        assert option in options, option


def test_images_are_pinned_by_tag() -> None:
    import prefect

    images = {name: s["image"] for name, s in _compose()["services"].items() if "image" in s}
    for name, image in images.items():
        if image.startswith("${"):
            image = _env_example()[VAR.match(image).group(1)]
        repo, _, tag = image.rpartition(":")
        assert repo and tag and "latest" not in tag and re.search(r"\d+\.\d+", tag.replace("-", ".")), \
            f"{name}: image {image} is not pinned to a version tag"
    # the Prefect server speaks the client's version
    assert images["prefect-server"] == f"prefecthq/prefect:{prefect.__version__}-python3.11"
    server = yaml.safe_load((INFRA / "helm/prefect-server-values.yaml").read_text())
    worker = yaml.safe_load((INFRA / "helm/prefect-worker-values.yaml").read_text())
    assert server["global"]["prefect"]["image"]["prefectTag"] == f"{prefect.__version__}-python3.11"
    assert worker["worker"]["image"]["prefectTag"] == f"{prefect.__version__}-python3.11-kubernetes"


def test_ports_agree_between_services_commands_and_urls() -> None:
    services = _compose()["services"]
    env = services["prefect-worker"]["environment"]
    server = services["prefect-server"]
    assert server["ports"][0].endswith(":4200") and server["command"][server["command"].index("--port") + 1] == "4200"
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api" and "4200/api/health" in server["healthcheck"]["test"][-1]
    mlflow = services["mlflow"]
    assert mlflow["ports"][0].endswith(":5000") and mlflow["command"][mlflow["command"].index("--port") + 1] == "5000"
    assert env["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    scheduler = services["dask-scheduler"]
    assert scheduler["ports"][0].endswith(":8786") and "8786" in scheduler["command"]
    assert env["PAPERFLOWS_DASK_ADDRESS"] == "tcp://dask-scheduler:8786"
    for name in ("dask-worker", "dask-worker-gpu"):
        assert services[name]["command"][2] == env["PAPERFLOWS_DASK_ADDRESS"]
        assert services[name]["command"][services[name]["command"].index("--nthreads") + 1] == "1"
    assert services["minio"]["ports"][0].endswith(":9000") and _port(_env_example()["S3_ENDPOINT_URL"]) == "9000"
    worker = yaml.safe_load((INFRA / "helm/prefect-worker-values.yaml").read_text())
    helm_server = yaml.safe_load((INFRA / "helm/prefect-server-values.yaml").read_text())
    api_url = worker["worker"]["selfHostedServerApiConfig"]["apiUrl"]
    assert re.fullmatch(r"http://prefect-server\.[a-z-]+\.svc\.cluster\.local:(\d+)/api", api_url)
    assert api_url.split(":")[-1].split("/")[0] == str(helm_server["service"]["port"])


def test_pipeline_services_get_every_setting_the_code_reads() -> None:
    services = _compose()["services"]
    read = _settings_names()
    assert {"PAPERFLOWS_TASK_RUNNER", "PAPERFLOWS_DASK_ADDRESS", "PAPERFLOWS_GPU_LIMIT"} <= read
    for name in PIPELINE_SERVICES:
        env = services[name]["environment"]
        missing = [k for k in REQUIRED_ENV if not env.get(k)]
        assert not missing, f"{name} lacks {missing}"
        forgotten = read - set(env) - set(NOT_SET_ON_A_CLUSTER)
        assert not forgotten, f"{name}: settings read by the code but not set here: {sorted(forgotten)}"
    worker_env = services["prefect-worker"]["environment"]
    # the DVC remote (infra/dvc-remote.sh) and the S3 credentials DVC reads at push/pull time
    script = (INFRA / "dvc-remote.sh").read_text()
    for name in ("PAPERFLOWS_DVC_REMOTE_URL", "PAPERFLOWS_DVC_S3_ENDPOINT"):
        assert name in script and worker_env[name]
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(worker_env)
    # MLflow stores artifacts in the S3-compatible store
    mlflow_env = services["mlflow"]["environment"]
    assert {"MLFLOW_S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(mlflow_env)
    command = " ".join(services["mlflow"]["command"])
    assert "--backend-store-uri postgresql+psycopg2://" in command and "--artifacts-destination s3://" in command
    assert "--allowed-hosts" in command
    # the one-shot init creates the pool the worker polls and the GPU limit the flows look up
    init = services["prefect-init"]
    assert "gcl create" in init["command"][-1] and init["environment"]["PREFECT_API_URL"] == worker_env["PREFECT_API_URL"]
    assert services["prefect-worker"]["command"][services["prefect-worker"]["command"].index("--pool") + 1] \
        == init["environment"]["PAPERFLOWS_WORK_POOL"]


def test_prefect_server_settings_are_real_prefect_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelt PREFECT_* name is silently ignored by Prefect; load them into Prefect's own model."""
    from prefect.settings.models.root import Settings

    env = dict(_compose()["services"]["prefect-services"]["environment"])
    env = {k: VAR.sub("x", v) for k, v in env.items()}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    loaded = Settings()
    assert loaded.server.database.connection_url.get_secret_value() == env["PREFECT_SERVER_DATABASE_CONNECTION_URL"]
    assert loaded.server.database.connection_url.get_secret_value().startswith("postgresql+asyncpg://")
    assert loaded.server.events.messaging_broker == env["PREFECT_MESSAGING_BROKER"] == "prefect_redis.messaging"
    assert loaded.server.events.causal_ordering == "prefect_redis.ordering"
    assert loaded.server.concurrency.lease_storage == "prefect_redis.lease_storage"
    assert loaded.server.docket.url == env["PREFECT_SERVER_DOCKET_URL"]
    assert loaded.server.database.migrate_on_start is False
    assert loaded.server.analytics_enabled is False
    assert loaded.server.api.auth_string.get_secret_value() == env["PREFECT_SERVER_API_AUTH_STRING"]


def test_helm_values_put_training_on_gpu_nodes_with_the_settings() -> None:
    worker = yaml.safe_load((INFRA / "helm/prefect-worker-values.yaml").read_text())["worker"]
    assert worker["apiConfig"] == "selfHostedServer" and worker["config"]["type"] == "kubernetes"
    template = json.loads(worker["config"]["baseJobTemplate"]["configuration"])
    assert set(template) == {"variables", "job_configuration"}
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "{{ gpu_node_label }}"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "{{ gpus }}"
    assert {"secretRef": {"name": "paperflows-secrets"}} in container["envFrom"]
    assert container["volumeMounts"][0]["mountPath"] == "/srv/paperflows"
    # every {{ placeholder }} of the job is a declared variable
    variables = template["variables"]["properties"]
    placeholders = set(re.findall(r"\{\{ (\w+) \}\}", json.dumps(template["job_configuration"])))
    assert placeholders <= set(variables), placeholders - set(variables)
    env = variables["env"]["default"]
    assert env["PAPERFLOWS_ROOT"] == "/srv/paperflows" and env["MLFLOW_TRACKING_URI"].startswith("http://")
    assert {"PAPERFLOWS_TASK_RUNNER", "PAPERFLOWS_GPU_LIMIT", "PAPERFLOWS_TORCH_THREADS",
            "PAPERFLOWS_DVC_REMOTE_URL", "PAPERFLOWS_DVC_S3_ENDPOINT"} <= set(env)
    assert not SECRET_NAME.search(" ".join(env)), "credentials belong in the paperflows-secrets Secret"
    server = yaml.safe_load((INFRA / "helm/prefect-server-values.yaml").read_text())
    assert server["postgresql"]["auth"]["password"] == "" and server["postgresql"]["auth"]["existingSecret"]
    assert server["redis"]["auth"]["existingSecret"] and server["backgroundServices"]["runAsSeparateDeployment"]
    assert server["backgroundServices"]["messaging"]["broker"] == "prefect_redis.messaging"
    assert server["server"]["livenessProbe"]["enabled"] and server["server"]["readinessProbe"]["enabled"]


def test_no_secret_is_committed() -> None:
    example = _env_example()
    secrets = {k: v for k, v in example.items() if SECRET_NAME.search(k)}
    assert secrets and all(v == "" for v in secrets.values()), secrets
    assert "/.env" in (INFRA / ".gitignore").read_text().split()
    key_value = re.compile(r"^\s*-?\s*[\"']?([\w.-]*(?:password|secret|access_key|token)[\w.-]*)[\"']?\s*[:=]\s*(.*)$",
                           re.I)
    in_url = re.compile(r"://[^/\s:@]+:([^@\s]+)@")
    reference = re.compile(r"^(\$\{[^}]+\}|\$\([A-Z_]+\)|\$\$\w+|\"\"|''|)$")
    for path in [INFRA / "compose.yaml", *sorted((INFRA / "helm").glob("*.yaml")), INFRA / "Dockerfile"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            found = key_value.match(line)
            names_a_secret = found and re.search(r"(?i)^existingsecret|key$|name$|ref$", found.group(1))
            values = [found.group(2).strip()] if found and not names_a_secret and \
                not found.group(2).strip().startswith(("{", "[")) else []
            values += in_url.findall(re.sub(r"\$\{[^}]+\}", "${REF}", line))  # user:password@ in URLs
            for value in values:
                # a value is fine when it refers to a secret (env interpolation, k8s $(VAR)) or is empty
                assert reference.match(value.strip("\"'")) or reference.match(value), \
                    f"{path.name}:{number}: looks like a committed secret: {line.strip()}"


def test_dockerfile_installs_torch_first_pinned_and_data_packages_without_deps() -> None:
    text = (INFRA / "Dockerfile").read_text()
    pinned = re.search(r'"torch==2\.13\.0"|torch==\$\{TORCH_VERSION\}', text)
    assert pinned and "ARG TORCH_VERSION=2.13.0" in text
    assert '"torch==2.13.0"' in (REPO / "pyproject.toml").read_text()
    order = [text.index(s) for s in ("torch==${TORCH_VERSION}", "-c constraints.txt .",
                                     "--no-deps -r requirements-nodeps.txt")]
    assert order == sorted(order)
    assert re.search(r"^FROM python:3\.11\.\d+-slim", text, re.M)
    ignore = (INFRA / "Dockerfile.dockerignore").read_text().split()
    assert {"!pipelines/", "!components/", "!pyproject.toml", "!constraints.txt", "!requirements-nodeps.txt"} <= set(ignore)
