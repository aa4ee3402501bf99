{{/* The operator's name: Deployment, Service (the webhook's DNS name), ServiceAccount, RBAC. */}}
{{- define "kubetrain.fullname" -}}
{{- .Values.fullnameOverride | default "kubetrain-operator" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubetrain.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "kubetrain.fullname" .) -}}
{{- end -}}

{{/* Secret holding the webhook serving certificate (written by the operator or by cert-manager); the same
name as in manifests/ (kubetrain.k8s.webhook.names.DEFAULT_SECRET). */}}
{{- define "kubetrain.certSecret" -}}
kubetrain-webhook-cert
{{- end -}}

{{- define "kubetrain.labels" -}}
app.kubernetes.io/name: kubetrain
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubetrain
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kubetrain.selectorLabels" -}}
app.kubernetes.io/name: kubetrain
app.kubernetes.io/component: operator
{{- end -}}

{{- define "kubetrain.certManager" -}}
{{- if eq .Values.webhook.certMode "cert-manager" }}true{{ end -}}
{{- end -}}

{{/* One webhook entry; called with a dict (root, svc, ns, name, path, resource, runtime, mutating). */}}
{{- define "kubetrain.webhook" -}}
- name: {{ .name }}
  admissionReviewVersions: [v1]
  clientConfig:
    service:
      name: {{ .svc }}
      namespace: {{ .ns }}
      path: {{ .path }}
      port: 443
  failurePolicy: {{ .root.Values.webhook.failurePolicy }}
  sideEffects: {{ if .mutating }}None{{ else }}NoneOnDryRun{{ end }}
  timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
  rules:
  - apiGroups: [trainer.kubeflow.org]
    apiVersions: [v1alpha1]
    operations: [CREATE, UPDATE]
    resources: [{{ .resource }}]
    scope: "*"
  {{- if .runtime }}
  objectSelector:
    matchExpressions:
    - key: trainer.kubeflow.org/webhook-validation
      operator: NotIn
      values: [disabled]
  {{- end }}
  {{- if .mutating }}
  reinvocationPolicy: Never
  {{- end }}
{{- end -}}
