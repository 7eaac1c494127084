{{/* The webhook policy's checks (issue 36), apart from hooklog.validate. */}}

{{/*
Most CAs an auto-TLS caBundle keeps: src/webhook/autotls.rs MAX_BUNDLE (tests/helm.rs reads it
there). Every replica adds its own CA, and a rollout's surge pods (the Deployment's default
maxSurge, 25 %, rounded up) add theirs beside the old ones': more replicas than fit, and the
replicas push each other's CAs out, so that the API server refuses some of them in turn.
*/}}
{{- define "hooklog.maxBundle" -}}8{{- end -}}

{{- define "hooklog.validatePolicy" -}}
{{- if eq .Values.tls.mode "auto" -}}
{{- $replicas := int .Values.replicas -}}
{{- $surge := div (add $replicas 3) 4 -}}
{{- $max := int (include "hooklog.maxBundle" .) -}}
{{- if gt (add $replicas $surge) $max -}}
{{- fail (printf "replicas %d: with tls.mode auto each replica's CA goes into the caBundle, which holds %d CAs; %d replicas and a rollout's %d surge pods need %d (at most 6 replicas, or tls.mode certManager or secret)" $replicas $max $replicas $surge (add $replicas $surge)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.apiServerCIDRs) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.apiServerCIDRs: the API server's addresses (docs/webhook.md, \"NetworkPolicy\")" -}}
{{- end -}}
{{- end -}}
