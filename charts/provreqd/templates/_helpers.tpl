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
{{- if ($d.karpenter | default dict).enabled -}}
{{- if not (($d.karpenter.config | default dict).shapes) -}}
{{- fail "drivers.karpenter: config.shapes is required: the shapes of the NodePools that become node groups (docs/drivers.md, \"The karpenter driver\"); a group's template node is never guessed" -}}
{{- end -}}
{{- $list = append $list (dict "name" "karpenter" "path" (printf "%s/karpenter.so" $d.dir) "config" $d.karpenter.config "rules" list) -}}
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
{{- if and $d.kwok.enabled (not $d.kwok.nodeTemplates) -}}
{{- $tdir := toString (default "" (($d.kwok.config | default dict).templateDir)) -}}
{{- if not (include "provreqd.onExtraVolume" (dict "root" $ "path" $tdir)) -}}
{{- fail (printf "drivers.kwok: no nodeTemplates, and its config.templateDir %q is on no volume of extraVolumeMounts (under /etc/provreqd the chart's config volume hides the image's files): give nodeTemplates, or mount the templates with extraVolumes/extraVolumeMounts and point templateDir there" $tdir) -}}
{{- end -}}
{{- end -}}
{{- range $d.custom -}}
{{- $p := toString .path -}}
{{- if not (or (hasPrefix (printf "%s/" (trimSuffix "/" $d.dir)) $p) (include "provreqd.onExtraVolume" (dict "root" $ "path" $p))) -}}
{{- fail (printf "drivers.custom[%s]: path %q is neither in drivers.dir (%s, the image's) nor on a volume of extraVolumeMounts: build it into the image or mount it" .name $p $d.dir) -}}
{{- end -}}
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

{{/*
The controller's config file: files/provreqd.yaml with .Values.config
merged over it key by key (nested maps merged, anything else replaced,
false and 0 included), or a string given as config, whole.
*/}}
{{- define "provreqd.config" -}}
{{- $file := .Files.Get "files/provreqd.yaml" -}}
{{- $c := .Values.config -}}
{{- if kindIs "string" $c -}}
{{- default $file $c -}}
{{- else if $c -}}
{{- $merged := fromYaml $file -}}
{{- include "provreqd.mergeInto" (dict "dst" $merged "src" $c "path" "config") -}}
{{- toYaml $merged -}}
{{- else -}}
{{- $file -}}
{{- end -}}
{{- end -}}

{{/* Merge dict .src into dict .dst in place (sprig's merge skips false and 0). */}}
{{- define "provreqd.mergeInto" -}}
{{- $dst := .dst -}}
{{- range $k, $v := .src -}}
{{- $here := printf "%s.%s" $.path $k -}}
{{- if not (hasKey $dst $k) -}}
{{- fail (printf "%s: provreqd has no such setting (docs/config.md lists them)" $here) -}}
{{- end -}}
{{- $old := get $dst $k -}}
{{- if and (kindIs "map" $v) (kindIs "map" $old) -}}
{{- include "provreqd.mergeInto" (dict "dst" $old "src" $v "path" $here) -}}
{{- else -}}
{{- $_ := set $dst $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the absolute path .path lies on one of .Values.extraVolumeMounts. */}}
{{- define "provreqd.onExtraVolume" -}}
{{- $p := .path -}}
{{- range .root.Values.extraVolumeMounts -}}
{{- $m := trimSuffix "/" (toString .mountPath) -}}
{{- if or (eq $p $m) (hasPrefix (printf "%s/" $m) $p) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The replica count: replicaCount, or its older name replicas (which
     wins when both are set). */}}
{{- define "provreqd.replicas" -}}
{{- if and (hasKey .Values "replicas") (not (kindIs "invalid" .Values.replicas)) -}}
{{- .Values.replicas -}}
{{- else -}}
{{- .Values.replicaCount -}}
{{- end -}}
{{- end -}}

{{/* extraArgs as a JSON list of container arguments: a map's keys in
     order as --KEY=VALUE, or a list's items as they are. */}}
{{- define "provreqd.extraArgs" -}}
{{- $l := list -}}
{{- if kindIs "map" .Values.extraArgs -}}
{{- range $k := keys .Values.extraArgs | sortAlpha -}}
{{- $l = append $l (printf "--%s=%v" (trimPrefix "--" $k) (index $.Values.extraArgs $k)) -}}
{{- end -}}
{{- else -}}
{{- $l = .Values.extraArgs | default list -}}
{{- end -}}
{{- toJson $l -}}
{{- end -}}
