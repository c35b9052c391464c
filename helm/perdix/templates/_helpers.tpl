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
{{- define "perdix.dashboardName" -}}{{ include "perdix.fullname" . | trunc 50 | trimSuffix "-" }}-dashboard{{- end }}

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
The one object Perdix scales, as YAML (kind, name, namespace), with the chart's defaults filled in.
RBAC, the knowledge ConfigMap and the agent's settings all read it from here, so they cannot disagree.
*/}}
{{- define "perdix.scaleTarget" -}}
{{- $t := .Values.perdix.scaleTarget -}}
{{- if eq .Values.flink.mode "standalone" -}}
kind: {{ default "deployment" $t.kind }}
name: {{ default (include "perdix.taskmanagerName" .) $t.name }}
namespace: {{ default .Release.Namespace $t.namespace }}
{{- else -}}
kind: {{ default "flinkdeployment" $t.kind }}
name: {{ default .Values.flink.operator.flinkDeployment $t.name }}
namespace: {{ default .Release.Namespace $t.namespace }}
{{- end }}
{{- end }}

{{- define "perdix.knowledgeConfigMap" -}}
{{- default (printf "%s-knowledge" (include "perdix.fullname" . | trunc 50 | trimSuffix "-")) .Values.perdix.knowledge.configmap }}
{{- end }}

{{/*
Checks that values.schema.json cannot express (relations between keys). Each message names the key.
Included by every template that depends on them, so `helm lint` and `helm template` both fail.
*/}}
{{- define "perdix.validate" -}}
{{- $p := .Values.perdix -}}
{{- $t := include "perdix.scaleTarget" . | fromYaml -}}
{{- if gt (int $p.minParallelism) (int $p.maxParallelism) }}
{{- fail (printf "perdix.minParallelism (%d) must not exceed perdix.maxParallelism (%d)" (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- if and (not (kindIs "invalid" $p.staticParallelism)) (or (lt (int $p.staticParallelism) (int $p.minParallelism)) (gt (int $p.staticParallelism) (int $p.maxParallelism))) }}
{{- fail (printf "perdix.staticParallelism (%d) must lie within perdix.minParallelism..perdix.maxParallelism (%d..%d)" (int $p.staticParallelism) (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- if and (has $p.policy (list "daedalus-per-operator" "justin" "qescalor")) (not (has $t.kind (list "flink-rest" "flinkdeployment"))) }}
{{- fail (printf "perdix.policy (%s) sets the parallelism of each job vertex: perdix.scaleTarget.kind must be flink-rest or flinkdeployment (operator mode), not %s" $p.policy $t.kind) }}
{{- end }}
{{- if and (or (eq $p.policy "hpa") (eq $p.utilization "cpu")) (eq $p.prometheus.workerLabel "subtask_index") }}
{{- fail "perdix.prometheus.workerLabel (subtask_index): perdix.policy hpa and perdix.utilization cpu read CPU per TaskManager: set it to pod (or tm_id), with one slot per TaskManager" }}
{{- end }}
{{- if eq $p.policy "keda-lag" }}
{{- range $key := list "partitionEndOffsets" "partitionCommittedOffsets" }}
{{- if not (index $p.prometheus.queries $key) }}
{{- fail (printf "perdix.prometheus.queries.%s: perdix.policy keda-lag reads the lag of each Kafka partition from its log-end and committed offsets: set partitionEndOffsets and partitionCommittedOffsets (kafka_exporter's series, see values.yaml)" $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- if eq .Values.flink.mode "standalone" }}
{{- if ne $t.kind "deployment" }}
{{- fail (printf "perdix.scaleTarget.kind (%s) must be empty or deployment in standalone mode: Perdix scales the chart's TaskManager Deployment" $t.kind) }}
{{- end }}
{{- if ne $t.name (include "perdix.taskmanagerName" .) }}
{{- fail (printf "perdix.scaleTarget.name (%s) must be empty or %s in standalone mode: Perdix scales the chart's TaskManager Deployment" $t.name (include "perdix.taskmanagerName" .)) }}
{{- end }}
{{- if ne $t.namespace .Release.Namespace }}
{{- fail (printf "perdix.scaleTarget.namespace (%s) must be empty or the release namespace (%s) in standalone mode" $t.namespace .Release.Namespace) }}
{{- end }}
{{- if eq (int .Values.flink.prometheusReporterPort) (int $p.telemetry.metricsPort) }}
{{- fail (printf "flink.prometheusReporterPort (%d) must differ from perdix.telemetry.metricsPort: both listen in the JobManager pod" (int .Values.flink.prometheusReporterPort)) }}
{{- end }}
{{- $replicas := int .Values.flink.taskManager.replicas }}
{{- if or (lt $replicas (int $p.minParallelism)) (gt $replicas (int $p.maxParallelism)) }}
{{- fail (printf "flink.taskManager.replicas (%d) must lie within perdix.minParallelism..perdix.maxParallelism (%d..%d)" $replicas (int $p.minParallelism) (int $p.maxParallelism)) }}
{{- end }}
{{- if not .Values.flink.job.className }}
{{- fail "flink.job.className is required in standalone mode: the entry class of the Flink job" }}
{{- end }}
{{- else }}
{{- if not $t.name }}
{{- fail "flink.operator.flinkDeployment is required in operator mode (or set perdix.scaleTarget.name): the object Perdix scales" }}
{{- end }}
{{- end }}
{{- if eq (int $p.telemetry.metricsPort) 0 }}
{{- fail "perdix.telemetry.metricsPort must be 1..65535 in the chart: the liveness and readiness probes use it" }}
{{- end }}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "serviceAccount.name is required when serviceAccount.create is false" }}
{{- end }}
{{- end }}

{{/*
The agent's settings file, key for key with agent/settings.py (the simulator section is left to its
defaults: it only drives `perdix simulate`). tests/helm loads this through agent.settings.load_settings.
*/}}
{{- define "perdix.settings" -}}
{{- $p := .Values.perdix -}}
{{- $t := include "perdix.scaleTarget" . | fromYaml -}}
{{- $q := $p.prometheus.queries -}}
{{- $queries := dict "workload" $q.workload "throughput" $q.throughput "busy" $q.busy "cpu" $q.cpu "consumer_lag" $q.consumerLag "worker_backlog" $q.workerBacklog "parallelism" $q.parallelism "uptime" $q.uptime "partition_end_offsets" $q.partitionEndOffsets "partition_committed_offsets" $q.partitionCommittedOffsets -}}
{{- $prometheus := dict "url" $p.prometheus.url "timeout_s" $p.prometheus.timeoutSeconds "step_s" $p.prometheus.stepSeconds "stale_after_s" $p.prometheus.staleAfterSeconds "worker_label" $p.prometheus.workerLabel "rate_window_s" $p.prometheus.rateWindowSeconds "source_operator" $p.prometheus.sourceOperator "flink_job" $p.prometheus.flinkJob "queries" $queries -}}
{{- $st := $p.scaleTarget -}}
{{- $scaleTarget := dict "kind" $t.kind "name" $t.name "namespace" $t.namespace "kubeconfig" $st.kubeconfig "rest_url" $st.restUrl "job" $st.job "request_timeout_s" $st.requestTimeoutSeconds "max_retries" $st.maxRetries "recommendation_events" $st.recommendationEvents -}}
{{- $knowledge := dict "store" $p.knowledge.store "path" $p.knowledge.path "configmap" (include "perdix.knowledgeConfigMap" .) -}}
{{- $tm := $p.telemetry -}}
{{- $telemetry := dict "log_format" $tm.logFormat "log_level" $tm.logLevel "metrics_host" $tm.metricsHost "metrics_port" $tm.metricsPort "not_ready_after_failed_loops" $tm.notReadyAfterFailedLoops -}}
{{- $op := $p.operators -}}
{{- $oq := $op.queries -}}
{{- $operatorQueries := dict "records_in" $oq.recordsIn "records_out" $oq.recordsOut "busy" $oq.busy "backpressure" $oq.backpressure "state_size" $oq.stateSize "managed_memory_used" $oq.managedMemoryUsed "cache_hit_rate" $oq.cacheHitRate "state_latency" $oq.stateLatency -}}
{{- $operators := dict "queries" $operatorQueries "warm_up_s" $op.warmUpSeconds "memory_min_mb" $op.memoryMinMb "memory_max_level" $op.memoryMaxLevel "cache_hit_threshold" $op.cacheHitThreshold "latency_threshold_ms" $op.latencyThresholdMs "memory_cost_per_gb" $op.memoryCostPerGb "startup_cost" $op.startupCost "shutdown_cost" $op.shutdownCost -}}
{{- $fa := $p.flinkAutoscaler -}}
{{- $flinkAutoscaler := dict "target_utilization" $fa.targetUtilization "metrics_window_s" $fa.metricsWindowSeconds "stabilization_s" $fa.stabilizationSeconds "catch_up_duration_s" $fa.catchUpDurationSeconds "restart_time_s" $fa.restartTimeSeconds "scale_down_interval_s" $fa.scaleDownIntervalSeconds "backlog_processing_lag_threshold_s" $fa.backlogProcessingLagThresholdSeconds "observed_tpr_lag_threshold_s" $fa.observedTprLagThresholdSeconds -}}
{{- $settings := dict
  "policy" $p.policy
  "target_recovery_time_s" $p.targetRecoveryTimeSeconds
  "loop_interval_s" $p.loopIntervalSeconds
  "min_parallelism" $p.minParallelism
  "max_parallelism" $p.maxParallelism
  "static_parallelism" $p.staticParallelism
  "keda_lag_threshold" $p.kedaLagThreshold
  "source_partitions" $p.sourcePartitions
  "job_name" $p.jobName
  "model_registry" $p.modelRegistry
  "dry_run" $p.dryRun
  "grace_period_s" $p.gracePeriodSeconds
  "recent_rescale_window_s" $p.recentRescaleWindowSeconds
  "scale_down_stabilization_s" $p.scaleDownStabilizationSeconds
  "forecast_horizon_s" $p.forecastHorizonSeconds
  "forecast_window_s" $p.forecastWindowSeconds
  "wape_threshold" $p.wapeThreshold
  "retrain_after_poor_loops" $p.retrainAfterPoorLoops
  "forecast_update_maxiter" $p.forecastUpdateMaxiter
  "forecast_selection" $p.forecastSelection
  "forecast_quantile" $p.forecastQuantile
  "checkpoint_interval_s" $p.checkpointIntervalSeconds
  "downtime_rescale_prior_s" $p.downtimeRescalePriorSeconds
  "downtime_failure_prior_s" $p.downtimeFailurePriorSeconds
  "utilization" $p.utilization
  "max_cpu" $p.maxCpu
  "worker_retention_s" $p.workerRetentionSeconds
  "capacity_prior_path" $p.capacityPriorPath
  "prometheus" $prometheus
  "scale_target" $scaleTarget
  "flink_autoscaler" $flinkAutoscaler
  "knowledge" $knowledge
  "telemetry" $telemetry
  "operators" $operators
-}}
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
The Perdix container, the same in both modes. The ServiceAccount token is mounted into this
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
    - name: MPLCONFIGDIR
      value: /tmp/matplotlib
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
    - name: perdix-token
      mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      readOnly: true
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
