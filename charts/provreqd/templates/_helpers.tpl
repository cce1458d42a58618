{{/*
The name every object starts with: the release name when it already says
provreqd (so `helm install provreqd` names objects as templates/deploy
does), else RELEASE-provreqd.
*/}}
{{- define "provreqd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "provreqd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "provreqd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "provreqd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "provreqd.labels" -}}
{{ include "provreqd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "provreqd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "provreqd.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace -}}
{{- end -}}

{{/*
The drivers to load, as a JSON list of {name, path, config, rules}; fails
when they cannot share the one --cloud-config provreqd hands to all.
*/}}
{{- define "provreqd.drivers" -}}
{{- $list := list -}}
{{- $d := .Values.drivers -}}
{{- if $d.kwok.enabled -}}
{{- $list = append $list (dict "name" "kwok" "path" (printf "%s/kwok.so" $d.dir) "config" ($d.kwok.config | default dict) "rules" list) -}}
{{- end -}}
{{- if $d.clusterapi.enabled -}}
{{- $list = append $list (dict "name" "clusterapi" "path" (printf "%s/clusterapi.so" $d.dir) "config" ($d.clusterapi.config | default dict) "rules" list) -}}
{{- end -}}
{{- range $d.custom -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$" (toString .name)) -}}
{{- fail (printf "drivers.custom: name %q is not a DNS label of at most 40 characters" (toString .name)) -}}
{{- end -}}
{{- if not .path -}}
{{- fail (printf "drivers.custom[%s]: path (the driver's .so) is required" .name) -}}
{{- end -}}
{{- $list = append $list (dict "name" .name "path" .path "config" (.config | default dict) "rules" (.rules | default list)) -}}
{{- end -}}
{{- $configured := list -}}
{{- range $list -}}
{{- if .config -}}{{- $configured = append $configured .name -}}{{- end -}}
{{- end -}}
{{- if and $configured (gt (len $list) 1) -}}
{{- fail (printf "drivers: %s has a configuration, and provreqd hands its one --cloud-config file to every driver it loads: enable that driver alone" (join ", " $configured)) -}}
{{- end -}}
{{- toJson $list -}}
{{- end -}}

{{/* The --cloud-config text, or empty. */}}
{{- define "provreqd.cloudConfig" -}}
{{- range (include "provreqd.drivers" . | fromJsonArray) -}}
{{- if .config -}}
{{- if kindIs "string" .config -}}{{ .config }}{{- else -}}{{ toYaml .config }}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
