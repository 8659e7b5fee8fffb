{{/*
Names.
*/}}
{{- define "memorystore.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memorystore.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "memorystore.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memorystore.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memorystore.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the ServiceAccount to run as (and bind the RBAC to) when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Which namespaces the operator watches, as JSON: [] when cluster-wide (watch.clusterWide, an
explicit opt-in), else watch.namespaces, else the release's own namespace. The default
install is namespaced: its Role reaches no other namespace.
*/}}
{{- define "memorystore.watchedNamespaces" -}}
{{- if .Values.watch.clusterWide }}
{{- if .Values.watch.namespaces }}
{{- fail "watch.clusterWide and watch.namespaces exclude each other: cluster-wide watches every namespace, so leave watch.namespaces empty (or set watch.clusterWide=false to watch only those)" }}
{{- end }}
{{- list | toJson }}
{{- else }}
{{- default (list .Release.Namespace) .Values.watch.namespaces | toJson }}
{{- end }}
{{- end }}

{{- define "memorystore.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Labels. The operator's pods are told apart from a MemoryStore's children (which carry
app.kubernetes.io/name=memorystore, instance=<store> and component=qdrant|memory-service|
client|keys) by component=operator.
*/}}
{{- define "memorystore.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memorystore.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "memorystore.labels" -}}
helm.sh/chart: {{ include "memorystore.chart" . }}
{{ include "memorystore.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: memorystore
{{- end }}

{{/*
RBAC: exactly the API calls the operator makes, and nothing else.
tests/unit/charts/test_chart.py keeps the same rules as a literal, each with where it comes from.

In every watched namespace (a Role per namespace, or the ClusterRole when cluster-wide):
- memorystores list, watch: kopf's watch of the handled resource (handlers.on_change) and
  the resync loop's client.list (resync.resync).
- memorystores patch: kopf keeps its progress and diff-base annotations on the object;
  storage_version.migrate rewrites each one under the storage version (an empty patch).
- memorystores/status patch: kopf writes the status the handler returns; the resync loop
  merge-patches it (reconcile.Reconciler._reconcile_live).
- memorystores/finalizers update: children carry an owner reference with
  blockOwnerDeletion: true (builders.owner_reference); where the
  OwnerReferencesPermissionEnforcement admission plugin is on, that needs update on the
  owner's finalizers subresource. The operator itself never sets a finalizer. (That plugin
  also wants delete on an existing object whose ownerReferences change: only a
  deletionPolicy change does that, to the keys Secret and the data claim. delete is not
  granted, so there such a change is refused until the operator's Role allows it.)
- events create: reconcile._event on a phase change, and kopf's own warning events.
- secrets get, create, patch: apply.ensure_keys reads or creates <store>-keys and patches
  its ownerReferences; apply.ensure_service_key reads <store>-service-key (and, if it was
  lost, <store>-client), creates it and merge-patches it on a key rotation or expiry;
  apply.missing_secrets reads the Secrets a spec names; the client Secret is server-side
  applied.
- configmaps, services, networkpolicies create, patch; persistentvolumeclaims
  list, create, patch; deployments, statefulsets get, create, patch: every child is
  server-side applied (apply.apply_all: an apply PATCH, which needs create as well when the
  object does not exist yet); apply.pending_claims lists the store's claims;
  apply.get_workload reads the two workloads for status.
- secrets (again): apply.ensure_tls reads <store>-ca and <store>-tls, creates them and
  patches them on renewal.
- memorystorebackups get, list, watch, create, patch, delete: kopf watches them and keeps
  its annotations on them (handlers.on_backup); backups.get_backup reads a restore's source;
  backups.keep_schedule lists a store's scheduled backups, creates the one due and deletes
  those past spec.backup.retention. memorystorebackups/status patch: backups._set_status.
- persistentvolumeclaims get: backups.claim_exists (the backup target of spec.backup.volume).
- pods list: backups.service_pods, whose restore init container backup_plan.restore_failure reads.
- certificates.cert-manager.io get, create, patch, delete: with spec.tls.issuerRef,
  apply.ensure_tls server-side applies the store's Certificate; once issuerRef is removed it
  reads that Certificate and deletes it if the store owns it, so cert-manager stops
  rewriting the Secret the operator then issues. Granted whether or not cert-manager is
  installed (RBAC may name resources that do not exist).
Cluster-scoped, in both modes:
- customresourcedefinitions list, watch: kopf's resource observer re-discovers the
  MemoryStore resource when its CRD appears or changes (e.g. the CRD this chart installs
  becomes Established only after the operator has started).
- customresourcedefinitions get, only our two by name: storage_version.migrate reads which
  version each CRD stores and which versions its status says may still be stored.
Cluster-scoped, only when watching every namespace:
- customresourcedefinitions/status patch, only our two by name: storage_version.migrate
  sets storedVersions to the storage version once it has rewritten every object (only an
  operator watching every namespace has seen them all).
Cluster-scoped, only when watching a list of namespaces:
- namespaces list, watch: kopf's namespace observer. Without it kopf logs an error and
  retries with backoff for about a minute and a half before it falls back to the names it
  was given, and serves no MemoryStore event meanwhile.
*/}}
{{- define "memorystore.namespacedRules" -}}
- apiGroups: ["memorystore.dev"]
  resources: ["memorystores"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["memorystore.dev"]
  resources: ["memorystores/status"]
  verbs: ["patch"]
- apiGroups: ["memorystore.dev"]
  resources: ["memorystores/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps", "services"]
  verbs: ["watch", "create", "patch"]
- apiGroups: ["memorystore.dev"]
  resources: ["memorystorebackups"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["memorystore.dev"]
  resources: ["memorystorebackups/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets"]
  verbs: ["get", "watch", "create", "patch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["watch", "create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["watch", "create", "patch"]
- apiGroups: ["cert-manager.io"]
  resources: ["certificates"]
  verbs: ["get", "create", "patch", "delete"]
{{- if .Values.monitoring.podMonitors.enabled }}
- apiGroups: ["monitoring.coreos.com"]
  resources: ["podmonitors"]
  verbs: ["get", "create", "patch"]
{{- end }}
{{- end }}

{{- define "memorystore.clusterRules" -}}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["memorystores.memorystore.dev", "memorystorebackups.memorystore.dev"]
  verbs: ["get"]
{{- if .Values.watch.clusterWide }}
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions/status"]
  resourceNames: ["memorystores.memorystore.dev", "memorystorebackups.memorystore.dev"]
  verbs: ["patch"]
{{- end }}
{{- end }}

{{- define "memorystore.namespaceObserverRules" -}}
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["list", "watch"]
{{- end }}
