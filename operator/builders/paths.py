"""Where things are inside the pods: the paths, user ids and variable names that the rendered
config files, the pod specs and the images must agree on (the Dockerfile and the middleware's
defaults name some of them too)."""

from __future__ import annotations

from memorystore.operator import names

# --- inside the memory-service pod ----------------------------------------------------------
CONFIG_DIR = "/etc/memorystore"
SERVICE_CONFIG_PATH = f"{CONFIG_DIR}/{names.SERVICE_CONFIG_FILE}"
DATA_DIR = "/data"
HISTORY_PATH = f"{DATA_DIR}/history.db"
# spec.vectorStore.embedded: the engine's files on the same volume as the history.
EMBEDDED_QDRANT_PATH = f"{DATA_DIR}/qdrant"
SERVICE_UID = 10001
# The service-key Secret, mounted read-only: kubelet updates the files in place on a
# rotation and the service re-reads them (no restart). Not under CONFIG_DIR: a volume
# mounted inside another volume's mount is fragile.
SERVICE_KEY_DIR = "/var/run/secrets/memorystore/service-key"
SERVICE_KEY_FILE = f"{SERVICE_KEY_DIR}/{names.CURRENT_SERVICE_KEY}"
PREVIOUS_SERVICE_KEY_FILE = f"{SERVICE_KEY_DIR}/{names.PREVIOUS_SERVICE_KEY}"
# The serving certificate (Secret <store>-tls: tls.crt, tls.key), mounted read-only. Kubelet
# updates it in place on renewal and the service reloads it (no restart, so it is not in the
# pod template's checksum).
TLS_DIR = "/var/run/secrets/memorystore/tls"
TLS_CERT_FILE = f"{TLS_DIR}/{names.TLS_CERT}"
TLS_KEY_FILE = f"{TLS_DIR}/{names.TLS_KEY}"
TLS_FILE_MODE = 0o440  # root:fsGroup, readable by the service's group only
# spec.backup.volume's claim (the service writes <BACKUP_DIR>/<backup name>/), and the claim
# of a backup being restored, read-only, in the restore init container.
BACKUP_DIR = "/backups"
RESTORE_DIR = "/restore"
# The backup-key Secret (<store>-backup-key: signing-key), mounted read-only in the service
# and in the restore init container: backups are signed with it, restores verify with it.
BACKUP_KEY_DIR = "/var/run/secrets/memorystore/backup-key"
BACKUP_SIGNING_KEY_FILE = f"{BACKUP_KEY_DIR}/{names.BACKUP_SIGNING_KEY}"
# Every other secret the service reads is one key of a Secret mounted as a file of its own
# (never an environment variable, which `kubectl describe`, crash dumps and child processes
# show), read-only, 0440 root:fsGroup, in a directory per purpose; the config file names
# the file (`{file: PATH}`). secret_files.py pairs each file with its Secret key.
SECRETS_DIR = "/var/run/secrets/memorystore"
SECRET_FILE_MODE = 0o440
QDRANT_KEY_FILE = f"{SECRETS_DIR}/qdrant-api-key/api-key"  # managed: <store>-keys
QDRANT_CA_FILE = f"{SECRETS_DIR}/qdrant-ca/ca.crt"  # managed: <store>-qdrant-tls's ca.crt
EMBEDDER_KEY_FILE = f"{SECRETS_DIR}/embedder-api-key/api-key"
LLM_KEY_FILE = f"{SECRETS_DIR}/llm-api-key/api-key"
# The PostgreSQL DSNs (spec.historyDb.postgres, spec.vectorStore.postgres.dsnSecretRef).
HISTORY_DSN_FILE = f"{SECRETS_DIR}/history-dsn/dsn"
VECTOR_DSN_FILE = f"{SECRETS_DIR}/vector-dsn/dsn"
# Size limits of the emptyDirs (what exceeds one evicts the pod, instead of filling the
# node's disk for every tenant on it). /tmp: HOME, SQLite's temporary files, uvicorn; the
# data emptyDir of a PostgreSQL store: mem0's directory, rebuilt at start-up.
TMP_SIZE_LIMIT = "512Mi"
DATA_EMPTY_DIR_SIZE_LIMIT = "1Gi"

# --- inside agent pods ----------------------------------------------------------------------
# Agents mount the client Secret here; client.yaml points at the key file. (Mount the client
# ConfigMap beside it, e.g. /etc/memorystore/client, not at a parent of this directory.)
CLIENT_SECRET_DIR = "/etc/memorystore/secrets"
CLIENT_KEY_FILE = f"{CLIENT_SECRET_DIR}/{names.CLIENT_API_KEY}"
# The client ConfigMap's mount (the middleware's default config path is client.yaml in it);
# its ca.crt is the CA the service's certificate chains to.
CLIENT_CONFIG_DIR = "/etc/memorystore/client"
CLIENT_CA_FILE = f"{CLIENT_CONFIG_DIR}/{names.CA_CERT}"

# --- inside Qdrant pods ---------------------------------------------------------------------
QDRANT_UID = 1000
QDRANT_STORAGE_DIR = "/qdrant/storage"
QDRANT_SNAPSHOTS_DIR = "/qdrant/snapshots"
QDRANT_INIT_DIR = "/qdrant/init"  # Qdrant writes an "initialized" marker at start
# The config file holding the API key (Secret <store>-qdrant-config), read with
# --config-path: Qdrant reads its settings from files or QDRANT__* variables, and a variable
# would put the key in the pod's spec.
QDRANT_CONFIG_DIR = f"{SECRETS_DIR}/qdrant-config"
QDRANT_TLS_DIR = f"{SECRETS_DIR}/qdrant-tls"  # in the Qdrant pod: <store>-qdrant-tls
QDRANT_CERT_TTL_SECONDS = 300  # how often Qdrant re-reads a renewed certificate
QDRANT_CONFIG_FILE = f"{QDRANT_CONFIG_DIR}/{names.QDRANT_CONFIG_FILE}"
QDRANT_INIT_SIZE_LIMIT = "16Mi"  # one marker file
QDRANT_TMP_SIZE_LIMIT = "256Mi"  # Qdrant's temporary files go to its storage, not /tmp
