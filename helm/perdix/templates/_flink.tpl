{{/*
Pieces shared by the JobManager and TaskManager pods (mode application). The Flink image's entrypoint
writes into its conf directory, so the ConfigMap is copied to an emptyDir first; with that, /tmp and
the log directory on emptyDirs, the Flink containers also run with a read-only root filesystem.
*/}}
{{- define "perdix.flinkInitContainer" -}}
- name: flink-setup
  image: {{ printf "%s:%s" .Values.application.image.repository .Values.application.image.tag }}
  imagePullPolicy: {{ .Values.application.image.pullPolicy }}
  command: ["/bin/sh", "-c"]
  # $1 is application.job.jarPath, passed as an argument rather than spliced into the script.
  args:
    - cp /opt/flink/conf-template/* /opt/flink/conf/ && if [ -n "$1" ]; then cp "$1" /opt/flink/usrlib/; fi
    - flink-setup
    - {{ .Values.application.job.jarPath | quote }}
  resources:
    requests: {cpu: 50m, memory: 32Mi}
    limits: {cpu: 200m, memory: 64Mi}
  securityContext:
    {{- include "perdix.containerSecurityContext" 9999 | nindent 4 }}
  volumeMounts:
    {{- include "perdix.flinkVolumeMounts" . | nindent 4 }}
    - name: flink-conf-template
      mountPath: /opt/flink/conf-template
      readOnly: true
{{- end }}

{{- define "perdix.flinkVolumeMounts" -}}
- name: flink-conf
  mountPath: /opt/flink/conf
- name: flink-log
  mountPath: /opt/flink/log
- name: flink-tmp
  mountPath: /tmp
- name: flink-checkpoints
  mountPath: /flink-checkpoints
{{- if .Values.application.job.jarPath }}
- name: flink-usrlib
  mountPath: /opt/flink/usrlib
{{- end }}
{{- end }}

{{- define "perdix.flinkVolumes" -}}
- name: flink-conf-template
  configMap:
    name: {{ include "perdix.flinkConfName" . }}
- name: flink-conf
  emptyDir:
    sizeLimit: 16Mi
- name: flink-log
  emptyDir:
    sizeLimit: 512Mi
- name: flink-tmp
  emptyDir:
    sizeLimit: 2Gi
- name: flink-checkpoints
{{- if .Values.application.checkpoints.claimName }}
  persistentVolumeClaim:
    claimName: {{ .Values.application.checkpoints.claimName }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- if .Values.application.job.jarPath }}
- name: flink-usrlib
  emptyDir:
    sizeLimit: 1Gi
{{- end }}
{{- end }}

{{- define "perdix.flinkEnv" -}}
- name: JOB_MANAGER_RPC_ADDRESS
  value: {{ include "perdix.jobmanagerName" . }}
{{- end }}
