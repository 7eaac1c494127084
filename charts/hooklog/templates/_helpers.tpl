{{/* The objects' name: RELEASE-webhook, as k8s/webhook/ names them for the release `hooklog`. */}}
{{- define "hooklog.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (default "webhook" .Values.nameOverride) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The selector label, as in k8s/webhook/: stable across upgrades. */}}
{{- define "hooklog.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hooklog.fullname" . }}
{{- end -}}

{{- define "hooklog.labels" -}}
{{ include "hooklog.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference from {repository, tag, digest}: REPOSITORY:TAG[@DIGEST], the tag defaulting to appVersion. Arguments: the value, the root, the value's name, and what the image is (for the error when its repository is missing). */}}
{{- define "hooklog.image" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- $name := index . 2 -}}
{{- $what := index . 3 -}}
{{- $_ := required (printf "%s.repository is required: %s (README, Quick start)" $name $what) $image.repository -}}
{{- $ref := printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) -}}
{{- if $image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" $image.digest) -}}
{{- fail (printf "image digest %q is not sha256:<64 hex digits>" $image.digest) -}}
{{- end -}}
{{- $ref = printf "%s@%s" $ref $image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{- define "hooklog.tlsSecret" -}}
{{- default (printf "%s-tls" (include "hooklog.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/* Fails on values the webhook would refuse at start, so that `helm install` says so. */}}
{{- define "hooklog.validate" -}}
{{- if not (has .Values.tls.mode (list "auto" "certManager" "secret")) -}}
{{- fail (printf "tls.mode %q: must be auto, certManager or secret" .Values.tls.mode) -}}
{{- end -}}
{{- if and (eq .Values.tls.mode "secret") (not .Values.tls.secretName) -}}
{{- fail "tls.mode secret needs tls.secretName (a kubernetes.io/tls Secret) and tls.caBundle" -}}
{{- end -}}
{{- if and (eq .Values.tls.mode "secret") (not .Values.tls.caBundle) -}}
{{- fail "tls.mode secret needs tls.caBundle: the CA of the Secret's certificate, base64" -}}
{{- end -}}
{{- if not (has .Values.sidecar.mode (list "auto" "native" "classic")) -}}
{{- fail (printf "sidecar.mode %q: must be auto, native or classic" .Values.sidecar.mode) -}}
{{- end -}}
{{- range $name, $value := .Values.sidecar.env -}}
{{- if contains "," (toString $value) -}}
{{- fail (printf "sidecar.env.%s: a value holds no comma (the webhook takes NAME=VALUE,...)" $name) -}}
{{- end -}}
{{- end -}}
{{- if not (has (toString .Values.sidecar.output) (list "stdout" "cloudwatch" "stdout,cloudwatch" "cloudwatch,stdout")) -}}
{{- fail (printf "sidecar.output %q: must be stdout, cloudwatch or stdout,cloudwatch" (toString .Values.sidecar.output)) -}}
{{- end -}}
{{- range $kind, $resources := (.Values.sidecar.resources | default dict) -}}
{{- if not (has $kind (list "requests" "limits")) -}}
{{- fail (printf "sidecar.resources.%s: only requests and limits" $kind) -}}
{{- end -}}
{{- range $resource, $quantity := $resources -}}
{{- if not (has $resource (list "cpu" "memory")) -}}
{{- fail (printf "sidecar.resources.%s.%s: only cpu and memory" $kind $resource) -}}
{{- end -}}
{{- if not (regexMatch "^[+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?$" (toString $quantity)) -}}
{{- fail (printf "sidecar.resources.%s.%s %q: not a Kubernetes quantity (100m, 0.5, 64Mi)" $kind $resource (toString $quantity)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (contains "cloudwatch" (toString .Values.sidecar.output)) (not .Values.sidecar.cloudwatch.logGroup) -}}
{{- fail "sidecar.output cloudwatch needs sidecar.cloudwatch.logGroup" -}}
{{- end -}}
{{- if not (has .Values.webhook.failurePolicy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhook.failurePolicy %q: must be Ignore or Fail" .Values.webhook.failurePolicy) -}}
{{- end -}}
{{- if and .Values.webhook.url (not (hasPrefix "https://" .Values.webhook.url)) -}}
{{- fail (printf "webhook.url %q: the API server calls webhooks over https only" .Values.webhook.url) -}}
{{- end -}}
{{- end -}}
