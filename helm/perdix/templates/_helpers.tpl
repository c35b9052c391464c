{{/* Names and labels. */}}
{{- define "perdix.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "perdix.fullname" -}}
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

{{/* Component names are capped so a suffix still fits the 63-character limit. */}}
{{- define "perdix.jobmanagerName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-jobmanager{{- end }}
{{- define "perdix.taskmanagerName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-taskmanager{{- end }}
{{- define "perdix.configName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-config{{- end }}
{{- define "perdix.flinkConfName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-flink-conf{{- end }}
{{- define "perdix.metricsServiceName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-metrics{{- end }}
{{- /* In a namespace shared by several releases' dashboards the name carries the release's namespace too. */}}
{{- define "perdix.dashboardName" -}}
{{- $name := include "perdix.fullname" . -}}
{{- if and .Values.grafanaDashboard.namespace (ne .Values.grafanaDashboard.namespace .Release.Namespace) -}}
{{- $name = printf "%s-%s" .Release.Namespace $name -}}
{{- end -}}
{{ $name | trunc 50 | trimSuffix "-" }}-dashboard
{{- end }}

{{- define "perdix.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "perdix.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component (perdix, jobmanager, taskmanager); call with (list $ "component"). */}}
{{- define "perdix.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "perdix.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Labels that tell the metrics Service from the release's other Services (the ServiceMonitor selects by them). */}}
{{- define "perdix.metricsServiceLabels" -}}
app.kubernetes.io/name: {{ include "perdix.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: perdix
{{- end }}

{{- define "perdix.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "perdix.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "perdix.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The one object Perdix scales, as YAML (kind, name, namespace, restUrl), with the mode's defaults filled
in. RBAC, the knowledge ConfigMap and the agent's settings all read it from here, so they cannot disagree.
*/}}
{{- define "perdix.scaleTarget" -}}
{{- $t := .Values.perdix.scaleTarget -}}
{{- $namespace := default .Release.Namespace $t.namespace -}}
{{- if eq .Values.mode "application" -}}
kind: {{ default "deployment" $t.kind }}
name: {{ default (include "perdix.taskmanagerName" .) $t.name }}
namespace: {{ $namespace }}
restUrl: {{ default "http://127.0.0.1:8081" $t.restUrl }}
{{- else if eq .Values.mode "flinkDeployment" -}}
kind: {{ default "flinkdeployment" $t.kind }}
name: {{ $t.name | quote }}
namespace: {{ $namespace }}
{{- /* The Flink Kubernetes Operator's REST Service of a FlinkDeployment is <name>-rest, port 8081. */}}
restUrl: {{ default (printf "http://%s-rest.%s.svc:8081" $t.name $namespace) $t.restUrl }}
{{- else if eq .Values.mode "taskManagers" -}}
kind: {{ $t.kind | quote }}
name: {{ $t.name | quote }}
namespace: {{ $namespace }}
restUrl: {{ default "http://127.0.0.1:8081" $t.restUrl }}
{{- else -}}
kind: {{ default "flink-rest" $t.kind }}
name: {{ $t.name | quote }}
namespace: {{ $namespace }}
restUrl: {{ $t.restUrl | quote }}
{{- end }}
{{- end }}

{{/* Whether the agent talks to the Kubernetes API at all (a scale target there, or the knowledge ConfigMap). */}}
{{- define "perdix.usesKubernetes" -}}
{{- if or (ne .Values.mode "rest") (eq .Values.perdix.knowledge.store "configmap") }}true{{ end }}
{{- end }}

{{- define "perdix.knowledgeConfigMap" -}}
{{- default (printf "%s-knowledge" (include "perdix.fullname" . | trunc 50 | trimSuffix "-")) .Values.perdix.knowledge.configmap }}
{{- end }}

{{/*
Checks that values.schema.json cannot express: relations between keys, where a schema's if/then would
only say "does not match" without saying why. Each message names the keys. Included by every template
that depends on them, so `helm template` and `helm install` fail (`helm lint` reports them as INFO).
*/}}
{{- define "perdix.validate" -}}
{{- $p := .Values.perdix -}}
{{- $mode := .Values.mode -}}
{{- $t := include "perdix.scaleTarget" . | fromYaml -}}
{{- $kind := $p.scaleTarget.kind -}}
{{- if gt (int $p.minParallelism) (int $p.maxParallelism) }}
{{- fail (printf "perdix.minParallelism (%d) must not exceed perdix.maxParallelism (%d)" (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- if and (not (kindIs "invalid" $p.staticParallelism)) (or (lt (int $p.staticParallelism) (int $p.minParallelism)) (gt (int $p.staticParallelism) (int $p.maxParallelism))) }}
{{- fail (printf "perdix.staticParallelism (%d) must lie within perdix.minParallelism..perdix.maxParallelism (%d..%d)" (int $p.staticParallelism) (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- /* The scale target's kind follows from the mode; a kind of another mode is a mistake worth naming. */}}
{{- $kinds := dict "application" (list "" "deployment") "flinkDeployment" (list "" "flinkdeployment") "taskManagers" (list "deployment" "statefulset") "rest" (list "" "flink-rest") }}
{{- if not (has $kind (index $kinds $mode)) }}
{{- if eq $mode "taskManagers" }}
{{- fail (printf "perdix.scaleTarget.kind (%s) must be deployment or statefulset in mode taskManagers: the workload that runs your reactive-mode TaskManagers" (default "empty" $kind)) }}
{{- end }}
{{- $hint := dict "deployment" "taskManagers (a TaskManager Deployment you run) or application (the chart's own)" "statefulset" "taskManagers" "flinkdeployment" "flinkDeployment" "flink-rest" "rest" }}
{{- fail (printf "perdix.scaleTarget.kind (%s) does not go with mode %s: leave it empty, or set mode %s" $kind $mode (index $hint $kind)) }}
{{- end }}
{{- if and (has $p.policy (list "daedalus-per-operator" "justin" "qescalor")) (not (has $t.kind (list "flink-rest" "flinkdeployment"))) }}
{{- fail (printf "perdix.policy (%s) sets the parallelism of each job vertex: it needs mode rest or flinkDeployment (perdix.scaleTarget.kind flink-rest or flinkdeployment), not %s" $p.policy $t.kind) }}
{{- end }}
{{- if and (or (eq $p.policy "hpa") (eq $p.utilization "cpu")) (eq $p.prometheus.workerLabel "subtask_index") }}
{{- fail "perdix.prometheus.workerLabel (subtask_index): perdix.policy hpa and perdix.utilization cpu read CPU per TaskManager: set it to pod (or tm_id), with one slot per TaskManager" }}
{{- end }}
{{- range $pair := list (list "heapUsageThreshold" "heapUsage") (list "gcPressureThreshold" "gcTime") }}
{{- if and (not (kindIs "invalid" (index $p.safeguards.memory (first $pair)))) (not (index $p.prometheus.queries (last $pair))) }}
{{- fail (printf "perdix.prometheus.queries.%s: perdix.safeguards.memory.%s reads it: set it (Flink's reporter: docs/safeguards.md)" (last $pair) (first $pair)) }}
{{- end }}
{{- end }}
{{- range $key := list "flinkJob" "sourceOperator" }}
{{- $pattern := toString (index $p.prometheus $key) }}
{{- if contains "\"" $pattern }}
{{- fail (printf "perdix.prometheus.%s: a double quote cannot stand in the PromQL string this regular expression is put in" $key) }}
{{- else if not (regexMatch `^([^\\]|\\[abfnrtv\\'"xuU0-7])*$` $pattern) }}
{{- fail (printf "perdix.prometheus.%s: a backslash must start an escape of the PromQL string this regular expression is put in (a regular expression's \\. is written \\\\.)" $key) }}
{{- end }}
{{- end }}
{{- if eq $p.policy "keda-lag" }}
{{- range $key := list "partitionEndOffsets" "partitionCommittedOffsets" }}
{{- if not (index $p.prometheus.queries $key) }}
{{- fail (printf "perdix.prometheus.queries.%s: perdix.policy keda-lag reads the lag of each Kafka partition from its log-end and committed offsets: set partitionEndOffsets and partitionCommittedOffsets (kafka_exporter's series, see values.yaml)" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq $mode "application" }}
{{- $a := .Values.application }}
{{- if ne $t.name (include "perdix.taskmanagerName" .) }}
{{- fail (printf "perdix.scaleTarget.name (%s) must be empty or %s in mode application: Perdix scales the chart's TaskManager Deployment (for a workload of yours use mode taskManagers)" $t.name (include "perdix.taskmanagerName" .)) }}
{{- end }}
{{- if ne $t.namespace .Release.Namespace }}
{{- fail (printf "perdix.scaleTarget.namespace (%s) must be empty or the release namespace (%s) in mode application" $t.namespace .Release.Namespace) }}
{{- end }}
{{- if not $a.image.repository }}
{{- fail "application.image.repository is required in mode application: the Flink image that holds your job (examples/application.yaml runs the trace-source example, built by jobs/trace-source/Dockerfile; docs/deployment.md); for a cluster you already run pick mode flinkDeployment, taskManagers or rest" }}
{{- end }}
{{- if not $a.image.tag }}
{{- fail "application.image.tag is required in mode application: the tag of the Flink image that holds your job" }}
{{- end }}
{{- if not $a.job.className }}
{{- fail "application.job.className is required in mode application: the entry class of the Flink job" }}
{{- end }}
{{- if eq (int $a.prometheusReporterPort) (int $p.telemetry.metricsPort) }}
{{- fail (printf "application.prometheusReporterPort (%d) must differ from perdix.telemetry.metricsPort: both listen in the JobManager pod" (int $a.prometheusReporterPort)) }}
{{- end }}
{{- $replicas := int $a.taskManager.replicas }}
{{- if or (lt $replicas (int $p.minParallelism)) (gt $replicas (int $p.maxParallelism)) }}
{{- fail (printf "application.taskManager.replicas (%d) must lie within perdix.minParallelism..perdix.maxParallelism (%d..%d)" $replicas (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- else if eq $mode "flinkDeployment" }}
{{- if not $t.name }}
{{- fail "perdix.scaleTarget.name is required in mode flinkDeployment: the FlinkDeployment Perdix scales" }}
{{- end }}
{{- else if eq $mode "taskManagers" }}
{{- if not $t.name }}
{{- fail (printf "perdix.scaleTarget.name is required in mode taskManagers: the %s that runs your TaskManagers" (index (dict "deployment" "Deployment" "statefulset" "StatefulSet") $t.kind)) }}
{{- end }}
{{- else }}
{{- if not $t.restUrl }}
{{- fail "perdix.scaleTarget.restUrl is required in mode rest: the Flink JobManager's REST endpoint as seen from Perdix's pod, e.g. http://orders-jobmanager.streaming.svc:8081" }}
{{- end }}
{{- if regexMatch "^https?://(127\\.[0-9.]+|localhost|\\[::1\\])([:/]|$)" $t.restUrl }}
{{- fail (printf "perdix.scaleTarget.restUrl (%s) is Perdix's own pod in mode rest: point it at the JobManager's REST Service" $t.restUrl) }}
{{- end }}
{{- end }}
{{- if and .Values.serviceMonitor.enabled (not .Values.metricsService.enabled) }}
{{- fail "serviceMonitor.enabled needs metricsService.enabled: the ServiceMonitor scrapes Perdix through that Service" }}
{{- end }}
{{- if and .Values.podMonitor.enabled .Values.serviceMonitor.enabled (ne $mode "application") }}
{{- fail "podMonitor.enabled: with serviceMonitor.enabled the PodMonitor has nothing left to scrape outside mode application (Perdix is scraped through its Service): enable one of them" }}
{{- end }}
{{- end }}

{{/*
A values tree with its keys spelled as the agent's settings: camelCase to snake_case, a trailing
`Seconds` to `_s`. Returns {"v": tree} as YAML (a template can only return text).
*/}}
{{- define "perdix.settingsKeys" -}}
{{- if kindIs "map" . -}}
{{- $out := dict -}}
{{- range $key, $value := . -}}
{{- $_ := set $out (regexReplaceAll "_seconds$" (snakecase $key) "_s") (include "perdix.settingsKeys" $value | fromYaml).v -}}
{{- end -}}
{{- toYaml (dict "v" $out) -}}
{{- else if kindIs "slice" . -}}
{{- $out := list -}}
{{- range . }}{{ $out = append $out (include "perdix.settingsKeys" . | fromYaml).v }}{{ end -}}
{{- toYaml (dict "v" $out) -}}
{{- else -}}
{{- toYaml (dict "v" .) -}}
{{- end -}}
{{- end }}

{{/*
The agent's settings file: the `perdix:` values key for key (the simulator section is left to its
defaults: it only drives `perdix simulate`), with what the chart decides filled in: the scale target
of the mode and the knowledge ConfigMap's name. tests/helm loads it through agent.settings.load_settings.
*/}}
{{- define "perdix.settings" -}}
{{- $settings := (include "perdix.settingsKeys" .Values.perdix | fromYaml).v -}}
{{- $t := include "perdix.scaleTarget" . | fromYaml -}}
{{- $_ := set $settings.scale_target "kind" $t.kind -}}
{{- $_ := set $settings.scale_target "name" $t.name -}}
{{- $_ := set $settings.scale_target "namespace" $t.namespace -}}
{{- $_ := set $settings.scale_target "rest_url" $t.restUrl -}}
{{- $_ := set $settings.knowledge "configmap" (include "perdix.knowledgeConfigMap" .) -}}
{{- if kindIs "invalid" $settings.loop_interval_s }}{{- $_ := unset $settings "loop_interval_s" -}}{{- end -}}
{{- toYaml $settings }}
{{- end }}

{{/* Pod-level security shared by every pod of the chart. */}}
{{- define "perdix.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container-level security; call with the numeric user id the image runs as. */}}
{{- define "perdix.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ . }}
runAsGroup: {{ . }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
{{- end }}

{{/*
The Perdix container, the same in every mode. The ServiceAccount token is mounted into this
container only (the pod sets automountServiceAccountToken: false), so the Flink containers sharing
the JobManager pod never hold Perdix's permissions.
*/}}
{{- define "perdix.container" -}}
{{- $p := .Values.perdix -}}
- name: perdix
  image: {{ include "perdix.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["run", "--config", "/etc/perdix/perdix.yaml"]
  env:
    - name: HOME
      value: /tmp
    - name: PYTHONDONTWRITEBYTECODE
      value: "1"
    - name: PYTHONUNBUFFERED
      value: "1"
  ports:
    - name: perdix-metrics
      containerPort: {{ $p.telemetry.metricsPort }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /healthz
      port: perdix-metrics
    periodSeconds: 5
    failureThreshold: 60
  livenessProbe:
    httpGet:
      path: /healthz
      port: perdix-metrics
    periodSeconds: 20
    timeoutSeconds: 5
    failureThreshold: 3
  readinessProbe:
    httpGet:
      path: /readyz
      port: perdix-metrics
    periodSeconds: 10
    timeoutSeconds: 5
    failureThreshold: 3
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- include "perdix.containerSecurityContext" 10001 | nindent 4 }}
  volumeMounts:
    - name: perdix-config
      mountPath: /etc/perdix
      readOnly: true
    - name: perdix-tmp
      mountPath: /tmp
    {{- if include "perdix.usesKubernetes" . }}
    - name: perdix-token
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
    {{- end }}
    {{- if eq $p.knowledge.store "file" }}
    - name: perdix-knowledge
      mountPath: {{ dir $p.knowledge.path }}
    {{- end }}
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* Volumes of the Perdix container. */}}
{{- define "perdix.volumes" -}}
- name: perdix-config
  configMap:
    name: {{ include "perdix.configName" . }}
- name: perdix-tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if include "perdix.usesKubernetes" . }}
- name: perdix-token
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                apiVersion: v1
                fieldPath: metadata.namespace
{{- end }}
{{- if eq .Values.perdix.knowledge.store "file" }}
- name: perdix-knowledge
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Annotations that roll the pod when its configuration changes. */}}
{{- define "perdix.configChecksum" -}}
checksum/perdix-config: {{ include "perdix.settings" . | sha256sum }}
{{- end }}
